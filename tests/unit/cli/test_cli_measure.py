"""The CLI's options of what is measured beside Mem: bad values exit 2 naming the flag."""

from __future__ import annotations

import pytest

from memprobe_core.cli import main
from memprobe_core.store import Store


@pytest.mark.parametrize(
    "flag, value", [("--min-k-percent", "0"), ("--min-k-percent", "150"), ("--extract-k", "0")]
)
def test_a_bad_measure_option_exits_2_naming_its_flag(tmp_path, capsys, flag, value):
    args = ["--store", str(tmp_path / "runs.sqlite"), "probe", "--victim", "fake"]
    args += ["--attacker", "fake", "--corpus-id", "legal:mit-33338842", flag, value]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{flag} {value}" in err and "give a " in err
    store = tmp_path / "runs.sqlite"
    assert not store.exists() or Store(store).list_runs() == []  # refused before any run


def test_a_probe_of_a_served_victim_stores_its_server_scored_signals(tmp_path):
    """End to end: CLI probe → unit runner → store → results frame, with a black-box victim
    behind an OpenAI-compatible server that answers ``echo`` (a tiny Llama served over HTTP)."""
    from memprobe_core.membership import signals as sig
    from memprobe_core.models import clear_cache
    from tests.helpers.openai_server import serve
    from tests.helpers.tiny_models import tiny_hf_generator

    store = tmp_path / "runs.sqlite"
    text = " ".join(["Licensed under the Apache License, Version 2.0, you may not use"] * 4)
    sig.clear_cache()
    clear_cache()
    with serve(tiny_hf_generator(seed=5), "served-model") as server:
        argv = ["--store", str(store), "probe", text, "--method", "ps_base", "--length", "30"]
        argv += ["--victim", "served-model", "--base-url", server.base_url]
        assert main(argv) == 0
        echoed = [h for h in server.hits if h["payload"].get("echo")]
    assert len(echoed) == 2  # the snippet and its lower-cased form
    with Store(store) as opened:
        run_id = opened.list_runs()[0]["id"]
        row = opened.results_frame(run_id).iloc[0]
    assert row["signal_loss"] > 0 and row["signal_min_k"] < 0
    assert row["signal_suffix_loss"] > 0 and row["signal_lowercase"] > 0
    assert row["signal_min_k_pp"] is None or row["signal_min_k_pp"] != row["signal_min_k_pp"]
