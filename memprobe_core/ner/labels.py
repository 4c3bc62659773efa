"""Finding a token classifier's person (PER) labels in ``config.id2label``.

Label ids are never hard-coded (docs/method.md §5): each hub model numbers its labels its own way.
Two schemes are recognised:

* **BIO / IOB1 / BIOES**: ``B-PER``, ``I-PER`` (and ``S-PER``/``E-PER`` if present);
  the separator may be ``-`` or ``_`` and the type ``PER`` or ``PERSON``, any case.
* **plain**: a single ``PER`` (or ``PERSON``) label.

The confidence of a sub-token being a person is the max over the PER label probabilities, which for
BIO is ``max(P(B-PER), P(I-PER))`` as in the paper and for the plain scheme ``P(PER)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from memprobe_core.errors import MemprobeError

# The embedded NER model's label set (CoNLL-2003's, BIO).
CONLL_LABELS: tuple[str, ...] = (
    "O",
    "B-PER",
    "I-PER",
    "B-LOC",
    "I-LOC",
    "B-ORG",
    "I-ORG",
    "B-MISC",
    "I-MISC",
)

_PREFIXED = re.compile(r"^([BIESL])[-_](PER|PERSON)$", re.IGNORECASE)
_PLAIN = re.compile(r"^(PER|PERSON)$", re.IGNORECASE)


class LabelError(MemprobeError, ValueError):
    """The model's labels have no person (PER) label; the message lists the labels seen."""


@dataclass(frozen=True)
class PerLabels:
    """Where the person labels sit in a model's output.

    Attributes:
        ids: every PER label id (B-, I-, S-, E- or plain), sorted.
        begin_ids: ids of ``B-``/``S-`` PER labels (empty for the plain scheme).
        inside_ids: ids of ``I-``/``E-``/``L-`` PER labels (empty for the plain scheme).
        scheme: ``"bio"`` (prefixed labels) or ``"plain"`` (a single PER label).
        names: the label names of ``ids``, in the same order.
    """

    ids: tuple[int, ...]
    begin_ids: tuple[int, ...]
    inside_ids: tuple[int, ...]
    scheme: Literal["bio", "plain"]
    names: tuple[str, ...]


def find_per_labels(id2label: Mapping[int | str, str]) -> PerLabels:
    """Find the PER label ids in a model's ``config.id2label``.

    Args:
        id2label: label id → label name (keys may be strings, as in JSON configs).

    Returns:
        The PER label ids and the scheme they follow.

    Raises:
        LabelError: no PER label, or a mix of prefixed and plain PER labels; the message names
            every label seen so the user can tell whether this is a NER model at all.
    """
    begin: list[int] = []
    inside: list[int] = []
    plain: list[int] = []
    names: dict[int, str] = {}
    for raw_id, raw_name in id2label.items():
        label_id = int(raw_id)
        name = str(raw_name).strip()
        names[label_id] = name
        prefixed = _PREFIXED.match(name)
        if prefixed:
            (begin if prefixed.group(1).upper() in ("B", "S") else inside).append(label_id)
        elif _PLAIN.match(name):
            plain.append(label_id)
    seen = ", ".join(names[i] for i in sorted(names))
    if not (begin or inside or plain):
        hint = (
            " The labels look generic (LABEL_n): the checkpoint's config has no label names; "
            "this is not a usable NER checkpoint."
            if names and all(re.fullmatch(r"LABEL_\d+", n) for n in names.values())
            else ""
        )
        raise LabelError(
            f"no person label (B-PER/I-PER or PER) in the model's config.id2label; labels seen: "
            f"[{seen}].{hint} Use a token-classification model trained with person labels."
        )
    if plain and (begin or inside):
        raise LabelError(
            f"the model mixes plain and prefixed person labels ([{seen}]); cannot tell which "
            "scheme it follows"
        )
    ids = tuple(sorted(begin + inside + plain))
    return PerLabels(
        ids=ids,
        begin_ids=tuple(sorted(begin)),
        inside_ids=tuple(sorted(inside)),
        scheme="plain" if plain else "bio",
        names=tuple(names[i] for i in ids),
    )
