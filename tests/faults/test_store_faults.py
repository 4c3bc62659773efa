"""The run store under faults: huge texts, a crowd at first use, damage, read-only, disk full."""

from __future__ import annotations

import gc
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.cli import main
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import SCHEMA_VERSION, Store, UnitKey
from memprobe_core.store.store import MAX_STORED_TEXT, clip_text
from tests.faults.helpers import one_line_error

UNIT = UnitKey("s", "ps_inst", 30)
HUGE = "x" * (3 * MAX_STORED_TEXT)
FAKE_AUDIT = [
    "audit",
    "--corpus",
    "--per-domain",
    "2",
    "--backend",
    "fake",
    "--methods",
    "ps_inst",
    "interactive",
    "--lengths",
    "40",
    "--rounds",
    "1",
    "--n",
    "2",
    "--no-stemmer",
]


def new_run(store: Store) -> int:
    return store.create_run("probe", snippets=[Snippet("s", "w " * 40, "legal")], units=[UNIT])


# --- item 2: a huge completion is stored cut, with a flag ----------------------------------------
def test_huge_candidate_texts_are_stored_cut_and_flagged(tmp_path):
    with Store(tmp_path / "runs.sqlite") as store:
        run_id = new_run(store)
        store.record_candidate(run_id, UNIT, Candidate(0, 0, HUGE, HUGE, 0.5, 0.1, 0.3))
        store.record_candidate(run_id, UNIT, Candidate(0, 1, "short", "short", 0.5, 0.1, 0.3))
        huge, short = store.candidates(run_id, UNIT)
    assert len(huge["prompt"]) == len(huge["output"]) == MAX_STORED_TEXT
    assert huge["output"].endswith("truncated by memprobe]")
    assert huge["flags"] == ["clipped"]
    assert short["output"] == "short" and short["flags"] == []


def test_huge_unit_result_and_error_are_stored_cut(tmp_path):
    with Store(tmp_path / "runs.sqlite") as store:
        run_id = new_run(store)
        store.mark_unit_running(run_id, UNIT)
        store.finish_unit(
            run_id,
            UNIT,
            AttackResult(
                method="ps_inst",
                snippet_id="s",
                domain="legal",
                length=30,
                prompt="p",
                output=HUGE,
                mem=0.5,
                lcs_p=0.1,
                objective=0.3,
                alpha=0.5,
                manifest={"victim": "v"},
            ),
        )
        (unit,) = store.units(run_id)
        assert len(unit["output"]) == MAX_STORED_TEXT and unit["prompt"] == "p"
        assert unit["manifest"] == {"victim": "v", "clipped": ["output"]}
        store.fail_unit(run_id, UNIT, "ModelError: " + HUGE)
        assert len(store.units(run_id)[0]["error"]) == MAX_STORED_TEXT


def test_clip_text_keeps_short_texts_whole():
    assert clip_text("abc", 10) == ("abc", False)
    assert clip_text(None) == (None, False)
    cut, was_cut = clip_text("a" * 100, 40)
    assert was_cut and len(cut) == 40


# --- item 5: twenty processes open one brand-new store at once -----------------------------------
def _open_store(
    path: str, barrier: multiprocessing.synchronize.Barrier, results: multiprocessing.Queue
) -> None:
    barrier.wait()
    try:
        with Store(path) as store:
            store.list_runs()
        results.put("ok")
    except Exception as exc:
        results.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(3))
def test_twenty_processes_create_one_new_store_at_once(tmp_path, attempt):
    # fork: the children start in milliseconds (no re-import), so they really race.
    context = multiprocessing.get_context("fork")
    path = str(tmp_path / f"new-{attempt}.sqlite")
    barrier, results = context.Barrier(20), context.Queue()
    workers = [
        context.Process(target=_open_store, args=(path, barrier, results)) for _ in range(20)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert outcomes == ["ok"] * 20, [o for o in outcomes if o != "ok"]
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION


# --- item 6: one line, exit 2 --------------------------------------------------------------------
def _audit_store(store_path: Path, capsys) -> None:
    """A finished fake audit in ``store_path``, every page in the main file (WAL emptied)."""
    assert main(["--store", str(store_path), *FAKE_AUDIT]) == 0
    capsys.readouterr()
    gc.collect()  # the command's own connections
    conn = sqlite3.connect(store_path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def test_corrupted_store_page_is_one_line_exit_2(store_path, capsys):
    _audit_store(store_path, capsys)
    data = bytearray(store_path.read_bytes())
    page = 4096
    for start in range(page, len(data), page):  # every page but the first (the schema)
        data[start + 8 : start + page] = b"\xde\xad\xbe\xef" * ((page - 8) // 4)
    store_path.write_bytes(bytes(data))
    for command in (["report", "1"], ["runs"], ["resume", "1"]):
        assert main(["--store", str(store_path), *command]) == 2, command
        line = one_line_error(capsys.readouterr().err)
        assert line.startswith("memprobe:") and str(store_path) in line


def test_read_only_store_probe_is_one_line_exit_2(store_path, capsys, monkeypatch):
    _audit_store(store_path, capsys)
    # A truly read-only file (chmod does not stop root): every connection opens with mode=ro.
    connect = sqlite3.connect

    def read_only(path, *args, **kwargs):
        return connect(f"file:{path}?mode=ro", *args, uri=True, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", read_only)
    assert main(["--store", str(store_path), "runs"]) == 0  # reading still works
    capsys.readouterr()
    code = main(
        [
            "--store",
            str(store_path),
            "probe",
            "--corpus-id",
            "legal:apache-2.0-827d10aa",
            "--backend",
            "fake",
            "--method",
            "ps_inst",
            "--length",
            "40",
        ]
    )
    assert code == 2
    assert "readonly database" in one_line_error(capsys.readouterr().err)


def test_disk_full_during_audit_keeps_committed_units(store_path, capsys, monkeypatch):
    writes = {"left": 40}
    real_write = Store._write

    def filling(self):
        writes["left"] -= 1
        if writes["left"] < 0:  # the disk is full from now on: every write fails
            raise sqlite3.OperationalError("database or disk is full")
        return real_write(self)

    monkeypatch.setattr(Store, "_write", filling)
    assert main(["--store", str(store_path), *FAKE_AUDIT]) == 2
    assert "disk is full" in one_line_error(capsys.readouterr().err)
    monkeypatch.undo()
    with Store(store_path) as store:
        counts = store.unit_counts(1)
        done_before = {u["key"]: u["output"] for u in store.units(1, status="done")}
    assert counts["done"] >= 1 and sum(counts.values()) == 12
    # Room again: resume finishes the audit and keeps what was committed before the fault.
    assert main(["--store", str(store_path), "resume", "1"]) == 0
    with Store(store_path) as store:
        assert store.unit_counts(1)["done"] == 12
        assert {
            k: o for k, o in ((u["key"], u["output"]) for u in store.units(1)) if k in done_before
        } == done_before


def test_unknown_run_is_one_line_exit_2(store_path, capsys):
    for command in (["report", "7"], ["resume", "7"]):
        assert main(["--store", str(store_path), *command]) == 2
        assert "run 7 is not in store" in one_line_error(capsys.readouterr().err)
