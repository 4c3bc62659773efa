"""One store file, one -wal: hard links, symbolic links, and a -wal / -shm deleted mid-audit.

SQLite finds a store's -wal (its latest writes) and -shm (its writers' lock table) by name,
beside the name a program opened. A second name of the file (a hard link) or a deleted -wal
gives two programs two -wal files: both believe they hold the write lock, and whatever one of
them wrote vanishes when the other's -wal is replayed — with ``PRAGMA integrity_check`` still ok.
Each test here reproduces the loss with real SQLite files and processes, and checks the run a
process was told is saved from a fresh process.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memprobe_core.cli import main
from memprobe_core.store import Store, StoreError
from tests.faults.helpers import ROOT, cli_process, one_line_error, wait_for
from tests.faults.test_store_faults import FAKE_AUDIT

PROBE = [
    "probe",
    "--corpus-id",
    "legal:apache-2.0-827d10aa",
    "--backend",
    "fake",
    "--method",
    "ps_inst",
    "--length",
    "40",
    "--no-stemmer",
]

# A reader in another process (a dashboard): opens the store, reads, says so, keeps it open
# until its stdin closes. Opened after a -wal was deleted, it makes a fresh -wal and -shm, so
# the deleted one is never replayed by SQLite when the writer closes.
READER = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
print("ready", flush=True)
sys.stdin.read()
"""

# A writer in another process: opens the store as memprobe does and adds one run.
WRITER = r"""
import sys
from memprobe_core.store import Store
with Store(sys.argv[1]) as store:
    print(store.create_run("probe", title=sys.argv[2]))
"""


# A new process's view of a store: the rows of a query, [] while the table does not exist.
FRESH_QUERY = r"""
import json, sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
print(json.dumps(conn.execute(sys.argv[3]).fetchall() if sys.argv[2] in tables else []))
"""


def fresh_rows(path: Path, table: str, query: str) -> list[list]:
    """The rows of ``query`` on ``table`` as a new process opening ``path`` sees them."""
    out = subprocess.run(
        [sys.executable, "-c", FRESH_QUERY, str(path), table, query],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def fresh_runs(path: Path) -> list[tuple[int, str]]:
    """``(id, title)`` of every run, as a new process opening ``path`` sees them."""
    rows = fresh_rows(path, "runs", "SELECT id, title FROM runs ORDER BY id")
    return [(int(i), str(t)) for i, t in rows]


def fresh_units(path: Path) -> dict[str, int]:
    """``{status: count}`` of run 1's units, as a new process opening ``path`` sees them."""
    rows = fresh_rows(path, "units", "SELECT status, COUNT(*) FROM units GROUP BY status")
    return {str(status): int(n) for status, n in rows}


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env
    )


def start_reader(path: Path) -> subprocess.Popen[str]:
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
    return reader


def stop(reader: subprocess.Popen[str]) -> None:
    assert reader.stdin is not None
    reader.stdin.close()
    reader.wait(timeout=30)


def delete_wal(path: Path, suffixes: tuple[str, ...] = ("-wal", "-shm")) -> None:
    for suffix in suffixes:
        os.unlink(f"{path}{suffix}")


# --- one file, two names (hard links) -------------------------------------------------------------
def test_a_store_with_a_second_hard_link_is_refused_and_the_audits_runs_stay(tmp_path):
    """The hostile trial: an audit writes through the real path while three probes open the
    store through a hard link. Unfixed: the probes got run id 1 each, and the audit's run was
    gone at the next open. Now every probe is refused (one line, exit 2), the audit stops
    writing before it writes past them, and every run it committed is there."""
    real, link = tmp_path / "runs.sqlite", tmp_path / "other.sqlite"
    audit = Store(real)
    first = audit.create_run("audit", title="audit")
    os.link(real, link)
    for _ in range(3):
        probe = cli_process(["--store", str(link), *PROBE])
        _, err = probe.communicate(timeout=120)
        assert probe.returncode == 2, err
        line = one_line_error(err)
        assert str(link) in line and "2 names (hard links" in line and "one path" in line
    with pytest.raises(StoreError, match="gained a second name") as refused:
        audit.create_run("audit", title="more")
    assert str(real) in str(refused.value) and "samefile" in str(refused.value)
    audit.close()
    assert fresh_runs(real) == [(first, "audit")]
    assert not Path(f"{link}-wal").exists()  # nobody wrote through the second name
    os.unlink(link)
    with Store(real) as again:  # one name again: usable
        assert again.create_run("probe", title="after") == first + 1


def test_a_hard_linked_store_is_refused_at_open_through_either_name(tmp_path):
    real, link = tmp_path / "runs.sqlite", tmp_path / "other.sqlite"
    Store(real).close()
    os.link(real, link)
    for name in (real, link):
        with pytest.raises(StoreError) as refused:
            Store(name)
        message = str(refused.value)
        assert (
            message.startswith(f"store {name} has 2 names") and "open the store through" in message
        )
    assert not Path(f"{link}-wal").exists()


def test_symbolic_links_to_the_store_or_its_folder_share_its_wal(tmp_path):
    """SQLite resolves symbolic links itself (3.40); the store also opens the real path, so two
    writers through a link and the real path use one -wal and get distinct run ids."""
    folder = tmp_path / "real"
    folder.mkdir()
    real = folder / "runs.sqlite"
    (tmp_path / "linked").symlink_to(folder)
    (tmp_path / "file-link.sqlite").symlink_to(real)
    names = [real, tmp_path / "linked" / "runs.sqlite", tmp_path / "file-link.sqlite"]
    with Store(real) as holder:  # keeps the -wal open while the others write
        holder.create_run("audit", title="real")
        for index, name in enumerate(names):
            out = python(WRITER, str(name), f"via-{index}")
            assert out.returncode == 0, out.stderr
        holder.create_run("audit", title="real again")
    assert fresh_runs(real) == [
        (1, "real"),
        (2, "via-0"),
        (3, "via-1"),
        (4, "via-2"),
        (5, "real again"),
    ]
    assert sorted(p.name for p in tmp_path.rglob("*-wal")) == []  # closed: checkpointed, gone
    assert not any(p.name.endswith("-shm") for p in tmp_path.iterdir())


# --- the -wal and -shm deleted while the store is open --------------------------------------------
def test_wal_deleted_between_writes_loses_no_run_reported_saved(tmp_path):
    """Reproduction: a run is committed, a cleanup job deletes the -wal and -shm, a dashboard
    opens the store (making new ones), the writer goes on. Unfixed: every write since the open
    was only in the deleted -wal and a fresh process finds no run at all. Now the next write
    copies what was committed into the store file through the still-open files, and refuses
    itself (nothing more is written into a file nobody else sees)."""
    path = tmp_path / "runs.sqlite"
    writer = Store(path)
    saved = [writer.create_run("probe", title="before")]
    delete_wal(path)
    reader = start_reader(path)
    refusals: list[str] = []
    try:
        for title in ("after the deletion", "later"):
            try:
                saved.append(writer.create_run("probe", title=title))
            except StoreError as exc:
                refusals.append(str(exc))
        writer.close()
        seen_while_open = fresh_runs(path)
    finally:
        stop(reader)
    # Every id handed out is in the store, for a process that opened it after the deletion too.
    assert [r[0] for r in seen_while_open] == saved
    assert [r[0] for r in fresh_runs(path)] == saved and saved[0] == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # Said so, once per refused write: the store, what happened, what was saved, what to do.
    assert len(refusals) == 2 and saved == [1]
    message = refusals[0]
    assert message.startswith(f"store {path} had its -wal and -shm files deleted")
    assert f"copied every write it committed into {path}" in message
    assert "stop whatever deletes" in message and "memprobe resume RUN" in message


@pytest.mark.parametrize("deleted", [("-shm",), ("-wal",)])
def test_one_of_wal_and_shm_deleted_is_found_too(tmp_path, deleted):
    path = tmp_path / "runs.sqlite"
    writer = Store(path)
    first = writer.create_run("probe", title="before")
    delete_wal(path, deleted)
    with pytest.raises(StoreError, match="copied every write it committed"):
        writer.create_run("probe")
    writer.close()
    assert fresh_runs(path) == [(first, "before")]


def test_wal_deleted_and_another_writer_since_saves_a_copy_of_its_own_view(tmp_path):
    """When another process has written through a new -wal meanwhile, copying the old -wal's
    pages into the store file would mix two versions of it: the writer saves the store as it
    sees it, its runs included, as a file of its own and says where."""
    path = tmp_path / "runs.sqlite"
    writer = Store(path)
    mine = writer.create_run("audit", title="mine")
    delete_wal(path)
    other = python(WRITER, str(path), "theirs")
    assert other.returncode == 0, other.stderr
    with pytest.raises(StoreError) as refused:
        writer.create_run("audit", title="more")
    writer.close()
    message = str(refused.value)
    assert "another program has written to the store since" in message
    (rescued,) = tmp_path.glob("runs.sqlite.rescued-*.sqlite")
    assert str(rescued) in message
    assert fresh_runs(rescued) == [(mine, "mine")]


def test_wal_deleted_mid_audit_loses_no_unit_and_resume_finishes(store_path, capsys):
    """A real `memprobe audit` process; a cleanup job deletes the -wal and -shm while it runs
    and a dashboard opens the store just after. Unfixed: the audit said all 12 units done, and
    a fresh process found none of them (no table even). Now the audit stops with one line naming
    the store, every unit it finished is in the store file, and `resume` finishes the rest."""

    def done_units() -> int:
        try:
            conn = sqlite3.connect(store_path)
            try:
                return conn.execute("SELECT COUNT(*) FROM units WHERE status = 'done'").fetchone()[
                    0
                ]
            finally:
                conn.close()
        except sqlite3.Error:
            return 0

    audit = cli_process(["--store", str(store_path), *FAKE_AUDIT], slow_s=0.05)
    wait_for(lambda: done_units() >= 2, what="two units done")
    delete_wal(store_path)
    reader = start_reader(store_path)
    try:
        _, err = audit.communicate(timeout=300)
        finished = [int(n) for n in re.findall(r"^\[(\d+)/12 units\]", err, re.MULTILINE)]
        with_reader_open = fresh_units(store_path)
    finally:
        stop(reader)
    reported = max(finished)
    assert reported >= 2
    assert with_reader_open.get("done", 0) >= reported, (with_reader_open, err[-2000:])
    assert fresh_units(store_path).get("done", 0) >= reported
    assert audit.returncode == 2, err
    line = one_line_error(err)
    assert str(store_path) in line and "-wal and -shm files deleted" in line
    assert main(["--store", str(store_path), "resume", "1"]) == 0
    capsys.readouterr()
    assert fresh_units(store_path) == {"done": 12}


def test_wal_deleted_while_a_candidate_is_recorded_stops_the_unit_not_fails_it(
    store_path, capsys, monkeypatch
):
    """The refusal reaches the method through its event callback; the unit runner must take
    it for a failing store (stop, unit left to resume), never for a failing method (a unit
    recorded as an error, a warning saying it failed)."""
    real_record = Store.record_candidate
    recorded = {"n": 0}

    def cleanup_then_record(self, *args, **kwargs):
        recorded["n"] += 1
        if recorded["n"] == 3:
            delete_wal(store_path)
        return real_record(self, *args, **kwargs)

    monkeypatch.setattr(Store, "record_candidate", cleanup_then_record)
    assert main(["--store", str(store_path), *FAKE_AUDIT]) == 2
    err = capsys.readouterr().err
    line = one_line_error(err)
    assert "StoreError" not in err and "failed:" not in err
    assert str(store_path) in line and f"copied every write it committed into {store_path}" in line
    monkeypatch.undo()
    units = fresh_units(store_path)
    assert units.get("error", 0) == 0 and units.get("running") == 1, units
    assert main(["--store", str(store_path), "resume", "1"]) == 0
    assert fresh_units(store_path) == {"done": 12}


def test_store_file_replaced_while_open_is_refused(tmp_path):
    path = tmp_path / "runs.sqlite"
    writer = Store(path)
    writer.create_run("probe")
    with Store(tmp_path / "other.sqlite"):
        pass
    os.replace(tmp_path / "other.sqlite", path)
    with pytest.raises(StoreError, match="was replaced, moved or deleted"):
        writer.create_run("probe")
    writer.close()


# --- no false alarms --------------------------------------------------------------------------
def test_wal_made_anew_after_close_and_other_processes_are_no_split(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = Store(path)
    store.create_run("probe")
    store.close()  # the last connection: SQLite checkpoints and deletes the -wal itself
    assert not Path(f"{path}-wal").exists()
    assert store.create_run("probe") == 2  # reconnects to the new -wal: no split
    out = python(WRITER, str(path), "other process")
    assert out.returncode == 0, out.stderr
    assert store.create_run("probe") == 4
    store.close()
    assert [r[0] for r in fresh_runs(path)] == [1, 2, 3, 4]
