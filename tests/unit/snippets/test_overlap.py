"""Near-duplicate sets (issue 51, category 8): two sets that share a text once whitespace, case and
Unicode forms are set aside. `memprobe infer` refuses them (exit 2, before anything is stored); a
labelled audit warns, records the overlap in its run and every report names it; both name how
many and one pair of ids (docs/method.md §10)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from memprobe_core.audit import SharedTexts, inference_snippets
from memprobe_core.cli import main
from memprobe_core.snippets.overlap import labelled_overlap, normal_form, overlap_record
from memprobe_core.snippets.split import MEMBER, NONMEMBER, Snippet
from memprobe_core.store import Store
from tests.unit.cli.test_cli import MODELS, WORDS, fake_models  # noqa: F401 (a fixture)

TEXTS = [f"Permission is hereby granted, free of charge, copy number {i}" for i in range(8)]
OTHERS = [f"The lighthouse keeper counted {i} gulls before the storm" for i in range(8)]
# Each a held-out spelling of TEXTS[0] the model reads as the same text.
NEAR = {
    "trailing space": TEXTS[0] + " ",
    "case": TEXTS[0].upper(),
    "NFKC (full-width letters)": TEXTS[0].replace("Permission", "Ｐｅｒｍｉｓｓｉｏｎ"),
    "whitespace inside": TEXTS[0].replace(" ", " \t\n ", 3),
    # Unicode format characters (category Cf), invisible: dropped by the normal form
    "zero-width space after each space": TEXTS[0].replace(" ", " \u200b"),
    "leading byte-order mark": "\ufeff" + TEXTS[0],
    "soft hyphens": TEXTS[0].replace("Permission", "Per\u00admis\u00adsion"),
    "zero-width joiner": TEXTS[0].replace("granted", "gran\u200dted"),
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
def test_a_labelled_overlap_is_found_and_named(spelling):
    members = _snippets(TEXTS, "m", MEMBER)
    nonmembers = _snippets([spelling, *OTHERS], "n", NONMEMBER)
    overlap = labelled_overlap([*members, *nonmembers])
    assert overlap is not None and overlap.count == 1
    note = overlap_record(overlap)["note"]
    assert note.startswith("1 text(s) are both a member and a non-member once whitespace, case")
    assert "member 'm0' and non-member 'n0'" in note
    assert labelled_overlap([*members, *_snippets(OTHERS, "n", NONMEMBER)]) is None
    assert labelled_overlap(_snippets([*TEXTS, TEXTS[0]], "u")) is None  # unlabelled repeats


@pytest.mark.usefixtures("fake_models")
def test_a_labelled_audit_sharing_texts_is_warned_recorded_and_reported(tmp_path, capsys):
    """Labelled audits warn (not refuse): the run is recorded with the overlap and every report
    of it (text, JSON, HTML) names it."""
    data = tmp_path / "labelled.csv"
    with data.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(
            [text, label]
            for text, label in [
                (WORDS, "member"),
                (WORDS.upper() + "  ", "nonmember"),
                (WORDS[::-1], "member"),
                (WORDS[::-1] + " tail", "nonmember"),
            ]
        )
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "audit", str(data), "--methods", "ps_base", "--lengths", "30"]
    assert main([*argv, *MODELS]) == 0
    out, err = capsys.readouterr()
    said = "1 text(s) are both a member and a non-member once whitespace, case and Unicode"
    assert "WARNING" in err and said in err
    assert "(e.g. member 'labelled:1' and non-member 'labelled:2'" in err
    assert f"Warning: {said}" in out  # the report printed after the run
    with Store(store) as opened:
        run = opened.list_runs()[0]
    recorded = run["config"]["dataset"]["shared_texts"]
    assert (recorded["count"], recorded["member_id"], recorded["nonmember_id"]) == (
        1,
        "labelled:1",
        "labelled:2",
    )
    html = tmp_path / "report.html"
    assert main(["--store", str(store), "report", str(run["id"]), "--html", str(html)]) == 0
    assert said in html.read_text(encoding="utf-8")
    capsys.readouterr()
    assert main(["--store", str(store), "report", str(run["id"]), "--json"]) == 0
    assert said in json.loads(capsys.readouterr().out)["meta"]["shared_texts_note"]
