"""Processes killed mid-run: SIGTERM and SIGKILL of a probe, SIGKILL at random points of an audit.

Probes run as real ``memprobe`` processes (a new interpreter, the fake backend slowed so the
signal lands while a unit is in flight). The audit workers are forked from the test process
(milliseconds to start, no re-import), run the real CLI and are SIGKILLed after a seeded random
delay; the audit is then resumed to its end and checked with SQL against an uninterrupted run.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from memprobe_core.attacks.costs import Costs
from memprobe_core.cli import main
from memprobe_core.models import fake
from memprobe_core.store import Store
from tests.faults.helpers import cli_process, wait_for

LONG_PROBE = [
    "probe",
    "--corpus-id",
    "legal:apache-2.0-827d10aa",
    "--backend",
    "fake",
    "--method",
    "interactive",
    "--rounds",
    "100",
    "--n",
    "4",
    "--length",
    "40",
    "--no-stemmer",
]  # no stemmer: the short-lived processes skip importing nltk
AUDIT = [
    "audit",
    "--corpus",
    "--per-domain",
    "1",
    "--backend",
    "fake",
    "--methods",
    "ps_inst",
    "interactive",
    "--lengths",
    "40",
    "--rounds",
    "2",
    "--n",
    "3",
    "--no-stemmer",
]
# Seeds of the random kill points; MEMPROBE_KILL_SEEDS="7 8 9" runs others.
KILL_SEEDS = [int(s) for s in os.environ.get("MEMPROBE_KILL_SEEDS", "0 1 2").split()]
SLOW_FAKE_S = 0.02
# Result columns that legitimately differ between two runs of the same unit: every clock
# reading in Costs (a new one is covered without editing this list).
TIMING_COSTS = Costs.measured_on_the_machine()  # clock and load: differ between any two runs


def sql(path: Path, query: str, params: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def count(path: Path, table: str) -> int:
    """Rows of ``table`` (0 when the file or its tables do not exist yet)."""
    try:
        return sql(path, f"SELECT COUNT(*) FROM {table}")[0][0] if path.exists() else 0
    except sqlite3.OperationalError:  # killed before the schema was committed
        return 0


def candidates_stored(path: Path) -> bool:
    try:
        return sql(path, "SELECT COUNT(*) FROM candidates")[0][0] > 0
    except sqlite3.Error:  # not created yet
        return False


# --- item 6: a killed probe never stays `running` --------------------------------------------------
@pytest.mark.slow
def test_sigterm_probe_is_interrupted_and_its_unit_pending(store_path):
    proc = cli_process(["--store", str(store_path), *LONG_PROBE], slow_s=0.05)
    wait_for(lambda: candidates_stored(store_path), what="a stored candidate")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    assert sql(store_path, "SELECT status FROM runs") == [("interrupted",)]  # written, not guessed
    assert sql(store_path, "SELECT status FROM units") == [("pending",)]


@pytest.mark.slow
def test_sigkilled_probe_reads_as_interrupted(store_path, capsys):
    proc = cli_process(["--store", str(store_path), *LONG_PROBE], slow_s=0.05)
    wait_for(lambda: candidates_stored(store_path), what="a stored candidate")
    pid = proc.pid
    proc.kill()
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert sql(store_path, "SELECT status FROM runs") == [("running",)]  # nobody could write
    with Store(store_path) as store:
        run = store.get_run(1)
        assert run["manifest"]["owner"]["pid"] == pid
        assert run["status"] == "interrupted"
        assert [r["status"] for r in store.list_runs()] == ["interrupted"]
    assert main(["--store", str(store_path), "runs"]) == 0
    assert "interrupted" in capsys.readouterr().out


def test_a_live_owner_keeps_its_run_running(store_path):
    with Store(store_path) as store:
        store.create_run(
            "probe", manifest={"owner": {"pid": os.getpid(), "host": os.uname().nodename}}
        )
        store.create_run("probe", manifest={"owner": {"pid": 1, "host": "elsewhere"}})
        assert [r["status"] for r in store.list_runs()] == ["running", "running"]


# --- item 10: SIGKILL at random points of an audit, then resume ------------------------------------
def _cli_worker(argv: list[str]) -> None:
    """Body of a forked worker: the real CLI, the fake backend slowed a little."""
    original = fake.FakeGenerator._generate

    def slowed(self: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(SLOW_FAKE_S)
        return original(self, *args, **kwargs)

    fake.FakeGenerator._generate = slowed  # type: ignore[method-assign]
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os._exit(main(argv))


def _run(
    argv: list[str],
    *,
    kill_at: int | None = None,
    rng: random.Random | None = None,
    path: Path | None = None,
) -> int | None:
    """Run the CLI in a forked worker and return its exit code.

    With ``kill_at``, SIGKILL it once the store holds that many candidates (plus a random
    0-20 ms, so the kill lands between as well as inside writes): a point in the audit's
    progress rather than in time, so it lands mid-audit however busy the machine is.
    """
    worker = multiprocessing.get_context("fork").Process(target=_cli_worker, args=(argv,))
    worker.start()
    if kill_at is not None and path is not None and rng is not None:
        deadline = time.monotonic() + 300
        while worker.is_alive() and time.monotonic() < deadline:
            if count(path, "candidates") >= kill_at:
                time.sleep(rng.uniform(0.0, 0.02))
                os.kill(worker.pid, signal.SIGKILL)
                break
            time.sleep(0.005)
    worker.join(timeout=300)
    return worker.exitcode


def _units(path: Path) -> dict[tuple, dict[str, Any]]:
    """Every unit's stored result and candidates, without timestamps, ids or timings."""
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    units: dict[tuple, dict[str, Any]] = {}
    for row in conn.execute("SELECT * FROM units WHERE run_id = 1"):
        data = {
            k: row[k]
            for k in row.keys()  # noqa: SIM118 - a sqlite3.Row, not a dict
            if k
            not in (
                "started",
                "finished",
                "seconds",
                "attempts",
                "position",
            )
        }
        costs = json.loads(data["costs"] or "{}")
        data["costs"] = {k: v for k, v in costs.items() if k not in TIMING_COSTS}
        key = (row["snippet_id"], row["method"], row["length"])
        data["candidates"] = [
            tuple(c)
            for c in conn.execute(
                "SELECT round, idx, prompt, output, mem, lcs_p, objective, flags, is_round_best, "
                "extra FROM candidates WHERE run_id = 1 AND snippet_id = ? AND method = ? AND "
                "length = ? ORDER BY id",
                key,
            )
        ]
        units[key] = data
    conn.close()
    return units


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[tuple, dict[str, Any]]:
    """The audit run once, uninterrupted."""
    path = tmp_path_factory.mktemp("reference") / "runs.sqlite"
    assert _run(["--store", str(path), *AUDIT]) == 0
    return _units(path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", KILL_SEEDS)
def test_sigkill_at_random_points_then_resume_matches_an_uninterrupted_run(
    tmp_path, reference, seed
):
    rng = random.Random(seed)
    path = tmp_path / "runs.sqlite"
    total = sum(len(unit["candidates"]) for unit in reference.values())
    kills = 0
    for _ in range(2):  # two kills at random points, then run to the end
        argv = ["--store", str(path), *(["resume", "1"] if count(path, "runs") else AUDIT)]
        code = _run(argv, kill_at=rng.randrange(total), rng=rng, path=path)
        kills += code == -signal.SIGKILL
        # Atomic start: either no run at all, or a run with every one of its units.
        assert count(path, "units") in (0, len(reference))
    argv = ["--store", str(path), *(["resume", "1"] if count(path, "runs") else AUDIT)]
    assert _run(argv) == 0
    assert kills >= 1
    # Nothing lost, nothing duplicated, every unit identical to the uninterrupted run.
    assert sql(path, "SELECT COUNT(*), SUM(status = 'done') FROM units") == [
        (len(reference), len(reference))
    ]
    assert sql(
        path,
        "SELECT COUNT(*) FROM (SELECT 1 FROM candidates GROUP BY run_id, "
        "snippet_id, method, length, round, idx HAVING COUNT(*) > 1)",
    ) == [(0,)]
    assert _units(path) == reference
