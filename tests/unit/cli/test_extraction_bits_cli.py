"""``memprobe probe --json`` gives the snippet's ``extraction_bits`` beside ``log10_p_z``, and
``memprobe document --json`` the document's ``extraction_bits`` and ``greedy_extractable_rate``
(docs/method.md §21), on a tiny random model."""

from __future__ import annotations

import json

import pytest

from memprobe_core.cli import main
from tests.unit.cli.tiny_victim import TEXT


def test_probe_json_gives_extraction_bits_beside_log10_p_z(tmp_path, tiny_models, capsys):
    store = ["--store", str(tmp_path / "runs.sqlite")]
    argv = [*store, "probe", TEXT, "--method", "verbatim", "--length", "40", "--victim", "tiny"]
    assert main([*argv, "--json"]) == 0
    verbatim = json.loads(capsys.readouterr().out)["verbatim"]
    assert "log10_p_z" in verbatim
    assert isinstance(verbatim["extraction_bits"], float) and verbatim["extraction_bits"] >= 0
    assert 0 <= verbatim["greedy_extractable_rate"] <= 1


def test_document_json_gives_the_documents_extraction_bits_and_greedy_rate(
    tmp_path, tiny, tiny_models, capsys
):
    from memprobe_core.documents.rank_cost import document_rank_cost

    path = tmp_path / "book.txt"
    path.write_text(TEXT, encoding="utf-8")
    small = ["--prefix-tokens", "8", "--suffix-tokens", "8", "--stride", "8"]
    argv = ["--store", str(tmp_path / "runs.sqlite"), "document", str(path), "--victim", "tiny"]
    assert main([*argv, *small, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    ids = tiny.tokenizer.encode(TEXT, add_special_tokens=False)
    # The paper's setting: one pass over BOS + the whole document, l = 50, m = 20.
    alone = document_rank_cost(tiny.torch_model, ids, [tiny.tokenizer.bos_token_id])
    assert alone["passes"] == 1 and alone["extraction_window_tokens"] == 50
    assert shown["extraction_bits"] == pytest.approx(alone["extraction_bits"])
    assert shown["greedy_extractable_rate"] == pytest.approx(alone["greedy_extractable_rate"])
    assert shown["rank_cost"]["ranked_tokens"] == len(ids)
    # Stored with the run: --show gives it again without a pass.
    assert (
        main(["--store", str(tmp_path / "runs.sqlite"), "document", "--show", "1", "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["extraction_bits"] == shown["extraction_bits"]


def test_document_text_output_names_b_and_the_greedy_rate(tmp_path, tiny_models, capsys):
    path = tmp_path / "book.txt"
    path.write_text(TEXT, encoding="utf-8")
    small = ["--prefix-tokens", "8", "--suffix-tokens", "8", "--stride", "8"]
    argv = ["--store", str(tmp_path / "runs.sqlite"), "document", str(path), "--victim", "tiny"]
    assert main([*argv, *small, "--json"]) == 0
    bits = json.loads(capsys.readouterr().out)["extraction_bits"]
    assert main(["--store", str(tmp_path / "runs.sqlite"), "document", "--show", "1"]) == 0
    out = capsys.readouterr().out
    assert f"rank-based extraction cost (l = 50, m = 20): b = {bits:.1f} bits" in out
    assert "greedy-extractable rate" in out
