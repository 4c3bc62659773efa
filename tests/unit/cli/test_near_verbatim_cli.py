"""``memprobe probe --json`` gives the snippet's ``near_verbatim_log10_lower`` beside
``log10_p_z`` (docs/method.md §22), under the flags that set its budget and beam; a victim whose
weights are not loaded gets ``near_verbatim_not_measured`` with why, not a crash."""

from __future__ import annotations

import json
import math

import pytest

from memprobe_core.cli import main
from memprobe_core.measuring.options import MeasureOptions
from memprobe_core.membership.near_verbatim import NO_WEIGHTS, measure_near_verbatim
from tests.helpers.scripted_models import make_split, parrot
from tests.unit.cli.tiny_victim import TEXT


def _probe(tmp_path, capsys, *flags):
    store = ["--store", str(tmp_path / "runs.sqlite")]
    argv = [*store, "probe", TEXT, "--method", "verbatim", "--length", "40", "--victim", "tiny"]
    # Plain sampling: a random model ranks the true tokens anywhere, often outside the top 40.
    assert main([*argv, "--pz-top-k", "0", *flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["verbatim"]


def test_probe_json_gives_the_near_verbatim_bound_beside_log10_p_z(tmp_path, tiny_models, capsys):
    verbatim = _probe(tmp_path, capsys)
    suffix = verbatim["pz_tokens"]
    assert verbatim["near_verbatim_edits"] == math.floor(0.1 * suffix)  # the default share
    assert verbatim["near_verbatim_beam_width"] == 20
    # Never below p_z (the true suffix's path is kept); float rounding of the cached passes aside.
    assert verbatim["near_verbatim_log10_lower"] >= verbatim["log10_p_z"] - 1e-6
    assert verbatim["near_verbatim_log10_lower"] <= 0
    # The cost: the prefix once, then at most B tokens for each suffix token but the last.
    assert verbatim["near_verbatim_forward_passes"] == suffix
    assert verbatim["near_verbatim_forward_tokens"] <= 40 + 20 * (suffix - 1)


def test_the_flags_set_the_budget_and_the_beam(tmp_path, tiny_models, capsys):
    flags = ("--near-verbatim-edits", "0", "--near-verbatim-beams", "3")
    verbatim = _probe(tmp_path, capsys, *flags)
    assert verbatim["near_verbatim_edits"] == 0 and verbatim["near_verbatim_beam_width"] == 3
    # Budget 0: the one sequence within it is the suffix itself, so the bound is p_z.
    assert verbatim["near_verbatim_sequences"] == 1
    assert verbatim["near_verbatim_log10_lower"] == pytest.approx(verbatim["log10_p_z"], abs=1e-5)


def test_no_near_verbatim_skips_it(tmp_path, tiny_models, capsys):
    verbatim = _probe(tmp_path, capsys, "--no-near-verbatim")
    assert "log10_p_z" in verbatim
    assert not any(key.startswith("near_verbatim") for key in verbatim)


def test_no_pz_skips_it_too(tmp_path, tiny_models, capsys):
    """The bound sits beside p_z, under its scheme: --no-pz turns both off."""
    verbatim = _probe(tmp_path, capsys, "--no-pz")
    assert not any(key.startswith(("near_verbatim", "log10_p_z")) for key in verbatim)


def test_a_budget_that_is_neither_a_share_nor_whole_tokens_is_a_usage_error(
    tmp_path, tiny_models, capsys
):
    store = ["--store", str(tmp_path / "runs.sqlite")]
    argv = [*store, "probe", TEXT, "--method", "verbatim", "--victim", "tiny"]
    assert main([*argv, "--near-verbatim-edits", "2.5"]) == 2
    assert "--near-verbatim-edits 2.5: give a share" in capsys.readouterr().err


def test_a_victim_without_weights_is_not_measured_saying_why():
    record = measure_near_verbatim(parrot("server", "x"), make_split(), MeasureOptions())
    assert record == {"near_verbatim_log10_lower": None, "near_verbatim_not_measured": NO_WEIGHTS}
