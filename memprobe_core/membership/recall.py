"""ReCaLL and Con-ReCall: how a text's log-likelihood changes with labelled texts in front of it
(docs/method.md §8).

- **ReCaLL** (Xie et al. 2024, "ReCaLL: Membership Inference via Relative Conditional
  Log-Likelihoods"): ``LL(x | P_non) / LL(x)``, ``P_non`` non-member texts. Conditioning on
  non-members lowers a member's likelihood more than a non-member's, so a member's ratio is
  larger (both log-likelihoods are negative).
- **Con-ReCall** (Wang et al. 2024, "Con-ReCall: Detecting Pre-training Data in LLMs via
  Contrastive Decoding"): ``(LL(x | P_non) − LL(x | P_mem)) / LL(x)``, ``P_mem`` member texts
  (γ = 1, as its reference implementation); larger for members.

``LL`` is a mean token log-probability. ``LL(x)`` is the loss signal's (``-loss``: the tokens the
tokenizer's own encoding gives a context); ``LL(x | P)`` averages every token of ``x`` after
``P`` (each has a context there). The prefix is the texts, each cut to ``x``'s length in
characters, joined by a blank line (the reference code joins whole texts with nothing, which
glues one text's last word to the next one's first).

The texts used as prefixes are labelled snippets of the audit itself, picked before it runs
(:func:`with_recall_prefixes`); they are named in the run's config and left out of the evaluated
set (their own ratio would be measured against themselves).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from memprobe_core.errors import UsageError
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.snippets.split import MEMBER, NONMEMBER, Snippet, leading_special_ids

PREFIX_SEPARATOR = "\n\n"


def with_recall_prefixes(options: MeasureOptions, snippets: Sequence[Snippet]) -> MeasureOptions:
    """``options`` with ReCaLL's prefixes picked from ``snippets`` (unchanged when
    ``recall_shots`` is 0 or the prefixes are already picked, as in a stored config).

    The first ``recall_shots`` members and non-members in dataset order are taken, so a run is
    reproducible from its dataset.

    Raises:
        UsageError: the audit is not labelled, or a class has too few texts to give
            ``recall_shots`` and still leave one to evaluate.
    """
    shots = options.recall_shots
    if shots == 0 or options.recall_prefix_ids:
        return options
    members = [s for s in snippets if s.label == MEMBER]
    nonmembers = [s for s in snippets if s.label == NONMEMBER]
    for name, texts in (("members", members), ("non-members", nonmembers)):
        if len(texts) <= shots:
            raise UsageError(
                f"recall_shots={shots}: ReCaLL puts {shots} labelled {name} in front of every "
                f"text and leaves them out of the evaluation, but the dataset has {len(texts)}; "
                f"give a labelled dataset with more than {shots} {name}, or a smaller "
                "recall_shots (0 turns ReCaLL off)"
            )
    picked_members, picked_nonmembers = members[:shots], nonmembers[:shots]
    return replace(
        options,
        recall_prefix_ids=tuple(s.id for s in [*picked_members, *picked_nonmembers]),
        recall_member_prefix=tuple(s.text for s in picked_members),
        recall_nonmember_prefix=tuple(s.text for s in picked_nonmembers),
    )


def prefix_text(texts: Sequence[str], max_chars: int) -> str:
    """The prefix put in front of a text of ``max_chars`` characters: each of ``texts`` cut to
    that many characters, joined by a blank line, ending in one.

    Cut because an audit's texts are whole documents (a licence runs to thousands of tokens)
    while ``x`` is a unit's first ``length`` tokens: uncut, one shot made the signals cost 1.6×
    a P-S unit and could pass the model's context window. Characters, not tokens, so a
    black-box victim (no tokenizer here) gets the very same prefix.
    """
    return PREFIX_SEPARATOR.join(t[:max_chars] for t in texts) + PREFIX_SEPARATOR


def conditioned_row(tokenizer: Any, prefix: str, ids: Sequence[int]) -> tuple[list[int], int]:
    """The ids fed for ``x`` (text ids ``ids``) after ``prefix``, and where ``x`` starts in them.

    What the tokenizer puts in front by default comes first (as :func:`signals.model_row`),
    then the prefix's tokens, then ``x``'s.
    """
    prefix_ids = list(tokenizer.encode(prefix, add_special_tokens=False))
    front = leading_special_ids(tokenizer, prefix, prefix_ids)
    row = [*front, *prefix_ids, *ids]
    return row, len(front) + len(prefix_ids)


def recall_scores(
    log_likelihood: float, nonmember_ll: float, member_ll: float | None
) -> dict[str, float | None]:
    """ReCaLL and Con-ReCall from the three mean log-likelihoods (``member_ll`` ``None``: no
    member prefix, Con-ReCall not measured); ``None`` for a text whose ``LL(x)`` is 0 or where
    a log-likelihood is not finite (see ``signals._non_finite``)."""
    values = [log_likelihood, nonmember_ll] + ([] if member_ll is None else [member_ll])
    if log_likelihood == 0 or not all(math.isfinite(v) for v in values):
        return {"recall": None, "con_recall": None}
    return {
        "recall": nonmember_ll / log_likelihood,
        "con_recall": None if member_ll is None else (nonmember_ll - member_ll) / log_likelihood,
    }


def is_prefix_text(options: MeasureOptions, snippet_id: str) -> bool:
    """Whether the snippet is one of the run's ReCaLL prefixes (left out of the evaluation)."""
    return snippet_id in options.recall_prefix_ids
