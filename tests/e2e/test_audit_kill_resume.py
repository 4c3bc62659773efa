"""An audit process is SIGKILLed mid-run, then resumed: every unit once, finished units untouched.

The worker is a real separate Python process running the real methods
(``memprobe_core.attacks.run_method``) on slow deterministic fake models (``fake:script`` with a
latency: each generate call sleeps), so the kill lands while a unit is in flight with some of its
candidates already stored.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from memprobe_core.attacks.options import AttackOptions, InteractiveOptions
from memprobe_core.audit import ModelNames, start_audit
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store
from memprobe_core.store.columns import RESULT_COLUMNS_SQL

ROOT = Path(__file__).resolve().parents[2]

WORKER = r"""
import sys
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.audit import resume_audit
from memprobe_core.models.scripted import ScriptedGenerator
from memprobe_core.store import Store

DELAY = float(sys.argv[3])

def answer(ask):
    # Sampled answers differ per request, seed and sample, so candidates are distinct.
    if ask.call.temperature > 0:
        return f"w20 w21 q{len(ask.content) % 7} s{ask.call.seed} {ask.index}"
    return "w20 w21 w22"

def slow_parrot(name):
    return ScriptedGenerator(answer, model_id=name, tokenizer=None, latency_s=DELAY)

def factory(config):
    return ModelSet(victim=slow_parrot("slow/victim"), attacker=slow_parrot("slow/attacker"))

summary = resume_audit(Store(sys.argv[1]), int(sys.argv[2]), models_factory=factory)
print(summary.status, summary.ran, flush=True)
"""

SNIPPETS = [Snippet(f"s{i}", " ".join(f"w{j}" for j in range(50)), "legal") for i in range(6)]
METHODS = ["ps_inst", "interactive"]


def worker(store: Path, run_id: int, delay: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(store), str(run_id), str(delay)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C's default action, as under a terminal: a shell starting jobs in the
        # background (CI may) hands them SIGINT ignored, and Python then keeps ignoring it.
        preexec_fn=_default_sigint,
    )


def snapshot(store: Store, run_id: int) -> dict:
    return {
        u["key"]: {
            "status": u["status"],
            "attempts": u["attempts"],
            "started": u["started"],
            "finished": u["finished"],
            "result": {column: u[column] for column in RESULT_COLUMNS_SQL},
            "candidate_ids": [c["id"] for c in store.candidates(run_id, u["key"])],
        }
        for u in store.units(run_id)
    }


def test_sigkill_then_resume(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = Store(path)
    run_id = start_audit(
        store,
        SNIPPETS,
        METHODS,
        [30],
        AttackOptions(interactive=InteractiveOptions(rounds=2, n_candidates=3)),
        ModelNames(victim="slow/victim", attacker="slow/attacker"),
    )
    total = len(SNIPPETS) * len(METHODS)

    proc = worker(path, run_id, delay=0.15)
    deadline = time.time() + 120
    killed_during = None
    try:
        while time.time() < deadline:
            counts = store.unit_counts(run_id)
            running = store.units(run_id, status="running")
            # Kill once a few units are done and the one in flight has stored candidates.
            if counts["done"] >= 3 and running and store.candidates(run_id, running[0]["key"]):
                os.kill(proc.pid, signal.SIGKILL)
                killed_during = running[0]["key"]
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
    finally:
        if proc.poll() is None and killed_during is None:
            proc.kill()
    proc.wait(timeout=30)
    assert killed_during is not None, "the worker never reached the kill point"
    assert proc.returncode == -signal.SIGKILL

    before = snapshot(store, run_id)
    done_before = {k: v for k, v in before.items() if v["status"] == "done"}
    assert before[killed_during]["status"] == "running"  # the kill left it in flight
    assert before[killed_during]["candidate_ids"]  # its candidates were stored as scored
    assert 3 <= len(done_before) < total

    proc = worker(path, run_id, delay=0.0)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert out.split()[0] == "finished"
    assert int(out.split()[1]) == total - len(done_before)  # only the rest was computed

    after = snapshot(store, run_id)
    units = store.units(run_id)
    keys = [u["key"] for u in units]
    assert len(keys) == total and len(set(keys)) == total  # every unit exactly once
    assert all(u["status"] == "done" for u in units)
    frame = store.results_frame(run_id)
    assert len(frame) == total
    assert not frame.duplicated(["snippet_id", "method", "length"]).any()
    for key, state in done_before.items():  # finished units were not recomputed
        assert after[key] == state, key
    assert after[killed_during]["attempts"] == 2  # the unit in flight was redone once
    # Its stale candidates were replaced, not added to: no (round, index) twice.
    cands = store.candidates(run_id, killed_during)
    pairs = [(c["round"], c["index"]) for c in cands]
    assert len(pairs) == len(set(pairs))
    assert not set(after[killed_during]["candidate_ids"]) & set(
        before[killed_during]["candidate_ids"]
    )
    assert store.get_run(run_id)["status"] == "finished"


def test_ctrl_c_marks_the_run_interrupted(tmp_path):
    """SIGINT (what Ctrl-C sends) at a random moment: the run ends interrupted, nothing half-done."""
    path = tmp_path / "runs.sqlite"
    store = Store(path)
    run_id = start_audit(
        store,
        SNIPPETS,
        METHODS,
        [30],
        AttackOptions(interactive=InteractiveOptions(rounds=2, n_candidates=3)),
    )
    proc = worker(path, run_id, delay=0.15)
    deadline = time.time() + 120
    while store.unit_counts(run_id)["done"] < 2 and time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.split()[0] == "interrupted"
    counts = store.unit_counts(run_id)
    assert counts["running"] == 0 and counts["pending"] > 0  # the unit in flight went back
    assert store.get_run(run_id)["status"] == "interrupted"


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
