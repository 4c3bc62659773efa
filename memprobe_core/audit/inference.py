"""Dataset-inference runs (docs/method.md §10): an audit of the signals-only method over a
suspect set and a held-out set.

One place builds such a run for the CLI (``memprobe infer``) and the Audit page: the suspect
texts are labelled ``member`` and the held-out texts ``nonmember`` (so the membership table, the
blind baseline and the random-split control read them as any labelled audit), their ids are
prefixed with their set (two files' default ids may collide), and the run's dataset record holds
the test's settings under ``inference`` — which is what makes the report
(:func:`memprobe_core.report.build.report_for_run`) add the test. Stored, run and resumed as any
audit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.signals_only import METHOD
from memprobe_core.audit.audit import start_audit
from memprobe_core.config import DEFAULT_PREFIX_RATIO
from memprobe_core.errors import UsageError
from memprobe_core.membership.inference import MIN_TEXTS, check_significance
from memprobe_core.runs.roles import ModelNames
from memprobe_core.snippets.overlap import Overlap, shared_texts
from memprobe_core.snippets.split import MEMBER, NONMEMBER, Snippet

# Each set's name (its ids' prefix and its domain) and the label its texts get.
SETS = {"suspect": MEMBER, "heldout": NONMEMBER}


class TooFewTexts(UsageError):
    """A set has fewer texts than the test's halves need (``which``: ``suspect`` / ``heldout``)."""

    def __init__(self, which: str, count: int) -> None:
        self.which, self.count = which, count
        super().__init__(
            f"the {'suspect' if which == 'suspect' else 'held-out'} set has {count} usable "
            f"text(s); dataset inference splits each set in two halves and needs at least "
            f"{MIN_TEXTS} texts in each (Maini et al. use hundreds: give more texts)"
        )


class SharedTexts(UsageError):
    """The two sets share texts (``overlap``, compared under
    :func:`memprobe_core.snippets.overlap.normal_form`): a held-out text must be one the model
    cannot have seen."""

    def __init__(self, overlap: Overlap) -> None:
        self.overlap, self.count = overlap, overlap.count
        super().__init__(
            f"{overlap.count} text(s) are in both the suspect and the held-out set once "
            "whitespace, case and Unicode forms are set aside (e.g. "
            f"{overlap.example('suspect', 'held-out')}); the held-out set must hold texts the "
            "model cannot have seen: remove them from one of the two"
        )


# A number this long in a run's title (a 64-bit seed has up to 20 digits) is cut to its first
# digits: the title is for finding the run; the whole number stays in the run's manifest.
_LONG_NUMBER = re.compile(r"\d{10,}")
SHORT_DIGITS = 6


def short_numbers(title: str) -> str:
    """``title`` with each run of 10 or more digits cut to its first :data:`SHORT_DIGITS` and
    "…": ``seed 8678137284779500208`` → ``seed 867813…``."""
    return _LONG_NUMBER.sub(lambda m: m[0][:SHORT_DIGITS] + "…", title)


def inference_snippets(suspect: Sequence[Snippet], heldout: Sequence[Snippet]) -> list[Snippet]:
    """Both sets as one labelled dataset (suspect first), ids prefixed with the set's name.

    Raises:
        TooFewTexts: a set has fewer than ``MIN_TEXTS`` texts.
        SharedTexts: a text is in both sets (the same file given twice, say), up to whitespace,
            case and Unicode forms (:func:`memprobe_core.snippets.overlap.shared_texts`).
    """
    overlap = shared_texts(suspect, heldout)
    if overlap is not None:
        raise SharedTexts(overlap)
    out = []
    for which, texts in (("suspect", suspect), ("heldout", heldout)):
        if len(texts) < MIN_TEXTS:
            raise TooFewTexts(which, len(texts))
        out += [replace(s, id=f"{which}:{s.id}", label=SETS[which], domain=which) for s in texts]
    return out


def start_inference(
    store: Any,
    suspect: Sequence[Snippet],
    heldout: Sequence[Snippet],
    lengths: Sequence[int],
    options: AttackOptions | None = None,
    models: ModelNames | None = None,
    *,
    significance: float,
    sources: tuple[str, str] = ("suspect", "held-out"),
    title: str = "",
    split_tokenizer: str = "model",
    prefix_ratio: float = DEFAULT_PREFIX_RATIO,
) -> int:
    """Record a dataset-inference run and return its id; nothing runs yet (``run_audit``).

    Args:
        suspect / heldout: the two sets' texts (labels and ids of their own are replaced).
        lengths: tokens of each text scored; one test per length.
        options: the measure options (the signals-only method has no others); ``seed`` also
            seeds the test's random halves.
        significance: the level of the one-sided test (changeable at report time).
        sources: where each set came from (file names), for the record.
        split_tokenizer / prefix_ratio: how each text is cut into prefix and suffix (the suffix
            loss and SaMIA read the cut), as ``start_audit``.

    Raises:
        TooFewTexts: a set is too small. OptionError: ``significance`` not in (0, 1).
        ValueError: as ``start_audit`` (lengths, a recall option on these texts …).
    """
    # The test reads the membership signals alone (docs/method.md §10, "Dataset inference"):
    # p_z and what is measured beside it (the near-verbatim bound, the rank-based cost, the
    # prior-aware check) describe extraction, which it never reads, and the near-verbatim
    # search alone cost 3-5 times a text's signals on the embedded Gemma (length 64).
    options = options or AttackOptions()
    options = replace(options, measure=replace(options.measure, pz=False, pam=False))
    level = check_significance(significance)
    snippets = inference_snippets(suspect, heldout)
    dataset = {
        "source": f"{sources[0]} (suspect) + {sources[1]} (held-out)",
        "inference": {
            "suspect": sources[0],
            "heldout": sources[1],
            "significance": level,
            "seed": options.seed,
        },
    }
    return start_audit(
        store,
        snippets,
        [METHOD],
        lengths,
        options,
        models,
        title=title or short_numbers(f"infer {sources[0]} vs {sources[1]}"),
        split_tokenizer=split_tokenizer,
        prefix_ratio=prefix_ratio,
        dataset=dataset,
    )
