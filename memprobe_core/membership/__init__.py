"""Membership inference and verbatim extraction beside the extraction methods.

- :mod:`.measure`: what the unit runner measures beside each result (verbatim metrics, signals).
- :mod:`.options`: what is measured (``MeasureOptions``) and the one list of signals (``SIGNALS``).
- :mod:`.signals`: loss, perplexity, zlib, lowercase, Min-K%, Min-K%++ and reference ratio of a
  snippet, from one batched forward pass of a white-box victim (:mod:`.scoring_pass`: the rows
  and the pass; :mod:`.token_stats`: the statistics and the signals computed from them).
- :mod:`.samia`: SaMIA, ROUGE-1 recall of continuations sampled from the victim (no log-probs
  needed), off unless ``samia_samples`` is set.
- :mod:`.verbatim`: k-extractability and the longest verbatim span of an output.
- :mod:`.evaluate`: AUROC and TPR at fixed FPR, with bootstrap intervals, on labelled audits.
- :mod:`.blind`: the validity controls of a labelled audit: a blind baseline that never sees the
  model, and a random split of the members.
- :mod:`.verdict`: what a dataset inference or a membership table allows once those controls
  have had their say (evidence, no evidence, inconclusive), shown first in every report.
- the generated non-member corpus (text no model can have seen) is in
  :mod:`memprobe_core.snippets.nonmembers`, beside the other snippet sources.
"""

from memprobe_core.membership.options import (
    DEFAULT_EXTRACT_K,
    DEFAULT_MIN_K_PERCENT,
    SIGNAL_BY_NAME,
    SIGNALS,
    MeasureOptions,
    SignalSpec,
)

__all__ = [
    "DEFAULT_EXTRACT_K",
    "DEFAULT_MIN_K_PERCENT",
    "SIGNALS",
    "SIGNAL_BY_NAME",
    "MeasureOptions",
    "SignalSpec",
]
