"""The run store's SQLite file: tables, ordered migrations, version checks, connections, rows.

:class:`StoreFile` (the base of ``memprobe_core.store.Store``) holds one connection per thread and
one writer at a time, and opens the file through :func:`migrate`, which creates the tables of a
new file, upgrades an older one step by step (``MIGRATIONS[i]`` takes version ``i`` to ``i + 1``,
the version kept in ``PRAGMA user_version``) and refuses files it cannot use with a
:class:`StoreError` that says what to do.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, cast

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.errors import MemprobeError
from memprobe_core.paths import default_store_path
from memprobe_core.store.records import (
    CandidateRecord,
    RunRecord,
    UnitKey,
    UnitRecord,
)

log = logging.getLogger(__name__)


# How long a writer waits for another process's write lock before giving up (ms).
BUSY_TIMEOUT_MS = 30_000


class StoreError(MemprobeError, RuntimeError):
    """The store file cannot be used; the message says which file and what to do."""


# --- schema ---------------------------------------------------------------------------------------
# Each entry upgrades the schema by one version: MIGRATIONS[i] takes version i to i + 1.
# Never edit a released entry; append a new one (ALTER TABLE / data fix-ups) instead.
_V1 = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    config TEXT NOT NULL DEFAULT '{}',
    manifest TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE samples (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    snippet_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    domain TEXT NOT NULL,
    text TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, snippet_id)
);
CREATE TABLE units (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    snippet_id TEXT NOT NULL,
    method TEXT NOT NULL,
    length INTEGER NOT NULL,
    position INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    error TEXT,
    result TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    started REAL,
    finished REAL,
    seconds REAL,
    PRIMARY KEY (run_id, snippet_id, method, length)
);
CREATE TABLE candidates (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    snippet_id TEXT NOT NULL,
    method TEXT NOT NULL,
    length INTEGER NOT NULL,
    round INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    prompt TEXT NOT NULL,
    output TEXT NOT NULL,
    mem REAL,
    lcs_p REAL,
    objective REAL,
    flags TEXT NOT NULL DEFAULT '[]',
    is_round_best INTEGER NOT NULL DEFAULT 0,
    extra TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL
);
CREATE INDEX candidates_unit ON candidates (run_id, snippet_id, method, length);
CREATE INDEX units_status ON units (run_id, status);
"""

# A unit's result is stored once: its scalars and small JSON parts as columns of ``units``, its
# trace as the ``candidates`` rows written while it ran. Version 1 kept the whole result as JSON
# in ``units.result`` (trace included, a second copy of the candidates).
RESULT_COLUMNS_SQL: dict[str, str] = {
    "domain": "TEXT",
    "prompt": "TEXT",
    "output": "TEXT",
    "mem": "REAL",
    "lcs_p": "REAL",
    "objective": "REAL",
    "dis": "REAL",
    "alpha": "REAL",
    "pii": "TEXT",
    "costs": "TEXT",
    "manifest": "TEXT",
    "mem_init": "REAL",
    "mem_best": "REAL",
    "mem_reference": "REAL",
    "verbatim": "TEXT",
    "membership": "TEXT",
}
# Columns added after version 2, with the migration that adds them (version 2 adds the rest).
_V3_COLUMNS: tuple[str, ...] = ("mem_init", "mem_best", "mem_reference")
_V4_COLUMNS: tuple[str, ...] = ("verbatim", "membership")
JSON_RESULT_COLUMNS: tuple[str, ...] = ("pii", "costs", "manifest", "verbatim", "membership")


def _v2_result_columns(conn: sqlite3.Connection) -> None:
    """Version 2: the result JSON of each unit becomes columns; the JSON column is dropped."""
    # Version 2's columns only: a released migration must keep doing what it did.
    later = _V3_COLUMNS + _V4_COLUMNS
    columns = {c: t for c, t in RESULT_COLUMNS_SQL.items() if c not in later}
    for column, sql_type in columns.items():
        conn.execute(f"ALTER TABLE units ADD COLUMN {column} {sql_type}")
    rows = conn.execute("SELECT rowid, result FROM units WHERE result IS NOT NULL").fetchall()
    for rowid, text in rows:
        result = json.loads(text)
        values = [
            dumps(result.get(c) or {}) if c in JSON_RESULT_COLUMNS else result.get(c)
            for c in columns
        ]
        sets = ", ".join(f"{c} = ?" for c in columns)
        conn.execute(f"UPDATE units SET {sets} WHERE rowid = ?", (*values, rowid))
    conn.execute("ALTER TABLE units DROP COLUMN result")


def _v3_selection_columns(conn: sqlite3.Connection) -> None:
    """Version 3: the Mem of each selection rule (initial prompt, best in trace, reference's).

    Older results get NULL; ``mem_best`` is filled from their stored candidates (non-empty ones),
    the others need the round structure a report cannot assume for every method.
    """
    for column in _V3_COLUMNS:
        conn.execute(f"ALTER TABLE units ADD COLUMN {column} REAL")
    conn.execute(
        """UPDATE units SET mem_best = (
               SELECT MAX(c.mem) FROM candidates c
               WHERE c.run_id = units.run_id AND c.snippet_id = units.snippet_id
                 AND c.method = units.method AND c.length = units.length
                 AND c.flags NOT LIKE '%"empty"%')
           WHERE status IN ('done', 'cancelled')"""
    )


def _v4_membership_columns(conn: sqlite3.Connection) -> None:
    """Version 4: snippet labels (member / non-member) and each unit's verbatim-extraction
    metrics and membership signals (JSON). Older rows stay NULL: unlabelled, not measured."""
    conn.execute("ALTER TABLE samples ADD COLUMN label TEXT")
    for column in _V4_COLUMNS:
        conn.execute(f"ALTER TABLE units ADD COLUMN {column} TEXT")


MIGRATIONS: list[str | Callable[[sqlite3.Connection], None]] = [
    _V1,
    _v2_result_columns,
    _v3_selection_columns,
    _v4_membership_columns,
]
SCHEMA_VERSION = len(MIGRATIONS)


def dumps(value: Any) -> str:
    """JSON text of a config, manifest or result (non-ASCII kept, unknown objects as ``str``)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def loads(text: str | None, default: Any = None) -> Any:
    """The value of a JSON column, or ``default`` when the column is NULL."""
    return default if text is None else json.loads(text)


def migrate(conn: sqlite3.Connection, path: Path, write_lock: threading.Lock) -> None:
    """Bring the store file behind ``conn`` to ``SCHEMA_VERSION`` (create it when empty).

    Args:
        conn: an open connection in autocommit mode (``isolation_level=None``).
        path: the file, named in error messages.
        write_lock: the store's in-process write lock, held while migrating.

    Raises:
        StoreError: a newer schema, a foreign SQLite file, missing tables or an unreadable file.
    """
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store {path} has schema version {version}, made by a newer memprobe "
                f"(this one knows up to {SCHEMA_VERSION}); upgrade memprobe or use another "
                "store file"
            )
        if version == SCHEMA_VERSION:
            _check_tables(conn, path)
            return
        _set_wal(conn)
        with write_lock:
            conn.execute("BEGIN IMMEDIATE")  # waits (busy timeout) for another process's migration
            try:
                # Re-read under the lock: another process may have migrated meanwhile, and only
                # now can a half-made file of another process be told from a foreign one.
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version == 0 and _has_foreign_tables(conn):
                    raise StoreError(
                        f"{path} is an SQLite file but not a memprobe store; use another store file"
                    )
                for step in range(version, SCHEMA_VERSION):
                    migration = MIGRATIONS[step]
                    if isinstance(migration, str):
                        for statement in migration.split(";"):
                            if statement.strip():
                                conn.execute(statement)
                    else:
                        migration(conn)
                    log.info("store %s migrated to schema %d", path, step + 1)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"{path} is not a usable memprobe store ({exc}); use another store file"
        ) from exc


def _set_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL (a property of the file, set outside a transaction).

    SQLite does not call the busy handler for this pragma while another process holds the file
    during its own first use, so retry for up to the busy timeout.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _has_foreign_tables(conn: sqlite3.Connection) -> bool:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return bool([r for r in rows if not r[0].startswith("sqlite_")])


def _check_tables(conn: sqlite3.Connection, path: Path) -> None:
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    missing = {"runs", "samples", "units", "candidates"} - names
    if missing:
        raise StoreError(
            f"store {path} lacks tables {sorted(missing)}; it is damaged — use another store file"
        )


# --- row conversion -------------------------------------------------------------------------------
RUN_LIST_SQL = (
    "SELECT r.*, COUNT(u.snippet_id) AS units_total, "
    "COALESCE(SUM(u.status = 'done'), 0) AS units_done, "
    "COALESCE(SUM(u.status = 'error'), 0) AS units_error, "
    "COALESCE(SUM(u.status = 'running'), 0) AS units_running, "
    "COALESCE(SUM(u.status = 'pending'), 0) AS units_pending "
    "FROM runs r LEFT JOIN units u ON u.run_id = r.id"
)


def key_params(unit: UnitKey) -> tuple[str, str, int]:
    """``(snippet_id, method, length)``: a unit's key as SQL parameters."""
    return (unit.snippet_id, unit.method, int(unit.length))


def run_dict(row: sqlite3.Row) -> RunRecord:
    """A ``runs`` row (with unit counts) as a record, config and manifest decoded."""
    data = dict(row)
    data["config"] = loads(data.get("config"), {})
    data["manifest"] = loads(data.get("manifest"), {})
    return cast(RunRecord, data)


def unit_dict(row: sqlite3.Row) -> UnitRecord:
    """A ``units`` row as a record with its ``UnitKey`` under ``key`` and JSON columns decoded."""
    data = dict(row)
    data["key"] = UnitKey(data["snippet_id"], data["method"], int(data["length"]))
    for column in JSON_RESULT_COLUMNS:
        data[column] = loads(data.get(column), {})
    return cast(UnitRecord, data)


def candidate_dict(row: sqlite3.Row) -> CandidateRecord:
    """A ``candidates`` row as a record (``idx`` renamed ``index``, JSON columns decoded)."""
    data = dict(row)
    data["index"] = data.pop("idx")
    data["flags"] = loads(data.get("flags"), [])
    data["extra"] = loads(data.get("extra"), {})
    data["is_round_best"] = bool(data["is_round_best"])
    return cast(CandidateRecord, data)


class StoreFile:
    """The SQLite file under a store: per-thread connections, one writer at a time, migration.

    Args:
        path: the SQLite file (``memprobe_core.paths.default_store_path()`` by default); its folder
            is created.

    Raises:
        StoreError: the file cannot be created or opened, or :func:`migrate` refuses it.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        if path is None:
            path = default_store_path()
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder of store {self.path}: {exc}; use another store file"
            ) from exc
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        migrate(self._conn(), self.path, self._write_lock)

    # --- connections ------------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                # isolation_level=None: we issue BEGIN ourselves, so transactions are explicit.
                conn = sqlite3.connect(
                    self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
                )
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA foreign_keys = ON")
            except sqlite3.Error as exc:
                raise StoreError(
                    f"cannot open store {self.path}: {exc}; check the path or use another store file"
                ) from exc
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def close(self) -> None:
        """Close every connection this store opened (in any thread)."""
        with self._connections_lock:
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:  # pragma: no cover - closing is best effort
                    pass
            self._connections.clear()
        self._local = threading.local()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: the thread lock, then SQLite's write lock (BEGIN IMMEDIATE)."""
        conn = self._conn()
        with self._write_lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
                yield conn
            except BaseException:
                # BaseException: a Ctrl-C in the middle of a write must not leave it half-done
                # (nor leave a transaction open on this connection for the next write).
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self._conn().execute(sql, params).fetchall()

    @property
    def schema_version(self) -> int:
        """The schema version of the open file."""
        return int(self._read("PRAGMA user_version")[0][0])


def result_columns(result: AttackResult) -> dict[str, Any]:
    """An ``AttackResult``'s values for the ``units`` result columns (the trace is not one)."""
    data = {
        "domain": result.domain,
        "prompt": result.prompt,
        "output": result.output,
        "mem": result.mem,
        "lcs_p": result.lcs_p,
        "objective": result.objective,
        "dis": result.dis,
        "alpha": result.alpha,
        "pii": result.pii,
        "costs": asdict(result.costs),
        "manifest": result.manifest,
        "mem_init": result.mem_init,
        "mem_best": result.mem_best,
        "mem_reference": result.mem_reference,
        "verbatim": result.verbatim,
        "membership": result.membership,
    }
    return {c: dumps(data[c]) if c in JSON_RESULT_COLUMNS else data[c] for c in RESULT_COLUMNS_SQL}


def candidate_from_row(row: CandidateRecord) -> Candidate:
    """A ``candidate_dict`` back as the ``Candidate`` the method scored."""
    values = cast(dict[str, Any], row)
    return Candidate(**{f.name: values[f.name] for f in fields(Candidate)})


def _score(unit: UnitRecord, column: str) -> float:
    """A score column of an ended unit, as stored. A row migrated from an old schema may hold
    ``None`` where its version did not store the value; it is passed on as it is (the report
    leaves such cells empty), not made up."""
    return cast(float, cast(dict[str, Any], unit)[column])


def result_from_row(unit: UnitRecord, trace: list[Candidate]) -> AttackResult:
    """A ``unit_dict`` of a finished or cancelled unit and its candidates as an ``AttackResult``."""
    return AttackResult(
        method=unit["method"],
        snippet_id=unit["snippet_id"],
        domain=unit["domain"] or "unknown",
        length=int(unit["length"]),
        prompt=unit["prompt"] or "",
        output=unit["output"] or "",
        mem=_score(unit, "mem"),
        lcs_p=_score(unit, "lcs_p"),
        objective=_score(unit, "objective"),
        alpha=_score(unit, "alpha"),
        dis=unit["dis"],
        trace=trace,
        pii=unit["pii"],
        costs=Costs(**unit["costs"]),
        manifest=unit["manifest"],
        status="cancelled" if unit["status"] == "cancelled" else "finished",
        mem_init=unit.get("mem_init"),
        mem_best=unit.get("mem_best"),
        mem_reference=unit.get("mem_reference"),
        verbatim=unit.get("verbatim") or {},
        membership=unit.get("membership") or {},
    )
