"""The built-in demo corpus: present, de-duplicated, stable, bounded."""

from __future__ import annotations

import importlib.metadata

import pytest

from memprobe_core.snippets import corpus
from memprobe_core.snippets.corpus import (
    DOMAINS,
    MAX_CHUNK_CHARS,
    MIN_WORDS,
    corpus_summary,
    demo_corpus,
    first_chunk,
    license_kind,
    normalize_text,
    split_docstring,
)
from memprobe_core.snippets.split import DataError


def test_non_empty_with_three_domains() -> None:
    snippets = demo_corpus()
    assert {s.domain for s in snippets} == set(DOMAINS) == {"legal", "code", "docs"}
    assert all(s.text.strip() and s.source for s in snippets)


def test_no_two_snippets_share_normalized_text() -> None:
    texts = [normalize_text(s.text) for s in demo_corpus()]
    assert len(texts) == len(set(texts))


def test_ids_unique_stable_and_sorted() -> None:
    first = demo_corpus()
    ids = [s.id for s in first]
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids, key=lambda i: (DOMAINS.index(i.split(":")[0]), i))
    corpus._all_snippets.cache_clear()
    corpus._selected.cache_clear()
    assert [(s.id, s.text) for s in demo_corpus()] == [(s.id, s.text) for s in first]


def test_returns_a_fresh_list() -> None:
    a = demo_corpus()
    a.clear()
    assert demo_corpus()


def test_summary_counts_match() -> None:
    summary = corpus_summary()
    assert list(summary) == list(DOMAINS)
    for domain in DOMAINS:
        assert summary[domain] == len(demo_corpus(domains=[domain])) > 0
    assert sum(summary.values()) == len(demo_corpus())


def test_bounded_sizes_and_min_words() -> None:
    for snippet in demo_corpus():
        assert len(snippet.text.split()) >= MIN_WORDS, snippet.id
        assert len(snippet.text) <= MAX_CHUNK_CHARS, snippet.id
    long = demo_corpus(min_words=600)
    assert long and all(len(s.text.split()) >= 600 for s in long)
    assert {s.domain for s in long} >= {"legal", "code"}


def test_domains_and_limit() -> None:
    only = demo_corpus(domains=("docs", "legal"), limit_per_domain=2)
    assert [s.domain for s in only] == ["legal", "legal", "docs", "docs"]
    assert only[:2] == demo_corpus(domains=["legal"])[:2]
    assert demo_corpus(limit_per_domain=0) == []
    assert demo_corpus(domains="code") == demo_corpus(domains=["code"])
    with pytest.raises(DataError, match="demo corpus has no domain 'books'"):
        demo_corpus(domains=["books"])
    with pytest.raises(DataError, match="limit_per_domain -1 is negative"):
        demo_corpus(limit_per_domain=-1)


def test_known_code_and_docs_snippets() -> None:
    by_id = {s.id: s for s in demo_corpus()}
    code = by_id["code:textwrap"]
    assert "class TextWrapper" in code.text and "Text wrapping and filling" not in code.text
    assert code.source.endswith("textwrap.py")
    assert "JSON (JavaScript Object Notation)" in by_id["docs:json"].text


def _ships_apache() -> bool:
    for dist in importlib.metadata.distributions():
        for name in ("LICENSE", "licenses/LICENSE", "LICENSE.txt"):
            text = dist.read_text(name) or ""
            if "Apache License" in text and "Version 2.0" in text:
                return True
    return False


def test_apache_licence_present_when_shipped() -> None:
    if not _ships_apache():
        pytest.skip("no installed package ships an Apache-2.0 licence file")
    apache = [s for s in demo_corpus(domains=["legal"]) if s.id.startswith("legal:apache-2.0-")]
    assert apache
    main = max(apache, key=lambda s: s.source.count(";"))  # the one most packages ship
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in main.text
    assert len(main.text.split()) >= 600


def test_normalize_text_ignores_copyright_case_and_spacing() -> None:
    a = "Copyright (c) 2020 Alice\n\nPermission is   hereby granted,\nfree of charge"
    b = "copyright 1999 Bob Corp.\npermission is hereby granted, free of charge"
    assert normalize_text(a) == normalize_text(b) == "permission is hereby granted, free of charge"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Apache License\n Version 2.0, January 2004", "apache-2.0"),
        ("Permission is hereby granted, free of charge, to any person", "mit"),
        (
            "Redistribution and use in source and binary forms ... Neither the name of",
            "bsd-3-clause",
        ),
        ("Redistribution and use in source and binary forms, with or without", "bsd-2-clause"),
        ("GNU GENERAL PUBLIC LICENSE Version 3", "gpl"),
        ("GNU LESSER GENERAL PUBLIC LICENSE", "lgpl"),
        ("Some bespoke terms", "other"),
    ],
)
def test_license_kind(text: str, kind: str) -> None:
    assert license_kind(text) == kind


def test_first_chunk_short_text_whole() -> None:
    assert first_chunk("\n\nshort text\n\n") == "short text"


def test_first_chunk_cuts_at_paragraph_after_target_words() -> None:
    para = " ".join(["word"] * 100)
    text = "\n\n".join(f"{para} p{i}" for i in range(20))  # 20 paragraphs of 101 words
    chunk = first_chunk(text)
    assert len(chunk.split()) == 707  # 7 whole paragraphs: the first break after 650 words
    assert chunk.endswith("p6") and text.startswith(chunk)


def test_first_chunk_never_past_cap() -> None:
    text = " ".join(["wordy"] * 3000)  # no line break at all
    chunk = first_chunk(text)
    assert len(chunk.split()) == corpus.TARGET_WORDS and len(chunk) <= MAX_CHUNK_CHARS


def test_split_docstring() -> None:
    source = '#!/usr/bin/env python\n"""Title.\n\n    Body line.\n"""\n\nimport os\n'
    assert split_docstring(source) == ("Title.\n\nBody line.", "import os\n")
    assert split_docstring("import os\n'''not a docstring'''\n") == (
        "",
        "import os\n'''not a docstring'''\n",
    )
    assert split_docstring('f"""x"""\n')[0] == ""


# --- labelled selection: members plus generated non-members -----------------------------------


@pytest.fixture
def nonmember_file(tmp_path, monkeypatch):
    """A small non-member set (seed 11) in a private memprobe home."""
    from memprobe_core.snippets import nonmembers

    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path))
    nonmembers.build(seed=11, per_domain=3)
    return tmp_path / nonmembers.FILE_NAME


def test_unlabelled_by_default() -> None:
    assert all(s.label is None for s in demo_corpus())  # existing reports do not change


def test_labelled_selection_is_balanced_and_interleaved(nonmember_file) -> None:
    from memprobe_core.snippets import nonmembers

    chosen = demo_corpus(limit_per_domain=2, nonmembers=True)
    assert [(s.domain, s.label) for s in chosen] == [
        ("legal", "member"),
        ("legal", "nonmember"),
        ("legal", "member"),
        ("legal", "nonmember"),
        ("code", "member"),
        ("code", "nonmember"),
        ("code", "member"),
        ("code", "nonmember"),
    ]
    members = [s for s in chosen if s.label == "member"]
    plain = demo_corpus(domains=["legal", "code"], limit_per_domain=2)
    assert [(s.id, s.text) for s in members] == [(s.id, s.text) for s in plain]
    made = nonmembers.read(nonmember_file)
    assert [s for s in chosen if s.label == "nonmember"] == (
        made.for_domain("legal", 2) + made.for_domain("code", 2)
    )


def test_labelled_selection_matches_each_domains_member_count(nonmember_file) -> None:
    chosen = demo_corpus(domains=["legal"], nonmembers=True)  # more members than the file holds
    labels = [s.label for s in chosen]
    assert labels.count("member") == labels.count("nonmember") == corpus_summary()["legal"]
    assert len({s.id for s in chosen}) == len(chosen)


def test_labelled_selection_refuses_docs(nonmember_file) -> None:
    with pytest.raises(DataError, match=r"no \['docs'\] texts.*\['legal', 'code'\]"):
        demo_corpus(domains=["docs", "legal"], nonmembers=True)


def test_labelled_selection_builds_a_missing_set(tmp_path, monkeypatch) -> None:
    from memprobe_core.snippets.corpus import nonmember_summary

    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path))
    assert nonmember_summary() is None  # listing never builds
    demo_corpus(domains=["code"], limit_per_domain=1, nonmembers=True)
    info = nonmember_summary()
    assert info is not None and info["file"] == str(tmp_path / "nonmembers.json")
    assert info["counts"] == {"legal": 100, "code": 100} and isinstance(info["seed"], int)
