"""Many-prompt robustness: how many distinct prompts of a unit made the victim give the suffix
back (docs/method.md §23; after Dang & Mohaisen 2025, "Memories Retrieved from Many Paths",
arXiv 2511.20799: a memory reached by many distinct prompts is held firmly, one reached by a
single prompt may be a lucky path).

A method that writes several prompts of its own for one unit (the attacker loop writes one
initial prompt and ``n`` per round) already scores each one's answer: this module counts, over
all its candidates, the distinct prompts whose answer **elicits** the suffix. It asks no model
and reads only each candidate's prompt, Mem and LCS_P, so it is pure and cheap.

- **Elicits**: ``Mem − LCS_P ≥ threshold``: the answer holds at least ``threshold`` more of
  the suffix (ROUGE-L recall) than the prompt itself held. A prompt that hands the victim the
  text is not a path to a memory: one holding the whole suffix has LCS_P = 1 and never counts,
  however well the victim copies it. Mem − LCS_P is twice the search's objective at α = ½.
- **Distinct**: by :func:`prompt_key` (NFKC, case folded, whitespace collapsed, trailing
  punctuation dropped); a group of prompts with one key counts once when any of them elicits.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from typing import Protocol

from memprobe_core.records import JsonValue, VerbatimRecord

# The default threshold on Mem − LCS_P. Unrelated English text already reaches Mem ≈ 0.3 against
# a suffix through function words alone (docs/method.md §2, "Chance level of Mem"); 0.5 asks for
# more than half of the suffix's words, in order, beyond what the prompt held: well above that
# floor, and reachable by a partial recollection rather than only a verbatim one.
ELICITING_THRESHOLD = 0.5
# ROUGE-L recalls are ratios k/n; their difference in floats may land a hair below the exact
# value (0.7 − 0.2 = 0.4999…), which must still count as reaching 0.5.
_TOLERANCE = 1e-9

# The record's keys (``AttackResult.verbatim``; ``memprobe probe --json``).
ELICITING_PROMPTS = "eliciting_prompts"
ELICITING_THRESHOLD_KEY = "eliciting_threshold"


class ScoredPrompt(Protocol):
    """What is read of a candidate (``memprobe_core.attacks.result.Candidate`` has it)."""

    prompt: str
    mem: float
    lcs_p: float


def prompt_key(prompt: str) -> str:
    """The text two prompts must share to count as one.

    Unicode NFKC (full-width and ligature forms read as their plain letters), case folded,
    every run of whitespace one space, leading and trailing whitespace and trailing punctuation
    dropped. The attacker samples its questions, and samples differ in exactly these ways
    ("Recite the licence." / "recite the licence?" / "Recite  the licence"): the victim is asked
    the same thing, so they are one path, not three. Punctuation inside a prompt stays: a quote
    or a list can change what is asked. NFKC is applied again after case folding, as Unicode's
    NFKC_Casefold does, because folding can produce a character NFKC would rewrite.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", prompt).casefold())
    text = " ".join(folded.split())
    end = len(text)
    while end and (text[end - 1].isspace() or unicodedata.category(text[end - 1]).startswith("P")):
        end -= 1
    return text[:end]


def elicits(mem: float, lcs_p: float, threshold: float = ELICITING_THRESHOLD) -> bool:
    """Whether an answer scoring ``mem`` to a prompt scoring ``lcs_p`` elicits the suffix."""
    return mem - lcs_p >= threshold - _TOLERANCE


def count_eliciting_prompts(
    candidates: Iterable[ScoredPrompt], threshold: float = ELICITING_THRESHOLD
) -> int:
    """The distinct prompts (:func:`prompt_key`) among ``candidates`` of which at least one
    elicits the suffix (:func:`elicits`). A prompt with nothing left under the rule (empty, or
    only spaces and punctuation) is no path and is not counted.

    Raises:
        ValueError: a threshold outside (0, 1] (at 0, an answer no better than its prompt
            would count).
    """
    _check_threshold(threshold)
    keys = {
        prompt_key(c.prompt) for c in candidates if elicits(float(c.mem), float(c.lcs_p), threshold)
    }
    keys.discard("")
    return len(keys)


def eliciting_record(
    candidates: Iterable[ScoredPrompt], threshold: float = ELICITING_THRESHOLD
) -> VerbatimRecord:
    """``{"eliciting_prompts": count, "eliciting_threshold": threshold}`` for a unit's result."""
    return {
        ELICITING_PROMPTS: count_eliciting_prompts(candidates, threshold),
        ELICITING_THRESHOLD_KEY: threshold,
    }


def describe_eliciting(verbatim: Mapping[str, JsonValue]) -> str | None:
    """One line on a result that counted its eliciting prompts (``None`` for one that did not)."""
    count = verbatim.get(ELICITING_PROMPTS)
    threshold = verbatim.get(ELICITING_THRESHOLD_KEY)
    if not isinstance(count, int) or not isinstance(threshold, (int, float)):
        return None
    prompts = "prompt" if count == 1 else "prompts"
    return (
        f"Many-prompt robustness: {count} distinct {prompts} elicited the suffix "
        f"(answer's Mem − prompt's LCS_P ≥ {threshold:.2f})."
    )


def _check_threshold(threshold: float) -> None:
    if not 0 < threshold <= 1:
        raise ValueError(
            f"eliciting threshold {threshold!r} is outside (0, 1]; give a share of the suffix "
            f"such as the default {ELICITING_THRESHOLD}"
        )
