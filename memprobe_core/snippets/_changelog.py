"""Release entries and their dates, read from the changelogs packages ship in their metadata.

Many packages put their changelog in the long description of their metadata (the ``METADATA``
file of a ``*.dist-info`` folder): one heading per release, with the release's date in the
heading or on the line under it. :func:`release_entries` cuts such a text into
:class:`ReleaseEntry` items — the heading and the lines up to the next release heading, exactly
as they are in the file — and reads each one's date (:func:`parse_date`). A heading counts as a
release heading when it names a version (``3.5.3``, ``v2.14.0b1``); a release without a readable
date keeps ``date=None`` (a caller that needs dates skips it).

Headings are Markdown ATX (``## 1.0.9 (April 24th, 2025)``) or reStructuredText / setext (a line
underlined with ``-``, ``=``, ``~``, ``^``, ``*`` or ``+``). Dates are ISO (``2024-11-20``, also
with ``/`` or ``.``), day-month-year (``08-Mar-2021``, ``8 March 2021``) or month-day-year
(``April 24th, 2025``, ``Mar 8, 2021``).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_MONTH_NAMES = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTHS = {name[:3]: number for number, name in enumerate(_MONTH_NAMES, 1)}
_DATE = re.compile(
    r"\b(?P<y>20\d\d)[-/.](?P<m>\d\d)[-/.](?P<d>\d\d)\b"
    r"|\b(?P<d2>\d{1,2})[- ](?P<mon2>[A-Za-z]{3,9})\.?[- ,]+(?P<y2>20\d\d)\b"
    r"|\b(?P<mon3>[A-Za-z]{3,9})\.? (?P<d3>\d{1,2})(?:st|nd|rd|th)?,? (?P<y3>20\d\d)\b"
)
_VERSION = re.compile(r"(?<![\w.])v?\d+\.\d+(?:\.\d+)*(?:[-.]?(?:a|b|rc|dev|post)\.?\d*)?(?![\w])")
_ATX = re.compile(r"^(#{1,6})\s+\S")
_UNDERLINE = re.compile(r"^([-=~^*+])\1{2,}\s*$")
# The date of an entry is looked for in its heading, then in the first non-blank line under it
# when that line is short (a date line, not a paragraph that happens to name a date).
_DATE_LINE_MAX_CHARS = 200


@dataclass(frozen=True)
class ReleaseEntry:
    """One release of a changelog.

    Attributes:
        heading: the heading line, stripped (``## 1.0.9 (April 24th, 2025)``).
        version: the first version named in the heading (``1.0.9``).
        date: the release date read from the heading or the line under it (None: none found).
        text: the entry as it is in the changelog: heading, underline and body, outer blank
            lines stripped.
        line: index of the heading's line in the changelog (0-based).
    """

    heading: str
    version: str
    date: dt.date | None
    text: str
    line: int


def parse_date(text: str) -> dt.date | None:
    """The first real calendar date written in ``text`` (years 2000–2099); None if there is none.

    ``2024-11-20``, ``2024/11/20``, ``08-Mar-2021``, ``8 March 2021``, ``April 24th, 2025`` and
    ``Mar 8, 2021`` are read; a match that is no date (``2023-13-40``, ``Foo 3, 2020``) is passed
    over and the next one tried.
    """
    for match in _DATE.finditer(text):
        try:
            if match["y"]:
                return dt.date(int(match["y"]), int(match["m"]), int(match["d"]))
            if match["y2"]:
                month = _MONTHS.get(match["mon2"][:3].lower())
                if month and _is_month_name(match["mon2"]):
                    return dt.date(int(match["y2"]), month, int(match["d2"]))
            elif match["y3"]:
                month = _MONTHS.get(match["mon3"][:3].lower())
                if month and _is_month_name(match["mon3"]):
                    return dt.date(int(match["y3"]), month, int(match["d3"]))
        except ValueError:  # 31 February and the like
            continue
    return None


def _is_month_name(word: str) -> bool:
    """``Mar``, ``March``, ``Sept``: a month's abbreviation or full name (not ``Mark``)."""
    lowered = word.lower()
    return len(lowered) >= 3 and any(month.startswith(lowered) for month in _MONTH_NAMES)


def _headings(lines: list[str]) -> list[tuple[int, tuple[str, int], str]]:
    """``(line index, level, heading text)`` of every heading.

    A level is ``("#", number of #)`` for Markdown and ``("=", rank)`` for reStructuredText,
    where the rank is the order in which its underline character first appears (as docutils
    ranks them); a lower number is a higher level.
    """
    found = []
    ranks: dict[str, int] = {}
    for i, line in enumerate(lines):
        text = line.strip()
        if not text:
            continue
        atx = _ATX.match(text)
        if atx:
            found.append((i, ("#", len(atx.group(1))), text))
        elif (
            i + 1 < len(lines)
            and _UNDERLINE.match(lines[i + 1].strip())
            and not _UNDERLINE.match(text)
        ):
            char = lines[i + 1].strip()[0]
            found.append((i, ("=", ranks.setdefault(char, len(ranks))), text))
    return found


def _version(heading: str) -> str | None:
    match = _VERSION.search(re.sub(r"\(https?://[^)]*\)|<https?://[^>]*>", "", heading))
    return match.group(0) if match else None


def release_entries(changelog: str) -> list[ReleaseEntry]:
    """Every release entry of a changelog, in file order (newest first in most changelogs).

    An entry runs from its release heading to the next heading of the same or a higher level
    (of the same kind, Markdown or reStructuredText), so a ``### Fixed`` sub-heading stays inside
    its release and a following ``# Licence`` section is left out.
    """
    lines = changelog.splitlines()
    heads = _headings(lines)
    entries = []
    for k, (i, level, text) in enumerate(heads):
        version = _version(text)
        if version is None:
            continue
        end = len(lines)
        for j, other_level, _ in heads[k + 1 :]:
            if _ends(level, other_level):
                end = j
                break
        body_start = i + (1 if level[0] == "#" else 2)
        entries.append(
            ReleaseEntry(
                heading=text,
                version=version,
                date=parse_date(text) or _date_under(lines, body_start, end),
                text="\n".join(lines[i:end]).strip("\n"),
                line=i,
            )
        )
    return entries


def _ends(level: tuple[str, int], other: tuple[str, int]) -> bool:
    """Whether a heading of level ``other`` ends an entry whose heading has level ``level``."""
    return other[0] == level[0] and other[1] <= level[1]


def _date_under(lines: list[str], start: int, end: int) -> dt.date | None:
    for line in lines[start:end]:
        if line.strip():
            return parse_date(line) if len(line) <= _DATE_LINE_MAX_CHARS else None
    return None
