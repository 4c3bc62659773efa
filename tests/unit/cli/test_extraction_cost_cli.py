"""``--extraction-window L`` and ``--extraction-rank-cap M`` (docs/method.md §21) on ``memprobe
probe`` and ``memprobe document``: carried to the pass that measures b, recorded with the run,
refused out of range with exit 2, on a tiny random model."""

from __future__ import annotations

import json

import pytest

from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.result import AttackResult
from memprobe_core.cli import main
from memprobe_core.documents.rank_cost import document_rank_cost
from memprobe_core.measuring.inextractability import InextractabilityOptions
from memprobe_core.membership import MeasureOptions
from memprobe_core.membership import extraction_probability as xp
from memprobe_core.membership.measure import measure_result
from memprobe_core.snippets.split import Snippet, split
from memprobe_core.store import Store
from tests.unit.cli.tiny_victim import TEXT
from tests.unit.membership.test_extraction_bits import stepwise_bits
from tests.unit.membership.test_extraction_probability import TEXT as SNIPPET
from tests.unit.membership.test_extraction_probability import context_and_suffix

L_AND_M = ["--extraction-window", "8", "--extraction-rank-cap", "3"]
SMALL = ["--prefix-tokens", "8", "--suffix-tokens", "8", "--stride", "8"]


def test_document_measures_b_under_the_given_l_and_m_and_records_them(
    tmp_path,
    tiny,
    tiny_models,
    capsys,
):
    path = tmp_path / "book.txt"
    path.write_text(TEXT, encoding="utf-8")
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "document", str(path), "--victim", "tiny", *SMALL]
    assert main([*argv, *L_AND_M, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    ids = tiny.tokenizer.encode(TEXT, add_special_tokens=False)
    front = [tiny.tokenizer.bos_token_id]
    alone = document_rank_cost(tiny.torch_model, ids, front, options=InextractabilityOptions(8, 3))
    default = document_rank_cost(tiny.torch_model, ids, front)
    assert shown["extraction_bits"] == pytest.approx(alone["extraction_bits"])
    assert shown["extraction_bits"] != pytest.approx(default["extraction_bits"])
    assert shown["rank_cost"]["extraction_window_tokens"] == 8
    assert shown["rank_cost"]["rank_cap"] == 3
    assert "token_log2_bounds" not in shown["rank_cost"]  # the JSON keeps to the figures
    config = Store(store).get_run(1)["config"]
    assert config["inextractability"] == {"window_tokens": 8, "rank_cap": 3}
    assert main(["--store", str(store), "document", "--show", "1"]) == 0
    assert "rank-based extraction cost (l = 8, m = 3)" in capsys.readouterr().out


def test_probe_measures_a_snippets_b_under_the_given_l_and_m(
    tmp_path,
    tiny_models,
    capsys,
):
    store = ["--store", str(tmp_path / "runs.sqlite")]
    argv = [*store, "probe", TEXT, "--method", "verbatim", "--length", "40", "--victim", "tiny"]
    assert main([*argv, "--extraction-window", "4", "--extraction-rank-cap", "2", "--json"]) == 0
    verbatim = json.loads(capsys.readouterr().out)["verbatim"]
    assert (verbatim["extraction_window_tokens"], verbatim["extraction_rank_cap"]) == (4, 2)
    assert main([*argv, "--json"]) == 0
    default = json.loads(capsys.readouterr().out)["verbatim"]
    assert default["extraction_rank_cap"] == 20
    assert default["extraction_bits"] != pytest.approx(verbatim["extraction_bits"])


@pytest.mark.parametrize("flag", ["--extraction-window", "--extraction-rank-cap"])
def test_a_value_below_one_is_a_usage_error_naming_the_flag(tmp_path, flag, capsys):
    argv = ["--store", str(tmp_path / "runs.sqlite"), "document", "--builtin", "apache-2.0"]
    assert main([*argv, flag, "0"]) == 2
    assert flag in capsys.readouterr().err


def test_a_resumed_document_keeps_its_l_and_m(tmp_path, capsys):
    argv = ["--store", str(tmp_path / "runs.sqlite"), "document", "--resume", "1"]
    assert main([*argv, "--extraction-window", "8"]) == 2
    assert "--extraction-window does not apply to --resume" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["probe", "audit", "document"])
def test_every_command_that_measures_b_offers_l_and_m(command, capsys):
    assert main([command, "--help"]) == 0
    shown = capsys.readouterr().out
    assert "--extraction-window L" in shown and "--extraction-rank-cap M" in shown


@pytest.fixture
def victim(tiny):
    xp.clear_cache()
    yield tiny
    xp.clear_cache()


def test_measure_options_carry_l_and_m_to_the_unit_and_its_manifest(victim):
    piece = split(Snippet("s", SNIPPET, "legal"), victim.tokenizer, 24)
    options = MeasureOptions(extraction_window_tokens=4, extraction_rank_cap=2, signals=False)
    result = AttackResult("ps_base", "s", "legal", 24, piece.prefix, "out", 0, 0, 0, 0.5)
    measured = measure_result(result, piece, ModelSet(victim=victim), options)
    bits, _, _ = stepwise_bits(victim, *context_and_suffix(victim, piece), l=4, m=2)
    assert measured.verbatim["extraction_bits"] == pytest.approx(bits, rel=1e-5, abs=1e-5)
    recorded = measured.manifest["extraction_probability"]
    assert (recorded["extraction_window_tokens"], recorded["extraction_rank_cap"]) == (4, 2)


def test_the_signals_pass_hands_over_bits_under_the_options_l_and_m(victim):
    piece = split(Snippet("s", SNIPPET, "legal"), victim.tokenizer, 24)
    options = MeasureOptions(extraction_window_tokens=4, extraction_rank_cap=2)
    result = AttackResult("ps_base", "s", "legal", 24, piece.prefix, "out", 0, 0, 0, 0.5)
    measured = measure_result(result, piece, ModelSet(victim=victim), options)
    bits, _, _ = stepwise_bits(victim, *context_and_suffix(victim, piece), l=4, m=2)
    assert measured.verbatim["extraction_bits"] == pytest.approx(bits, rel=1e-5, abs=1e-5)
