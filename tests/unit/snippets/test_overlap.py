"""Near-duplicate sets (issue 51, category 8): `memprobe infer` and a labelled audit refuse two sets
that share a text once whitespace, case and Unicode forms are set aside, naming how many and one
pair of ids, before anything is stored (docs/method.md §10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprobe_core.audit import SharedTexts, inference_snippets
from memprobe_core.cli import main
from memprobe_core.snippets.overlap import LabelledOverlap, check_labelled, normal_form
from memprobe_core.snippets.split import MEMBER, NONMEMBER, Snippet
from memprobe_core.store import Store

TEXTS = [f"Permission is hereby granted, free of charge, copy number {i}" for i in range(8)]
OTHERS = [f"The lighthouse keeper counted {i} gulls before the storm" for i in range(8)]
# Each a held-out spelling of TEXTS[0] the model reads as the same text.
NEAR = {
    "trailing space": TEXTS[0] + " ",
    "case": TEXTS[0].upper(),
    "NFKC (full-width letters)": TEXTS[0].replace("Permission", "Ｐｅｒｍｉｓｓｉｏｎ"),
    "whitespace inside": TEXTS[0].replace(" ", " \t\n ", 3),
}


def _jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _snippets(texts: list[str], prefix: str, label: str | None = None) -> list[Snippet]:
    return [Snippet(id=f"{prefix}{i}", text=t, label=label) for i, t in enumerate(texts)]


@pytest.mark.parametrize("spelling", NEAR.values(), ids=list(NEAR))
def test_normal_form_sets_spelling_aside(spelling):
    assert normal_form(spelling) == normal_form(TEXTS[0])
    assert normal_form(TEXTS[1]) != normal_form(TEXTS[0])


@pytest.mark.parametrize("spelling", NEAR.values(), ids=list(NEAR))
def test_inference_refuses_a_held_out_set_sharing_a_near_duplicate(spelling):
    suspect = _snippets(TEXTS, "s")
    heldout = _snippets([*OTHERS[:3], spelling, *OTHERS[3:]], "h")
    with pytest.raises(SharedTexts) as refused:
        inference_snippets(suspect, heldout)
    assert refused.value.count == 1
    assert "1 text(s) are in both the suspect and the held-out set" in str(refused.value)
    assert "suspect 's0' and held-out 'h3'" in str(refused.value)
    inference_snippets(suspect, _snippets(OTHERS, "h"))  # distinct sets pass


def test_infer_exits_2_on_a_trailing_space_copy_naming_how_many_and_an_id(tmp_path, capsys):
    suspect = _jsonl(tmp_path / "a" / "data.jsonl", [{"text": t} for t in TEXTS])
    heldout = _jsonl(
        tmp_path / "b" / "data.jsonl",
        [{"text": t + " "} for t in TEXTS[:2]] + [{"text": t} for t in OTHERS],
    )
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "infer", str(suspect), "--heldout", str(heldout)]
    assert main([*argv, "--victim", "fake"]) == 2
    err = capsys.readouterr().err
    assert "2 text(s) are in both the suspect and the held-out set once whitespace, case" in err
    assert "(e.g. suspect 'data:1' and held-out 'data:1'" in err
    assert not store.exists() or Store(store).list_runs() == []


@pytest.mark.parametrize("spelling", NEAR.values(), ids=list(NEAR))
def test_a_labelled_dataset_sharing_a_text_is_refused(spelling):
    members = _snippets(TEXTS, "m", MEMBER)
    nonmembers = _snippets([spelling, *OTHERS], "n", NONMEMBER)
    with pytest.raises(LabelledOverlap) as refused:
        check_labelled([*members, *nonmembers])
    assert str(refused.value).startswith("1 text(s) are both a member and a non-member")
    assert "member 'm0' and non-member 'n0'" in str(refused.value)
    check_labelled([*members, *_snippets(OTHERS, "n", NONMEMBER)])  # distinct: accepted
    check_labelled(_snippets([*TEXTS, TEXTS[0]], "u"))  # unlabelled repeats: not this check


def test_audit_of_a_labelled_file_sharing_texts_exits_2_before_any_run(tmp_path, capsys):
    rows = [{"text": t, "label": "member"} for t in TEXTS]
    rows += [{"text": TEXTS[3].upper(), "label": "nonmember"}]
    rows += [{"text": t, "label": "nonmember"} for t in OTHERS]
    dataset = _jsonl(tmp_path / "labelled.jsonl", rows)
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "audit", str(dataset), "--victim", "fake"]
    assert main([*argv, "--methods", "signals"]) == 2
    err = capsys.readouterr().err
    assert "1 text(s) are both a member and a non-member" in err
    assert "member 'labelled:4' and non-member 'labelled:9'" in err
    assert not store.exists() or Store(store).list_runs() == []


def test_start_audit_refuses_it_too(tmp_path):
    """The Audit page and any library caller go through start_audit."""
    from memprobe_core.audit import start_audit

    members = _snippets(TEXTS, "m", MEMBER)
    near = _snippets([TEXTS[5] + "\n"], "n", NONMEMBER)
    with Store(tmp_path / "runs.sqlite") as store:
        with pytest.raises(LabelledOverlap):
            start_audit(store, [*members, *near], ["signals"], [8])
        assert store.list_runs() == []
