"""Runs killed at points Hypothesis draws: an audit SIGKILLed while it is created, while it
writes units and while it resumes, and a store SIGKILLed while it upgrades; then ``resume``,
``runs`` and ``report``. No finished unit may be lost or duplicated, and the resumed audit must
equal an uninterrupted one unit by unit (``tests/faults/test_kill.py`` tries three fixed seeds;
here the kill points are drawn, and Hypothesis shrinks any failure to its simplest schedule).

Each example forks real CLI processes (``tests/faults/test_kill.py``'s workers), so the count
of examples is a tenth of the profile's (4 in the short profile, 300 in the long one); a map's
example starts fresh interpreters (a forked child must not inherit torch's thread pools), a
fortieth.

An extraction map (a run of kind ``document``) killed at drawn windows resumes to the map an
uninterrupted run scores: every window once, each the same.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memprobe_core.cli import main
from memprobe_core.store import SCHEMA_VERSION, Store
from tests.faults.test_kill import AUDIT, _cli_worker, _run, _units, count, sql
from tests.unit.store.test_store_quarantine import GOOD

EXAMPLES = max(1, settings.default.max_examples // 10)


@pytest.fixture(scope="module")
def reference() -> dict[tuple, dict[str, Any]]:
    """The audit run once, uninterrupted."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.sqlite"
        assert _run(["--store", str(path), *AUDIT]) == 0
        return _units(path)


# A kill point: ("candidates", k, jitter) kills once the store holds k candidates (plus a
# jitter, so it lands between writes as well as inside them); ("clock", seconds) kills that long
# after the process starts (while it imports, reads the corpus or creates the run).
KILL_POINT = st.one_of(
    st.tuples(st.just("candidates"), st.integers(0, 60), st.floats(0.0, 0.03)),
    st.tuples(st.just("clock"), st.floats(0.0, 1.5)),
)


def _kill_run(argv: list[str], point: tuple, path: Path) -> int | None:
    """Run the CLI in a forked worker, SIGKILLed at ``point``; its exit code."""
    worker = multiprocessing.get_context("fork").Process(target=_cli_worker, args=(argv,))
    worker.start()
    deadline = time.monotonic() + 300
    if point[0] == "clock":
        worker.join(timeout=point[1])
    else:
        _, k, jitter = point
        while worker.is_alive() and time.monotonic() < deadline and count(path, "candidates") < k:
            time.sleep(0.005)
        time.sleep(jitter)
    if worker.is_alive():
        os.kill(worker.pid, signal.SIGKILL)  # type: ignore[arg-type]
    worker.join(timeout=300)
    return worker.exitcode


def _next_argv(path: Path) -> list[str]:
    return ["--store", str(path), *(["resume", "1"] if count(path, "runs") else AUDIT)]


@pytest.mark.slow
@settings(max_examples=EXAMPLES)
@given(points=st.lists(KILL_POINT, min_size=1, max_size=3))
def test_an_audit_killed_at_drawn_points_resumes_to_the_uninterrupted_result(
    reference, points, capsys
):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.sqlite"
        for point in points:
            _kill_run(_next_argv(path), point, path)
            # Atomic start: no run at all, or a run with every one of its units.
            assert count(path, "units") in (0, len(reference))
        assert _run(_next_argv(path)) == 0
        # Nothing lost, nothing duplicated, every unit as the uninterrupted run has it.
        assert sql(path, "SELECT COUNT(*), SUM(status = 'done') FROM units") == [
            (len(reference), len(reference))
        ]
        duplicates = sql(
            path,
            "SELECT COUNT(*) FROM (SELECT 1 FROM candidates GROUP BY run_id, snippet_id, method, "
            "length, round, idx HAVING COUNT(*) > 1)",
        )
        assert duplicates == [(0,)]
        assert _units(path) == reference
        capsys.readouterr()
        assert main(["--store", str(path), "runs"]) == 0
        assert main(["--store", str(path), "report", "1"]) == 0
        assert "Traceback" not in capsys.readouterr().err


# --- the upgrade of an old store -------------------------------------------------------------
UNITS = 3000  # enough rows that the upgrade takes a noticeable fraction of a second here


def _version_1_store(path: Path) -> None:
    """A schema-1 store: run 1, an audit with ``UNITS`` finished units (results as JSON)."""
    import json

    from memprobe_core.store.migrations import MIGRATIONS

    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0])
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO runs (id, kind, status, created, updated) VALUES (1, 'audit', 'finished', 0, 0)"
    )
    conn.executemany(
        "INSERT INTO units (run_id, snippet_id, method, length, position, status, result, "
        "attempts) VALUES (1, ?, 'ps_inst', 200, ?, 'done', ?, 1)",
        [(f"s{i}", i, json.dumps({**GOOD, "snippet_id": f"s{i}"})) for i in range(UNITS)],
    )
    conn.commit()
    conn.close()


def _open_store(path: str) -> None:
    """Body of a forked worker: open the store (which upgrades it) and list its runs."""
    with Store(path) as store:
        store.list_runs()
    os._exit(0)


@pytest.fixture(scope="module")
def upgrade_seconds() -> float:
    """How long one upgrade takes here (the kill points are drawn inside it)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "old.sqlite"
        _version_1_store(path)
        began = time.perf_counter()
        Store(path).close()
        return time.perf_counter() - began


@pytest.mark.slow
@settings(max_examples=EXAMPLES)
@given(share=st.floats(0.0, 1.3))
def test_a_store_killed_while_it_upgrades_upgrades_on_the_next_open(upgrade_seconds, share, capsys):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "old.sqlite"
        _version_1_store(path)
        worker = multiprocessing.get_context("fork").Process(target=_open_store, args=(str(path),))
        worker.start()
        worker.join(timeout=share * upgrade_seconds)
        if worker.is_alive():
            os.kill(worker.pid, signal.SIGKILL)  # type: ignore[arg-type]
        worker.join(timeout=300)
        # The upgrade is one transaction: the store is version 1 or the current one, never
        # between; the next open finishes it.
        (version,) = sql(path, "PRAGMA user_version")[0]
        assert version in (1, SCHEMA_VERSION)
        with Store(path) as store:
            assert store.schema_version == SCHEMA_VERSION
            units = store.units(1)
        assert len(units) == UNITS and {u["status"] for u in units} == {"done"}
        assert len({u["snippet_id"] for u in units}) == UNITS
        capsys.readouterr()
        assert main(["--store", str(path), "runs"]) == 0
        assert main(["--store", str(path), "report", "1"]) == 0
        assert "Traceback" not in capsys.readouterr().err


# --- an extraction map ------------------------------------------------------------------------
MAP_SCRIPT = """
import sys, time
from memprobe_core.documents import map_run
from memprobe_core.store import Store
from tests.helpers.tiny_models import tiny_hf_generator

store_path, run_id = sys.argv[1], int(sys.argv[2])
real = map_run.score_windows

def slowed(*args, **kwargs):  # a batch takes long enough for a kill to land inside it
    time.sleep(0.05)
    return real(*args, **kwargs)

map_run.score_windows = slowed
map_run.run_map(Store(store_path), run_id, tiny_hf_generator(seed=7, adds_bos=True))
"""
MAP_TEXT = " ".join(["the licence of this work is granted to any person who asks"] * 20)
MAP_OPTIONS = {"prefix_tokens": 8, "suffix_tokens": 8, "stride": 8, "batch_windows": 2}


def _start_map(path: Path) -> int:
    from memprobe_core.documents import map_run
    from memprobe_core.documents.windows import MapOptions
    from tests.helpers.tiny_models import tiny_hf_generator

    victim = tiny_hf_generator(seed=7, adds_bos=True)
    return map_run.start_map(
        Store(path),
        MAP_TEXT,
        victim,
        name="d",
        victim_name="tiny",
        options=MapOptions(**MAP_OPTIONS),
    )


def _map_units(path: Path) -> list[tuple]:
    return sql(path, "SELECT snippet_id, status, output FROM units ORDER BY snippet_id")


@pytest.fixture(scope="module")
def map_reference() -> list[tuple]:
    """The map scored once, uninterrupted, in this process."""
    from memprobe_core.documents import map_run
    from tests.helpers.tiny_models import tiny_hf_generator

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.sqlite"
        run_id = _start_map(path)
        map_run.run_map(Store(path), run_id, tiny_hf_generator(seed=7, adds_bos=True))
        return _map_units(path)


@pytest.mark.slow
@settings(max_examples=max(1, EXAMPLES // 4))  # two to four processes an example
@given(points=st.lists(st.tuples(st.integers(0, 30), st.floats(0.0, 0.06)), min_size=1, max_size=2))
def test_a_map_killed_at_drawn_windows_resumes_to_the_uninterrupted_map(map_reference, points):
    import subprocess
    import sys

    from memprobe_core.documents import map_run
    from tests.helpers.tiny_models import tiny_hf_generator

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.sqlite"
        run_id = _start_map(path)
        for done, jitter in points:
            proc = subprocess.Popen(
                [sys.executable, "-c", MAP_SCRIPT, str(path), str(run_id)],
                env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
            )
            deadline = time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline:
                finished = sql(path, "SELECT COUNT(*) FROM units WHERE status = 'done'")[0][0]
                if finished >= done:
                    time.sleep(jitter)
                    break
                time.sleep(0.005)
            proc.kill()
            proc.wait(timeout=60)
        stored = map_run.run_map(Store(path), run_id, tiny_hf_generator(seed=7, adds_bos=True))
        # Every window once, each as the uninterrupted map scored it.
        assert [s.index for s in stored.scores] == list(range(stored.windows_total))
        assert _map_units(path) == map_reference
