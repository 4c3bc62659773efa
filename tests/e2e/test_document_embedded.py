"""Whole documents on the embedded Gemma: the built-in licence mapped by `memprobe document`, the
process SIGKILLed mid-map and resumed (every window once, finished windows untouched, the same
figures as an uninterrupted map), a continuation of the licence on the base model, and the CLI's
one-line refusals on real tokens."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memprobe_core.documents.builtin import builtin_document
from memprobe_core.documents.extraction_map import front_ids, score_windows
from memprobe_core.documents.map_run import read_map
from memprobe_core.documents.windows import MapOptions, cut_windows
from memprobe_core.measuring.sampler import SamplingScheme
from memprobe_core.store import Store

ROOT = Path(__file__).resolve().parents[2]


def cli(store: Path, *argv: str) -> list[str]:
    return [sys.executable, "-m", "memprobe_core.cli", "--store", str(store), "document", *argv]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def licence_scores(embedded_base):
    """Every window of the licence, scored in this process (the uninterrupted map)."""
    text, _ = builtin_document("apache-2.0")
    tok = embedded_base.tokenizer
    ids = tok.encode(text, add_special_tokens=False)
    windows = cut_windows(len(ids), MapOptions())
    front = front_ids(tok, text)
    scores = []
    for first in range(0, len(windows), 16):
        scores += score_windows(
            embedded_base.torch_model,
            ids,
            windows[first : first + 16],
            front=front,
            scheme=SamplingScheme(),
            discover_p=0.5,
        )
    return scores


def test_a_killed_map_resumes_with_every_window_once_and_the_same_figures(tmp_path, licence_scores):
    store_path = tmp_path / "runs.sqlite"
    proc = subprocess.Popen(
        # No near-verbatim bound: this test is of the windows (the bound's resume is
        # tests/unit/documents/test_map_near_verbatim.py's), and on a busy CPU one window's
        # search on Gemma took minutes, which the resume's timeout would have to hold.
        cli(
            store_path,
            "--builtin",
            "apache-2.0",
            "--batch-windows",
            "4",
            "--near-verbatim-windows",
            "0",
        ),
        cwd=ROOT,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        done = 0
        while done < 8 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            if store_path.exists():
                runs = Store(store_path).list_runs(kind="document")
                done = runs[0]["units_done"] if runs else 0
        assert proc.poll() is None, "the map ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    store = Store(store_path)
    before = {u["snippet_id"]: u for u in store.units(1) if u["status"] == "done"}
    assert 8 <= len(before) < len(licence_scores)
    assert store.get_run(1)["status"] == "interrupted"  # its owner is gone

    resumed = subprocess.run(
        cli(store_path, "--resume", "1", "--json"),
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr
    figures = json.loads(resumed.stdout)
    assert figures["status"] == "finished"
    assert figures["windows_total"] == figures["summary"]["windows"] == len(licence_scores)
    units = store.units(1)
    assert len(units) == len({u["snippet_id"] for u in units}) == len(licence_scores)
    for unit in units:  # the windows finished before the kill were not scored again
        if unit["snippet_id"] in before:
            assert unit["finished"] == before[unit["snippet_id"]]["finished"]
            assert unit["attempts"] == before[unit["snippet_id"]]["attempts"]
    stored = read_map(store, 1)
    assert [(s.match_tokens, s.greedy_ids) for s in stored.scores] == [
        (s.match_tokens, s.greedy_ids) for s in licence_scores
    ]


def test_a_continuation_of_the_licence_on_the_base_model(tmp_path):
    store_path = tmp_path / "runs.sqlite"
    argv = ["--builtin", "apache-2.0", "--mode", "continue", "--opening-words", "120"]
    argv += ["--heldback-words", "40", "--max-turns", "2", "--turn-tokens", "96", "--json"]
    done = subprocess.run(
        cli(store_path, *argv), cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["status"] == "finished"
    assert figures["phase1_attempts"] == 1  # a base model gets one opening probe
    assert figures["turns"] == len(Store(store_path).units(1)) >= 1
    assert figures["reference_words"] == len(builtin_document("apache-2.0")[0].split())
    assert 0.0 <= figures["nv_recall"] <= 1.0
    assert "[turn 1, phase 1]" in done.stderr


def test_a_document_shorter_than_a_window_is_refused_on_real_tokens(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("Licensed under the Apache License, Version 2.0.", encoding="utf-8")
    done = subprocess.run(
        cli(tmp_path / "r.sqlite", str(short)),
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]  # transformers' load bar may come before it
    assert last.startswith("memprobe: error:") and "fewer than one window of 50 + 50" in last
