"""SaMIA: the membership signal of sampled continuations (docs/method.md §8).

Kaneko et al. 2024, "Sampling-based Pseudo-Likelihood for Membership Inference Attacks"
(arXiv:2404.11262; reference code github.com/nlp-titech/samia, ``src/sampling.py`` and
``src/eval_samia.py``): sample ``N`` continuations of the snippet's prefix from the victim and
score each by ROUGE-1 **recall** against the true suffix; the signal is their mean. A member's
continuations repeat more of its suffix, so higher means member. It needs generated text only, no
log-probs, so a black-box victim that cannot score a text still gets it.

- **ROUGE-1 recall** of the reference code: ``|words(c) ∩ words(s)| / |words(s)|`` with the
  intersection of word *counts* (a multiset), words being whitespace-separated strings as they
  are: case kept, punctuation attached, no stemming; 0 for a sample with no word.
- ``samia_zlib`` (SaMIA*zlib, the reference code's ``--zlib``): each sample's recall times the
  length in **bytes** of ``zlib.compress(" ".join(words(c)).encode("utf-8"))``, then the mean.
- Sampling as the reference code: temperature 1, top-p 1, one request of ``N`` samples (the
  backend's own batched generation); seeded with the run's seed. The budget is the unit's
  ``len(suffix)`` tokens and the prompt its own prefix (docs/method.md §8 gives the deviations).

Results are cached per (victim, prefix, suffix, sampling settings): the methods of an audit share
a snippet and length and would otherwise sample ``N`` times each.
"""

from __future__ import annotations

import logging
import zlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

from memprobe_core.membership.options import MeasureOptions
from memprobe_core.models.base import Decoding, Generator
from memprobe_core.models.measure_cache import MeasureCache, model_key
from memprobe_core.records import MembershipRecord
from memprobe_core.secrets import redact_secrets
from memprobe_core.snippets.split import SplitSnippet

log = logging.getLogger(__name__)

# The reference code's sampler (src/sampling.py): do_sample, temperature=1, top_p=1 (its top_k=50
# has no counterpart in memprobe's Generator interface or the OpenAI API: not applied).
SAMIA_TEMPERATURE = 1.0
SAMIA_TOP_P = 1.0
NOT_MEASURED = "samia_not_measured"

_CACHE = MeasureCache()


def clear_cache() -> None:
    """Forget every cached SaMIA result (benchmarks time the sampling itself)."""
    _CACHE.clear()


def words(text: str) -> list[str]:
    """The words ROUGE-1 compares: whitespace-separated, as they are (the reference code's
    ``split(" ")`` without its empty strings, splitting at newlines and tabs too)."""
    return text.split()


def rouge1_recall(candidate: Sequence[str], reference: Sequence[str]) -> float:
    """ROUGE-1 recall: shared words, counted with multiplicity, over the reference's words.

    Raises:
        ValueError: ``reference`` has no word (recall is undefined).
    """
    if not reference:
        raise ValueError("ROUGE-1 recall of an empty reference is undefined")
    overlap = Counter(candidate) & Counter(reference)
    return sum(overlap.values()) / len(reference)


def samia_scores(samples: Sequence[str], suffix: str) -> dict[str, float | None]:
    """``samia`` and ``samia_zlib`` of sampled continuations against the true suffix.

    Both are ``None`` when the suffix has no word or there is no sample (never a made-up 0).
    """
    reference = words(suffix)
    if not reference or not samples:
        return {"samia": None, "samia_zlib": None}
    recalls, weighted = [], []
    for sample in samples:
        candidate = words(sample)
        recall = rouge1_recall(candidate, reference)
        recalls.append(recall)
        weighted.append(recall * len(zlib.compress(" ".join(candidate).encode("utf-8"))))
    return {"samia": sum(recalls) / len(recalls), "samia_zlib": sum(weighted) / len(weighted)}


def samia_decoding(piece: SplitSnippet, options: MeasureOptions, seed: int) -> Decoding:
    """How the victim samples for SaMIA: ``samia_samples`` continuations of ``len(suffix)``
    tokens at temperature 1, seeded."""
    return Decoding(
        max_new_tokens=max(1, piece.suffix_tokens),
        temperature=SAMIA_TEMPERATURE,
        top_p=SAMIA_TOP_P,
        n=options.samia_samples,
        seed=seed,
    )


def measure_samia(
    victim: Generator, piece: SplitSnippet, options: MeasureOptions, *, seed: int
) -> MembershipRecord:
    """SaMIA of ``piece`` on ``victim`` (one generate call of ``samia_samples`` samples).

    Returns:
        ``{}`` when ``samia_samples`` is 0; else ``samia``, ``samia_zlib`` and ``samia_sampling``
        (samples, seed, temperature, top-p, budget, tokens generated), or ``samia_not_measured``
        with the reason (signals off, generation failed, a suffix without a word).
    """
    if options.samia_samples == 0:
        return {}
    if not options.signals:
        return {NOT_MEASURED: "membership signals are off (signals=False, --no-signals)"}
    decoding = samia_decoding(piece, options, seed)
    key = (model_key(victim), piece.prefix, piece.suffix, decoding)
    cached = _CACHE.get(key)
    if cached is not None:
        return {**cached, "samia_sampling": dict(cached["samia_sampling"])}
    try:
        completions = victim.generate([piece.prefix], **decoding.kwargs())[0]
    except Exception as exc:  # recorded: the unit and its other signals stand without SaMIA
        message = redact_secrets(f"{type(exc).__name__}: {exc}")
        log.warning("SaMIA of %s not measured: sampling failed: %s", piece.snippet.id, message)
        return {NOT_MEASURED: f"sampling the victim failed: {message}"}
    scores = samia_scores([c.text for c in completions], piece.suffix)
    if scores["samia"] is None:
        why = "the true suffix has no word to compare with" if completions else "no sample came"
        log.warning("SaMIA of %s not measured: %s", piece.snippet.id, why)
        return {NOT_MEASURED: why}
    out: dict[str, Any] = {
        **scores,
        "samia_sampling": {
            "samples": len(completions),
            "seed": seed,
            **decoding.manifest(),
            "top_k": None,
            "generated_tokens": sum(c.num_tokens for c in completions),
        },
    }
    _CACHE.put(key, out)
    return {**out, "samia_sampling": dict(out["samia_sampling"])}
