"""Texts two sets share once their spelling is set aside (docs/method.md §10).

A held-out text that is a suspect text with a trailing space, another case or full-width
letters is the same text to the model: the two sets then overlap and the comparison between
them (dataset inference's test, a labelled audit's AUROC) says nothing. :func:`shared_texts`
compares the sets under one normal form, :func:`normal_form`: Unicode NFKC (full-width ``Ａ``,
ligatures ``ﬁ`` and compatibility spaces become their plain forms), case folded, Unicode format
characters (category Cf: zero-width space U+200B, joiner U+200D, soft hyphen U+00AD, byte-order
mark U+FEFF) dropped, whitespace runs collapsed to one space and stripped at both ends.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memprobe_core.snippets.split import MEMBER, NONMEMBER, Snippet

# The key of a run's dataset record holding a labelled overlap (:func:`overlap_record`).
SHARED_TEXTS = "shared_texts"


def normal_form(text: str) -> str:
    """``text`` as the sets are compared: NFKC, case folded (NFKC again: folding can leave a
    non-normal form, as the Unicode standard's caseless matching does), format characters
    (category Cf, invisible: U+200B, U+200D, U+00AD, U+FEFF …) dropped, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    visible = "".join(c for c in folded if unicodedata.category(c) != "Cf")
    return " ".join(visible.split())


@dataclass(frozen=True)
class Overlap:
    """Texts in both sets under :func:`normal_form`.

    Attributes:
        count: distinct shared texts (normal forms).
        first_id / second_id: one shared text's id in each set.
        text: that text, as the first set has it.
    """

    count: int
    first_id: str
    second_id: str
    text: str

    def example(self, first: str, second: str) -> str:
        """``member 'a:1' and non-member 'b:7' ('the text…')`` for a message (``first`` and
        ``second``: what the sets are called)."""
        return f"{first} {self.first_id!r} and {second} {self.second_id!r}: {self.text[:60]!r}"


def shared_texts(first: Iterable[Snippet], second: Iterable[Snippet]) -> Overlap | None:
    """The texts ``first`` and ``second`` share under :func:`normal_form` (``None``: none).
    The example is the first set's earliest shared text."""
    firsts: dict[str, Snippet] = {}
    for snippet in first:
        firsts.setdefault(normal_form(snippet.text), snippet)
    shared: dict[str, Snippet] = {}
    for snippet in second:
        form = normal_form(snippet.text)
        if form in firsts:
            shared.setdefault(form, snippet)
    if not shared:
        return None
    order = list(firsts)
    form = min(shared, key=order.index)
    return Overlap(len(shared), firsts[form].id, shared[form].id, firsts[form].text)


def labelled_overlap(snippets: Iterable[Snippet]) -> Overlap | None:
    """The texts a labelled dataset's members and non-members share (``None``: none, or not
    labelled). A labelled audit is not refused for them (docs/method.md §10): it is warned
    about and recorded in the run (:func:`overlap_record`), and the report names it."""
    snippets = list(snippets)
    return shared_texts(
        (s for s in snippets if s.label == MEMBER), (s for s in snippets if s.label == NONMEMBER)
    )


def overlap_record(overlap: Overlap) -> dict[str, Any]:
    """What a run's dataset record keeps of a labelled overlap (``shared_texts``)."""
    return {
        "count": overlap.count,
        "member_id": overlap.first_id,
        "nonmember_id": overlap.second_id,
        "note": labelled_note(overlap),
    }


def labelled_note(overlap: Overlap) -> str:
    """The warning (and the report's note) on a labelled overlap."""
    return (
        f"{overlap.count} text(s) are both a member and a non-member once whitespace, case and "
        f"Unicode forms are set aside (e.g. {overlap.example('member', 'non-member')}): such a "
        "text cannot tell the labels apart, so the AUROC and TPR here are pulled toward chance; "
        "remove each from one of the two sets"
    )
