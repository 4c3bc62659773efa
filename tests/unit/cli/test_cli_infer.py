"""`memprobe infer SUSPECT --heldout HELDOUT` end to end on a served tiny model: the stored run,
its report (text and JSON), a resume, and the inputs it refuses before anything is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprobe_core.cli import main
from memprobe_core.store import Store


def _jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def _sets(tmp_path: Path, n: int = 8) -> tuple[Path, Path]:
    # Two files with the same name in two folders: their default ids (<file>:<row>) collide.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    licence = "Permission is hereby granted, free of charge, to any person obtaining a copy {}"
    story = "The lighthouse keeper counted {} gulls before the storm reached the northern pier"
    suspect = _jsonl(tmp_path / "a" / "data.jsonl", [licence.format(i) * 2 for i in range(n)])
    heldout = _jsonl(tmp_path / "b" / "data.jsonl", [story.format(i) * 2 for i in range(n)])
    return suspect, heldout


@pytest.fixture
def served():
    from memprobe_core.membership import signals as sig
    from memprobe_core.models import clear_cache
    from tests.helpers.openai_server import serve
    from tests.helpers.tiny_models import tiny_hf_generator

    sig.clear_cache()
    clear_cache()
    with serve(tiny_hf_generator(seed=5), "served-model") as server:
        yield ["--victim", "served-model", "--base-url", server.base_url]


def test_infer_stores_a_resumable_run_and_reports_the_test(tmp_path, capsys, served):
    suspect, heldout = _sets(tmp_path)
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "infer", str(suspect), "--heldout", str(heldout)]
    argv += ["--lengths", "12", "--json", *served]
    assert main(argv) == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    (inferred,) = report["dataset_inference"]
    assert (inferred["n_suspect"], inferred["n_heldout"], inferred["length"]) == (8, 8, 12)
    assert 0.0 <= inferred["test"]["p_value"] <= 1.0
    assert inferred["features"] and "loss" in inferred["features"]
    assert inferred["test_result"] and inferred["assumption"]
    # 8 + 8 texts: 4 vs 4 tested, too few whatever p says (and the blind baseline may head it).
    verdict = inferred["verdict"]
    assert verdict["conclusion"] == "inconclusive" and verdict["headline"].startswith(
        "inconclusive"
    )
    assert any(r.startswith("too few texts (4 vs 4) for this test") for r in verdict["reasons"])
    assert report["blind_baseline"]["n_members"] == 8  # the control beside the test
    assert report["table1"] == []  # signals only: nothing was extracted
    assert {row["kind"] for row in report["membership"]} == {"signal"}

    with Store(store) as opened:
        (run,) = opened.list_runs()
        config = opened.get_run(run["id"])["config"]
        assert config["methods"] == ["signals"]
        assert config["dataset"]["inference"]["significance"] == 0.05
        ids = [s.id for s in opened.samples(run["id"])]
        assert len(set(ids)) == 16 and ids[0].startswith("suspect:")
        pending = opened.units(run["id"])[:3]
        for unit in pending:  # as if the process had died there
            opened.reset_unit(run["id"], unit["key"])
    assert main(["--store", str(store), "resume", str(run["id"])]) == 0
    text = capsys.readouterr().out
    assert "Dataset inference" in text and "Length 12: 8 suspect / 8 held-out" in text
    assert text.index("Length 12: inconclusive: ") < text.index("Length 12: 8 suspect")
    assert "No Table 1: the finished units are signals-only" in text

    argv = ["--store", str(store), "report", str(run["id"]), "--json", "--significance", "0.5"]
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)["dataset_inference"][0]
    assert again["significance"] == 0.5
    assert again["test"]["p_value"] == inferred["test"]["p_value"]  # same seed, same halves

    html = tmp_path / "report.html"
    assert main(["--store", str(store), "report", str(run["id"]), "--html", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    assert "Dataset inference" in page and "One-sided Welch t-test" in page
    assert "Signals only: no extraction method ran" in page


def test_a_set_too_small_to_halve_is_refused_before_anything_is_stored(tmp_path, capsys):
    suspect, heldout = _sets(tmp_path, n=3)
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "infer", str(suspect), "--heldout", str(heldout)]
    assert main([*argv, "--victim", "fake"]) == 2
    err = capsys.readouterr().err
    assert f"SUSPECT {suspect}: the suspect set has 3 usable text(s)" in err
    assert "at least 4" in err
    assert not store.exists() or Store(store).list_runs() == []


@pytest.mark.parametrize("level", ["0", "1", "1.5", "-0.01"])
def test_a_significance_outside_zero_and_one_exits_2_naming_it(tmp_path, capsys, level):
    suspect, heldout = _sets(tmp_path)
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "infer", str(suspect), "--heldout", str(heldout)]
    assert main([*argv, "--significance", level, "--victim", "fake"]) == 2
    assert "--significance" in capsys.readouterr().err
    assert not store.exists() or Store(store).list_runs() == []


def test_significance_on_a_run_that_is_no_inference_is_refused(tmp_path, capsys):
    store = tmp_path / "runs.sqlite"
    probe = ["--store", str(store), "probe", "--victim", "fake", "--attacker", "fake"]
    assert (
        main([*probe, "--corpus-id", "legal:mit-33338842", "--method", "ps_inst", "--length", "64"])
        == 0
    )
    capsys.readouterr()
    assert main(["--store", str(store), "report", "1", "--significance", "0.1"]) == 2
    assert "not a dataset-inference run" in capsys.readouterr().err


def test_a_missing_heldout_file_exits_2_naming_it(tmp_path, capsys):
    suspect, _ = _sets(tmp_path)
    missing = tmp_path / "nowhere.jsonl"
    argv = ["--store", str(tmp_path / "runs.sqlite"), "infer", str(suspect)]
    assert main([*argv, "--heldout", str(missing), "--victim", "fake"]) == 2
    assert "nowhere.jsonl" in capsys.readouterr().err


def test_opt_in_signals_join_the_weighting(tmp_path, capsys, served):
    suspect, heldout = _sets(tmp_path)
    argv = ["--store", str(tmp_path / "runs.sqlite"), "infer", str(suspect), "--heldout"]
    argv += [str(heldout), "--lengths", "12", "--pac-augmentations", "2", "--json", *served]
    assert main(argv) == 0, capsys.readouterr().err
    (inferred,) = json.loads(capsys.readouterr().out)["dataset_inference"]
    assert "pac" in inferred["features"] or "pac" in inferred["left_out"]
    assert inferred["left_out"].get("pac") != "not measured in this run"


def test_texts_shorter_than_the_length_are_refused_naming_the_file(tmp_path, capsys):
    from tests.helpers.tiny_models import tiny_causal_lm

    model, tokenizer = tiny_causal_lm(seed=2)
    folder = tmp_path / "tiny-victim"
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    suspect, heldout = _sets(tmp_path)
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "infer", str(suspect), "--heldout", str(heldout)]
    assert main([*argv, "--victim", str(folder), "--lengths", "12", "400"]) == 2
    err = capsys.readouterr().err
    assert f"SUSPECT {suspect}: 8 text(s) have fewer than 400 victim tokens" in err
    assert not store.exists() or Store(store).list_runs() == []


def test_sets_sharing_a_text_are_refused_and_repeats_warned(tmp_path, capsys):
    suspect, heldout = _sets(tmp_path)
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "infer", str(suspect), "--heldout", str(suspect)]
    assert main([*argv, "--victim", "fake"]) == 2
    err = capsys.readouterr().err
    assert "8 text(s) are in both the suspect and the held-out set" in err
    assert not store.exists() or Store(store).list_runs() == []


def test_label_columns_are_not_read_and_txt_mode_applies_to_the_txt_file_only(
    tmp_path, capsys, served
):
    suspect = tmp_path / "suspect.txt"
    suspect.write_text(
        "\n\n".join(
            f"Permission is hereby granted, free of charge, number {i} " * 2 for i in range(4)
        )
    )
    heldout = tmp_path / "heldout.jsonl"
    rows = [
        {
            "text": f"The keeper counted {i} gulls before the storm reached the pier " * 2,
            "label": "maybe",
        }
        for i in range(4)
    ]
    heldout.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["--store", str(tmp_path / "runs.sqlite"), "infer", str(suspect), "--heldout"]
    argv += [str(heldout), "--txt-mode", "blocks", "--lengths", "8", "--json", *served]
    assert main(argv) == 0, capsys.readouterr().err
    (inferred,) = json.loads(capsys.readouterr().out)["dataset_inference"]
    assert (inferred["n_suspect"], inferred["n_heldout"]) == (4, 4)
    assert inferred["control"] is None and "needs at least 8" in inferred["control_note"]


def test_whitespace_split_texts_shorter_than_the_length_are_refused(tmp_path, capsys):
    suspect, heldout = _sets(tmp_path)
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "infer", str(suspect), "--heldout", str(heldout)]
    argv += ["--split-tokenizer", "whitespace", "--lengths", "500", "--victim", "fake"]
    assert main(argv) == 2
    assert "8 text(s) have fewer than 500 words" in capsys.readouterr().err
    assert not store.exists() or Store(store).list_runs() == []


def test_an_inference_measures_the_signals_and_nothing_of_extraction(tmp_path, capsys, tiny_models):
    """On a victim with weights an audit also measures p_z, the near-verbatim bound and the
    rank-based cost beside every unit; dataset inference reads the signals alone, so it measures
    none of them (docs/method.md §10, "Dataset inference")."""
    suspect, heldout = _sets(tmp_path)
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "infer", str(suspect), "--heldout", str(heldout)]
    assert main([*argv, "--victim", "tiny", "--lengths", "24"]) == 0, capsys.readouterr().err
    with Store(store) as opened:
        run = opened.list_runs()[0]
        units = opened.units(run["id"], status="done")
        measure = opened.get_run(run["id"])["config"]["options"]["measure"]
    assert len(units) == 16 and all(u["membership"].get("loss") is not None for u in units)
    assert not measure["pz"] and not measure["pam"]
    measured = {k for u in units for k in (u["verbatim"] or {})}
    assert not {"log10_p_z", "near_verbatim_log10_lower", "extraction_bits"} & measured, measured
