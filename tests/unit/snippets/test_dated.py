"""The dated split: release notes labelled by date, one genre on both sides, the rule kept."""

from __future__ import annotations

import argparse
import datetime as dt
import re
from pathlib import Path

import pytest

from memprobe_core.errors import UsageError
from memprobe_core.snippets import dated
from memprobe_core.snippets._changelog import parse_date, release_entries
from memprobe_core.snippets.corpus import normalize_text
from memprobe_core.snippets.dated import (
    DOMAIN,
    KNOWLEDGE_CUTOFF,
    MEMBER_BEFORE,
    NONMEMBER_AFTER,
    VICTIM_RELEASE,
    Changelog,
    dated_split,
    dated_summary,
    dated_texts,
    neutralise,
    side,
)
from memprobe_core.snippets.split import MEMBER, NONMEMBER, DataError

# --- the changelog parser -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("## v2.14.4 (2026-11-19)", dt.date(2026, 11, 19)),
        ("## Version 1.0.9 (April 24th, 2025)", dt.date(2025, 4, 24)),
        ("## 0.11.1 (September 28nd, 2020)", dt.date(2020, 9, 28)),
        ("*Release date: 08-Mar-2021*", dt.date(2021, 3, 8)),
        ("released 8 March 2021", dt.date(2021, 3, 8)),
        ("Mar 8, 2021", dt.date(2021, 3, 8)),
        ("2026/01/05 • full history", dt.date(2026, 1, 5)),
        ("## 1.2.3", None),
        ("## 1.2.3 (2023-13-40)", None),  # no such day
        ("Mark 3, 2020", None),  # not a month
    ],
)
def test_parse_date(text: str, expected: dt.date | None) -> None:
    assert parse_date(text) == expected


_MARKDOWN = """# Changelog

## [3.1.0](https://example.org/compare/3.0.0...3.1.0) (2026-03-06)

### Fixed
- Fixed a thing.

## 3.0.0 (April 24th, 2021)

- Dropped Python 2.

# Licence

MIT.
"""

_RST = """Changelog
=========

2.0.0
-----

2025-09-01 • `full history <https://example.org>`__

- Renamed the option.

1.0.0
-----

*Release date: 4-Mar-2021*

- First release.
"""


def test_release_entries_markdown_keep_subsections_and_stop_at_a_higher_heading() -> None:
    entries = release_entries(_MARKDOWN)
    assert [(e.version, e.date) for e in entries] == [
        ("3.1.0", dt.date(2026, 3, 6)),
        ("3.0.0", dt.date(2021, 4, 24)),
    ]
    assert "### Fixed\n- Fixed a thing." in entries[0].text
    assert entries[1].text.endswith("- Dropped Python 2.")  # "# Licence" is not part of it


def test_release_entries_rst_read_the_date_under_the_heading() -> None:
    entries = release_entries(_RST)
    assert [(e.version, e.date) for e in entries] == [
        ("2.0.0", dt.date(2025, 9, 1)),
        ("1.0.0", dt.date(2021, 3, 4)),
    ]
    assert entries[0].text.startswith("2.0.0\n-----")


# --- the rule -----------------------------------------------------------------------------------


def test_rule_dates_bracket_the_victims_cutoff() -> None:
    gap = KNOWLEDGE_CUTOFF - MEMBER_BEFORE
    assert gap >= dt.timedelta(days=365)
    assert NONMEMBER_AFTER >= VICTIM_RELEASE > KNOWLEDGE_CUTOFF


def test_side_at_the_boundaries() -> None:
    day = dt.timedelta(days=1)
    assert side(MEMBER_BEFORE - day) == MEMBER
    assert side(MEMBER_BEFORE) is None
    assert side(KNOWLEDGE_CUTOFF) is None
    assert side(NONMEMBER_AFTER) is None
    assert side(NONMEMBER_AFTER + day) == NONMEMBER
    assert side(None) is None


def _entry(version: str, date: str, words: int) -> str:
    body = " ".join(f"w{version.replace('.', '')}x{i}" for i in range(words))
    return f"## {version} ({date})\n\n- {body}\n"


def _fake(monkeypatch: pytest.MonkeyPatch, changelogs: list[Changelog]) -> None:
    monkeypatch.setattr(dated, "_changelogs", lambda: changelogs)
    dated._all_pairs.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_cache():
    dated._all_pairs.cache_clear()
    yield
    dated._all_pairs.cache_clear()


def test_pairs_members_latest_nonmembers_earliest_gap_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "".join(
        [
            _entry("5.0", "2026-01-01", 130),  # non-member, later
            _entry("4.0", "2025-09-01", 130),  # non-member, earliest: chosen
            _entry("3.0", "2024-06-01", 130),  # in the gap: neither side
            _entry("2.0", "2023-01-01", 130),  # member, latest: chosen
            _entry("1.0", "2021-01-01", 130),  # member, earlier
            _entry("0.9", "2020-01-01", 130),  # member, earlier still
        ]
    )
    _fake(monkeypatch, [Changelog("pkg", "pkg 5.0 (METADATA)", text)])
    got = dated_texts()
    assert [(t.label, [e.version for e in t.entries]) for t in got] == [
        (MEMBER, ["2.0"]),
        (NONMEMBER, ["4.0"]),
        (MEMBER, ["1.0"]),
        (NONMEMBER, ["5.0"]),
    ]


def test_short_entries_join_within_one_side_only(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "".join(
        [
            _entry("4.1", "2026-02-01", 70),
            _entry("4.0", "2026-01-01", 70),  # 4.1 + 4.0: one non-member text
            _entry("3.0", "2023-08-01", 70),  # member side, but 3.0 + 2.0 …
            _entry("2.0", "2023-07-01", 70),  # … make one member text
            _entry("1.0", "2023-06-01", 70),  # a short tail: dropped
        ]
    )
    _fake(monkeypatch, [Changelog("pkg", "pkg", text)])
    got = dated_texts()
    assert [[e.version for e in t.entries] for t in got] == [["3.0", "2.0"], ["4.1", "4.0"]]


def test_an_entry_shared_by_a_fork_is_used_once(monkeypatch: pytest.MonkeyPatch) -> None:
    shared = _entry("1.0", "2022-01-01", 130)
    parent = _entry("2.0", "2026-01-01", 130) + shared
    fork = _entry("9.0", "2026-05-01", 130) + shared + _entry("0.5", "2021-01-01", 130)
    _fake(monkeypatch, [Changelog("a", "a", parent), Changelog("b", "b", fork)])
    got = dated_texts()
    assert [(t.changelog.name, [e.version for e in t.entries]) for t in got] == [
        ("a", ["1.0"]),
        ("a", ["2.0"]),
        ("b", ["0.5"]),
        ("b", ["9.0"]),
    ]


def test_no_texts_on_both_sides_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, [Changelog("pkg", "pkg", _entry("1.0", "2021-01-01", 200))])
    with pytest.raises(DataError, match="dated split is empty"):
        dated_split()
    with pytest.raises(DataError, match="negative"):
        dated_split(limit=-1)


def test_neutralise_removes_dates_versions_and_issue_numbers() -> None:
    text = (
        "## [3.5.3](https://x/compare/3.5.2...3.5.3) (2026-11-23)\n"
        "- Fix (#828), see https://x/issues/1397 and /pull/12; Python 3.14, April 24th, 2025"
    )
    out = neutralise(text)
    assert not re.search(r"\d{2,}|\d\.\d", out), out
    assert "Fix" in out and "Python" in out


# --- the split on this machine ------------------------------------------------------------------


@pytest.fixture
def installed() -> list:
    texts = dated_texts()
    if not texts:
        pytest.skip("no installed package ships release notes on both sides of the rule")
    return texts


def test_every_text_keeps_the_rule_read_from_its_own_text(installed: list) -> None:
    for text in installed:
        # Re-read the dates from the text itself, not from what the split stored.
        dates = [e.date for e in release_entries(text.text)]
        assert dates and None not in dates, text.provenance()
        if text.label == MEMBER:
            assert max(dates) < MEMBER_BEFORE, text.provenance()
        else:
            assert min(dates) > NONMEMBER_AFTER, text.provenance()


def test_same_genre_and_balanced_per_package(installed: list) -> None:
    snippets = dated_split()
    assert {s.domain for s in snippets} == {DOMAIN}
    assert [s.label for s in snippets] == [MEMBER, NONMEMBER] * (len(snippets) // 2)
    summary = dated_summary()
    assert summary["counts"][MEMBER] == summary["counts"][NONMEMBER] == len(snippets) // 2
    for package, counts in summary["per_package"].items():
        assert counts[MEMBER] == counts[NONMEMBER] > 0, package
    # Each pair comes from one changelog.
    for member, other in zip(installed[::2], installed[1::2]):
        assert member.changelog == other.changelog


def test_texts_carry_no_dates_or_versions(installed: list) -> None:
    for snippet in dated_split():
        assert not re.search(r"\b20\d\d\b|\d+\.\d+\.\d+", snippet.text), snippet.id


def test_deterministic_unique_and_provenance_recorded(installed: list) -> None:
    first = dated_split()
    dated._all_pairs.cache_clear()
    again = dated_split()
    assert [(s.id, s.text, s.source) for s in first] == [(s.id, s.text, s.source) for s in again]
    assert len({s.id for s in first}) == len(first)
    assert len({normalize_text(s.text) for s in first}) == len(first)
    summary = dated_summary()
    assert [t["id"] for t in summary["texts"]] == [s.id for s in first]
    for record in summary["texts"]:
        assert record["package"] and record["releases"]
        assert all(r["version"] and r["date"] for r in record["releases"])


def test_limit_keeps_the_first_pairs(installed: list) -> None:
    assert dated_split(limit=1) == dated_split()[:2]
    assert dated_summary(limit=1)["counts"] == {MEMBER: 1, NONMEMBER: 1}


# --- the CLI flag -------------------------------------------------------------------------------


def _args(**given: object) -> argparse.Namespace:
    """`memprobe audit --corpus --dated-split --per-domain 2` as the real parser reads it (every
    flag present with its default), then ``given`` on top."""
    from memprobe_core.cli.main import build_parser

    args = build_parser().parse_args(["audit", "--corpus", "--dated-split", "--per-domain", "2"])
    for name, value in given.items():
        setattr(args, name, value)
    return args


def test_cli_dated_split_records_its_provenance(installed: list) -> None:
    from memprobe_core.cli.audit import _snippets

    snippets, info = _snippets(_args())
    assert [s.label for s in snippets] == [MEMBER, NONMEMBER, MEMBER, NONMEMBER]
    assert info["dated_split"]["member_rule"].endswith(MEMBER_BEFORE.isoformat())
    assert [t["id"] for t in info["dated_split"]["texts"]] == [s.id for s in snippets]


def test_cli_dated_split_refuses_other_selections() -> None:
    from memprobe_core.cli.audit import _snippets

    with pytest.raises(UsageError, match="--nonmembers and --domains"):
        _snippets(_args(nonmembers=True))
    with pytest.raises(UsageError, match="use it with --corpus"):
        _snippets(_args(corpus=False, per_domain=None, dataset=Path("x.jsonl")))
