"""Several processes start the same audit at the same moment: exactly one runs it.

Each contender is a real ``memprobe --store X resume 1`` in its own interpreter, held at a file
barrier after its imports and released together, so they reach the run's claim within
milliseconds of each other. The claim (``Store.claim_run``: read the owner, refuse a live one,
write this process, one write transaction) lets one through; the others exit 2 naming it. The
store must then hold every unit done once (one attempt) and exactly the candidates of one
uninterrupted run, as a reference audit run alone in another store.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memprobe_core.attacks.options import AttackOptions, InteractiveOptions
from memprobe_core.audit import AuditBusyError, ModelNames, run_audit, start_audit
from memprobe_core.executors.base import AuditWork
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store
from memprobe_core.store.owner import OTHER_HOST_QUIET_S, owner_record
from tests.faults.helpers import ROOT, wait_for

# 4 snippets × 2 methods × 1 length; the fake models answer after a short latency, so the run
# lasts long enough (about a second) for any contender let through by mistake to overlap it.
SNIPPETS = [Snippet(f"s{i}", " ".join(f"w{i}x{j}" for j in range(60)), "legal") for i in range(4)]
METHODS = ["ps_inst", "interactive"]
OPTIONS = AttackOptions(
    seed=3,
    interactive=InteractiveOptions(rounds=2, n_candidates=3),
    scoring={"stemmer": False},  # type: ignore[arg-type]  # no nltk import in each process
)

# A contender: imports done, says it is ready, waits for the go file, then runs the real CLI.
CONTENDER = r"""
import sys, time
from pathlib import Path
from memprobe_core.cli.main import main
ready, go = Path(sys.argv[1]), Path(sys.argv[2])
ready.write_text("ready")
while not go.exists():
    time.sleep(0.0005)
sys.exit(main(sys.argv[3:]))
"""


def names(latency_s: float) -> ModelNames:
    return ModelNames(
        victim="fake",
        attacker="fake",
        backend="fake",
        load_options={"latency_s": latency_s} if latency_s else {},
    )


def new_audit(path: Path, latency_s: float = 0.01) -> int:
    with Store(path) as store:
        return start_audit(
            store, SNIPPETS, METHODS, [40], OPTIONS, names(latency_s), split_tokenizer="whitespace"
        )


def sql(path: Path, query: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, int]:
    """Candidates per unit of the same audit run alone, start to end, by one process."""
    path = tmp_path_factory.mktemp("reference") / "runs.sqlite"
    run_id = new_audit(path, latency_s=0.0)
    with Store(path) as store:
        summary = run_audit(store, run_id)
    assert summary.status == "finished" and summary.done == len(SNIPPETS) * len(METHODS)
    return per_unit_candidates(path)


def per_unit_candidates(path: Path) -> dict[str, int]:
    rows = sql(
        path,
        "SELECT snippet_id || '/' || method, COUNT(*) FROM candidates GROUP BY snippet_id, method",
    )
    return dict(rows)


def contenders(store: Path, work: Path, n: int, argv: list[str]) -> list[subprocess.Popen]:
    """``n`` CLI processes, all imported and waiting at the barrier (``work/go`` releases them)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = []
    for i in range(n):
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    CONTENDER,
                    str(work / f"ready{i}"),
                    str(work / "go"),
                    "--store",
                    str(store),
                    *argv,
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    wait_for(
        lambda: all((work / f"ready{i}").exists() for i in range(n)),
        timeout_s=120,
        what="every contender at the barrier",
    )
    return procs


def finish(procs: list[subprocess.Popen]) -> list[tuple[int, int, str]]:
    """``(pid, exit code, stderr)`` of each contender once it has ended."""
    ended = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        ended.append((proc.pid, proc.returncode, err))
    return ended


def assert_ran_once(path: Path, reference: dict[str, int]) -> None:
    """Every unit done with one attempt; the candidates of exactly one run, none twice."""
    units = sql(path, "SELECT snippet_id, method, status, attempts FROM units")
    assert len(units) == len(SNIPPETS) * len(METHODS)
    assert all(status == "done" and attempts == 1 for _, _, status, attempts in units), units
    assert per_unit_candidates(path) == reference
    duplicates = sql(
        path,
        "SELECT COUNT(*) FROM (SELECT 1 FROM candidates GROUP BY snippet_id, method, length, "
        "round, idx HAVING COUNT(*) > 1)",
    )
    assert duplicates == [(0,)]
    assert sql(path, "SELECT status FROM runs") == [("finished",)]


def assert_refused(err: str, holder: int) -> None:
    lines = [line for line in err.splitlines() if line.startswith("memprobe:")]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    line = lines[0]
    assert f"run 1 is being run by process {holder} on this machine" in line, err
    assert socket.gethostname() in line and "wait for it" in line and f"kill {holder}" in line


@pytest.mark.parametrize("n", [2, 3, 5])
def test_resumes_started_together_run_the_audit_once(n, tmp_path, reference):
    store = tmp_path / "runs.sqlite"
    run_id = new_audit(store)
    with Store(store) as s:
        s.set_run_status(run_id, "interrupted")
    procs = contenders(store, tmp_path, n, ["resume", str(run_id)])
    (tmp_path / "go").write_text("go")
    ended = finish(procs)
    winners = [(pid, err) for pid, code, err in ended if code == 0]
    assert len(winners) == 1, [(code, err[-400:]) for _, code, err in ended]
    holder = winners[0][0]
    for pid, code, err in ended:
        if pid != holder:
            assert code == 2, err
            assert_refused(err, holder)
    assert_ran_once(store, reference)
    with Store(store) as s:
        assert s.get_run(run_id)["manifest"]["owner"]["pid"] == holder


def test_a_fresh_audit_and_resumes_started_together_run_it_once(tmp_path, reference):
    """``run_audit`` right after ``start_audit`` (as ``memprobe audit`` does) against two
    ``memprobe resume`` of the new run: one of the three runs it."""
    store = tmp_path / "runs.sqlite"
    run_id = new_audit(store)  # status `running`, no owner yet
    procs = contenders(store, tmp_path, 2, ["resume", str(run_id)])
    outcome: list[object] = []
    with Store(store) as s:
        (tmp_path / "go").write_text("go")
        try:
            outcome.append(run_audit(s, run_id))
        except AuditBusyError as exc:
            outcome.append(exc)
    ended = finish(procs)
    here_ran = not isinstance(outcome[0], AuditBusyError)
    winners = [pid for pid, code, _ in ended if code == 0] + ([os.getpid()] if here_ran else [])
    assert len(winners) == 1, (outcome, [(code, err[-400:]) for _, code, err in ended])
    holder = winners[0]
    for pid, code, err in ended:
        if pid != holder:
            assert code == 2, err
            assert_refused(err, holder)
    if not here_ran:
        assert f"process {holder} on this machine" in str(outcome[0])
    assert_ran_once(store, reference)


class _NeverRun:
    """An executor (named like the Ray one) that records whether it was asked to run."""

    name = "ray"

    def __init__(self) -> None:
        self.ran = False

    def run(self, work: AuditWork, models: object = None) -> None:
        self.ran = True


def test_a_held_run_is_refused_before_any_executor_runs(tmp_path):
    """The claim comes before the executor (local or Ray): nothing is changed or run."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run_id = new_audit(tmp_path / "runs.sqlite")
        with Store(tmp_path / "runs.sqlite") as store:
            # Another live process holds the run, one unit in flight.
            holder = {"pid": other.pid, "host": socket.gethostname()}
            assert store.claim_run(run_id, holder) is None
            first = store.units(run_id)[0]["key"]
            store.mark_unit_running(run_id, first)
            executor = _NeverRun()
            with pytest.raises(AuditBusyError, match=f"process {other.pid} on this machine"):
                run_audit(store, run_id, executor=executor)  # type: ignore[arg-type]
            assert not executor.ran
            assert store.units(run_id)[0]["status"] == "running"  # its unit left alone
            assert store.get_run(run_id)["manifest"]["owner"]["pid"] == other.pid
    finally:
        other.kill()
        other.wait()


def test_claims_at_once_through_two_connections_are_one_at_a_time(tmp_path):
    """Two store objects (two connections) claim at once for two live owners: one wins."""
    sleepers = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)
    ]
    try:
        path = tmp_path / "runs.sqlite"
        run_id = new_audit(path)
        owners = [{"pid": p.pid, "host": socket.gethostname()} for p in sleepers]
        results: list[object] = [None, None]
        barrier = threading.Barrier(2)

        def claim(i: int) -> None:
            with Store(path) as store:
                barrier.wait()
                results[i] = store.claim_run(run_id, owners[i])

        threads = [threading.Thread(target=claim, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        winner = 0 if results[0] is None else 1
        assert results[1 - winner] == owners[winner], results  # refused, naming the winner
        with Store(path) as store:
            assert store.get_run(run_id)["manifest"]["owner"] == owners[winner]
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


def test_a_dead_or_silent_owner_is_taken_over(tmp_path):
    path = tmp_path / "runs.sqlite"
    run_id = new_audit(path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with Store(path) as store:
        assert store.claim_run(run_id, {"pid": dead.pid, "host": socket.gethostname()}) is None
        assert store.claim_run(run_id, owner_record()) is None  # dead pid: taken over
        # A pid reused by another process (another start time) is not the recorded owner.
        reused = {"pid": os.getppid(), "host": socket.gethostname(), "proc_start": -1}
        store.update_run(run_id, manifest={"owner": reused})
        assert store.claim_run(run_id, owner_record()) is None
        # Another host: held while the run was written to recently, taken over once silent.
        far = {"pid": 7, "host": "elsewhere.invalid"}
        store.update_run(run_id, manifest={"owner": far})
        assert store.claim_run(run_id, owner_record()) == far
        with pytest.raises(AuditBusyError, match="host elsewhere.invalid, which this machine"):
            run_audit(store, run_id)
        quiet = time.time() - OTHER_HOST_QUIET_S - 1
        conn = sqlite3.connect(path)
        conn.execute("UPDATE runs SET updated = ? WHERE id = ?", (quiet, run_id))
        conn.commit()
        conn.close()
        assert store.claim_run(run_id, owner_record()) is None
        # A finished run is released: anyone may claim it again.
        store.update_run(run_id, manifest={"owner": far})
        store.set_run_status(run_id, "finished")
        assert store.claim_run(run_id, owner_record()) is None
