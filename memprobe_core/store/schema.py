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
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any, cast

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.errors import MemprobeError
from memprobe_core.paths import default_store_path
from memprobe_core.store.files import (
    FileIds,
    Split,
    file_ids,
    links_message,
    split_message,
    split_of,
    untouched,
)
from memprobe_core.store.frames import result_row
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
    """Version 2: the result JSON of each unit becomes columns; the JSON column is dropped.

    A result that cannot be read (not UTF-8, not JSON, not an object, keys missing or of the
    wrong type, or one the reader would fail on), or a finished unit without one, is kept as it
    was in table ``quarantine`` with the reason (:func:`quarantine`); its unit gets no result
    columns, and a finished or cancelled one becomes a failed unit saying so. The other rows are
    upgraded as before.
    """
    # Version 2's columns only: a released migration must keep doing what it did.
    later = _V3_COLUMNS + _V4_COLUMNS
    columns = {c: t for c, t in RESULT_COLUMNS_SQL.items() if c not in later}
    for column, sql_type in columns.items():
        conn.execute(f"ALTER TABLE units ADD COLUMN {column} {sql_type}")
    rows = conn.execute(
        "SELECT rowid, run_id, snippet_id, method, length, status, error, typeof(result), "
        "CAST(result AS BLOB) FROM units "
        "WHERE result IS NOT NULL OR status IN ('done', 'cancelled')"
    ).fetchall()
    sets = ", ".join(f"{c} = ?" for c in columns)
    for rowid, run_id, snippet_id, method, length, status, error, kind, raw in rows:
        key = {"run_id": run_id, "snippet_id": snippet_id, "method": method, "length": length}
        try:
            values = _v1_result_columns(raw, key, status, columns)
        except ValueError as unreadable:
            entry = quarantine(
                conn,
                key,
                status=status,
                error=error,
                result=_stored_value(kind, raw),
                reason=str(unreadable),
                schema_version=1,
            )
            if status in ("done", "cancelled"):
                conn.execute(
                    "UPDATE units SET status = 'error', error = ? WHERE rowid = ?",
                    (
                        f"its result, stored by schema 1, could not be read when the store was "
                        f"upgraded ({unreadable}); the original is kept in table quarantine "
                        f"(id {entry}); `memprobe resume {run_id} --retry-errors` measures an "
                        "audit's unit again",
                        rowid,
                    ),
                )
            continue
        conn.execute(f"UPDATE units SET {sets} WHERE rowid = ?", (*values, rowid))
    conn.execute("ALTER TABLE units DROP COLUMN result")


# Keys every schema-1 result has (``AttackResult.to_dict`` of a finished or cancelled unit), by
# the JSON types they may hold; ``dis`` and the JSON parts may be null.
_V1_TEXT_KEYS = ("domain", "prompt", "output")
_V1_NUMBER_KEYS = ("mem", "lcs_p", "objective", "alpha")
_V1_OBJECT_KEYS = ("pii", "costs", "manifest")


def _v1_result_columns(
    raw: bytes | None, key: dict[str, Any], status: str, columns: dict[str, str]
) -> list[Any]:
    """The version-2 column values of a schema-1 result (``raw``: the stored bytes).

    Raises:
        ValueError: the result cannot be read; the message says why.
    """
    if raw is None:
        raise ValueError(f"a {status} unit without a stored result")
    try:
        result = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc
    if not isinstance(result, dict):
        raise ValueError(f"{_json_type(result)} instead of a JSON object")
    missing = [k for k in (*_V1_TEXT_KEYS, *_V1_NUMBER_KEYS) if k not in result]
    if missing:
        raise ValueError(f"keys missing: {', '.join(missing)}")
    wrong = [
        f"{k} is {_json_type(result[k])}" for k in _V1_TEXT_KEYS if not isinstance(result[k], str)
    ]
    wrong += [
        f"{k} is {_json_type(result[k])}" for k in _V1_NUMBER_KEYS if not _is_number(result[k])
    ]
    if result.get("dis") is not None and not _is_number(result["dis"]):
        wrong.append(f"dis is {_json_type(result['dis'])}")
    wrong += [
        f"{k} is {_json_type(result[k])}"
        for k in _V1_OBJECT_KEYS
        if result.get(k) is not None and not isinstance(result[k], dict)
    ]
    if wrong:
        raise ValueError(f"wrong types: {'; '.join(wrong)}")
    values = {
        c: dumps(result.get(c) or {}) if c in JSON_RESULT_COLUMNS else result.get(c)
        for c in columns
    }
    # What the store will read back (a result, a report row) must be readable too.
    record = cast(
        UnitRecord,
        {
            **key,
            "status": status,
            **{c: loads(v, {}) if c in JSON_RESULT_COLUMNS else v for c, v in values.items()},
        },
    )
    try:
        result_from_row(record, [])
        result_row(int(key["run_id"]), record, {})
    except Exception as exc:  # any failure of the readers: the row is what cannot be read
        raise ValueError(f"cannot be read back: {type(exc).__name__}: {exc}") from exc
    return list(values.values())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _stored_value(kind: str, raw: bytes | None) -> str | bytes | None:
    """A column's value as it was stored: its text, or its bytes when they are not UTF-8."""
    if raw is None or kind == "blob":
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


# --- quarantine: rows an upgrade could not read, kept as they were --------------------------------
_QUARANTINE_SQL = """
CREATE TABLE IF NOT EXISTS quarantine (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    run_id INTEGER,
    snippet_id TEXT,
    method TEXT,
    length INTEGER,
    status TEXT,
    error TEXT,
    result BLOB,
    reason TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    created REAL NOT NULL
)
"""


def quarantine(
    conn: sqlite3.Connection,
    key: dict[str, Any],
    *,
    status: str,
    error: str | None,
    result: str | bytes | None,
    reason: str,
    schema_version: int,
) -> int:
    """Keep a unit row that an upgrade cannot read in table ``quarantine``; returns its id.

    Kept: the unit's key, its ``status``, ``error`` and ``result`` exactly as they were stored,
    why it cannot be read and the schema version that wrote it. Nothing is deleted:
    ``SELECT * FROM quarantine`` shows them; :func:`migrate` reports each one.
    """
    conn.execute(_QUARANTINE_SQL)
    cursor = conn.execute(
        "INSERT INTO quarantine (source, run_id, snippet_id, method, length, status, error, "
        "result, reason, schema_version, created) VALUES ('units', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            key["run_id"],
            key["snippet_id"],
            key["method"],
            key["length"],
            status,
            error,
            result,
            reason,
            schema_version,
            time.time(),
        ),
    )
    return int(cursor.lastrowid or 0)


def _last_quarantined(conn: sqlite3.Connection) -> int:
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'quarantine'").fetchone() is None:
        return 0
    return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM quarantine").fetchone()[0])


def _quarantine_notices(conn: sqlite3.Connection, path: Path, after: int) -> list[str]:
    """One message per row quarantined (id above ``after``): the store, the row, why, what now."""
    if _last_quarantined(conn) <= after:
        return []
    notices = []
    for row in conn.execute(
        "SELECT q.id, q.run_id, q.snippet_id, q.method, q.length, q.status, q.reason, "
        "q.schema_version, u.status FROM quarantine q LEFT JOIN units u ON u.run_id = q.run_id "
        "AND u.snippet_id = q.snippet_id AND u.method = q.method AND u.length = q.length "
        "WHERE q.id > ? ORDER BY q.id",
        (after,),
    ):
        qid, run_id, snippet_id, method, length, was, reason, version, now = row
        after_text = (
            f"the unit is now a failed unit (`memprobe resume {run_id} --retry-errors` "
            "measures an audit's unit again)"
            if was != now
            else f"the unit stays {now}"
        )
        notices.append(
            f"store {path}: the result of unit (run {run_id}, snippet {snippet_id!r}, "
            f"{method}, length {length}), stored by schema {version}, cannot be read "
            f"({reason}); it is kept as it was in table quarantine (id {qid}) and the rest of "
            f"the store was upgraded; {after_text}"
        )
    return notices


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


def migrate(conn: sqlite3.Connection, path: Path, write_lock: threading.Lock) -> list[str]:
    """Bring the store file behind ``conn`` to ``SCHEMA_VERSION`` (create it when empty).

    Rows an upgrade cannot read are quarantined, never lost (see ``_v2_result_columns``): the
    rest of the file is upgraded, and each one is logged as a warning and returned.

    Args:
        conn: an open connection in autocommit mode (``isolation_level=None``).
        path: the file, named in error messages.
        write_lock: the store's in-process write lock, held while migrating.

    Returns:
        One notice per row this upgrade quarantined (which store, which row, why, what now).

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
            return []
        _set_wal(conn)
        with write_lock:
            conn.execute("BEGIN IMMEDIATE")  # waits (busy timeout) for another process's migration
            try:
                # Re-read under the lock: another process may have migrated meanwhile, and only
                # now can a half-made file of another process be told from a foreign one.
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                quarantined = _last_quarantined(conn)
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
        notices = _quarantine_notices(conn, path, quarantined)
        for notice in notices:
            log.warning("%s", notice)
        return notices
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

    The file must have one name: a store whose file has hard links is refused, and writing stops
    (``StoreError``) once the file gains a second name or its ``-wal`` / ``-shm`` are deleted
    while it is open (:mod:`memprobe_core.store.files`).

    Args:
        path: the SQLite file (``memprobe_core.paths.default_store_path()`` by default); its folder
            is created.

    Attributes:
        notices: what opening the file had to tell (rows of an old schema that could not be
            read and were quarantined, see :func:`migrate`); also logged as warnings.

    Raises:
        StoreError: the file cannot be created or opened, has more than one name, or
            :func:`migrate` refuses it.
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
        # What SQLite opens: the real file behind any symbolic link, so the -wal and -shm are
        # the real file's whatever the SQLite version (3.40 resolves links itself).
        self._file = Path(os.path.realpath(self.path))
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        # The files the open connections use (recorded once they are attached) and, once those
        # stopped being the files at the path, how: then every write is refused.
        self._ids: FileIds | None = None
        self._split: Split | None = None
        self._saved: str | None = None
        self._attached = False  # whether a new connection reads at once (after migrating)
        links = file_ids(self._file).links
        if links > 1:
            raise StoreError(links_message(self.path, links))
        self.notices: list[str] = migrate(self._conn(), self.path, self._write_lock)
        self._ids = file_ids(self._file)
        self._attached = True

    # --- connections ------------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self._refuse_new_connection()
            try:
                # isolation_level=None: we issue BEGIN ourselves, so transactions are explicit.
                conn = sqlite3.connect(
                    self._file, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
                )
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA foreign_keys = ON")
                if self._attached:
                    # A first read opens the -wal and -shm now, so the check below sees the ones
                    # this connection uses (on a new file, migrate's reads do it).
                    conn.execute("PRAGMA user_version").fetchone()
            except sqlite3.Error as exc:
                raise StoreError(
                    f"cannot open store {self.path}: {exc}; check the path or use another store file"
                ) from exc
            if self._attached and self._ids is None:  # reopened after close(): the files now
                self._ids = file_ids(self._file)
            try:
                self._refuse_new_connection()
            except StoreError:
                conn.close()
                raise
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
        if self._attached:
            self._ids = None  # the next connection records the files it finds then

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: the thread lock, then SQLite's write lock (BEGIN IMMEDIATE).

        The store's files are checked once the lock is held and again after the commit
        (:meth:`_check_files`), so no write is reported done while it sits in a deleted -wal or
        behind a second name of the file.
        """
        conn = self._conn()
        with self._write_lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
                self._check_files(conn)
                yield conn
            except BaseException:
                # BaseException: a Ctrl-C in the middle of a write must not leave it half-done
                # (nor leave a transaction open on this connection for the next write).
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
                self._check_files(conn)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self._conn().execute(sql, params).fetchall()

    @property
    def schema_version(self) -> int:
        """The schema version of the open file."""
        return int(self._read("PRAGMA user_version")[0][0])

    # --- one file, one name, its own -wal (memprobe_core.store.files) -----------------------------
    def _find_split(self) -> Split | None:
        """How the files at the path stopped being those the connections use, if they did."""
        if self._split is None and self._ids is not None:
            now = file_ids(self._file)
            if self._ids.wal is None or self._ids.shm is None:  # read-only when recorded
                self._ids = replace(
                    self._ids, wal=self._ids.wal or now.wal, shm=self._ids.shm or now.shm
                )
            self._split = split_of(self._ids, now)
            if self._split is None:
                self._ids = replace(self._ids, stamp=now.stamp, wal_stamp=now.wal_stamp)
        return self._split

    def _refuse_new_connection(self) -> None:
        """A new connection would open the -wal at the path while this process's others use the
        one they opened (they share one -shm in a process): refuse once those differ."""
        split = self._find_split()
        if split is not None:
            raise StoreError(split_message(self.path, split, self._saved or _NOT_SAVED_YET))

    def _check_files(self, conn: sqlite3.Connection) -> None:
        """Refuse (``StoreError``) to write once the files at the path are not those ``conn``
        writes to, saving first what was committed where others cannot see it.

        Raises:
            StoreError: what happened, what was saved and what to do.
        """
        split = self._find_split()
        if split is None:
            return
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if self._saved is None:
            self._saved = self._save_split(conn, split)
        raise StoreError(split_message(self.path, split, self._saved))

    def _save_split(self, conn: sqlite3.Connection, split: Split) -> str:
        """Keep what ``conn``'s process committed when the store split; says where it is."""
        if split.kind == "link":
            return f"every write memprobe committed is kept in the store opened as {self.path}"
        if split.kind == "moved":
            return (
                "what memprobe committed went to the file it had open, which is no longer at "
                "that path"
            )
        # The -wal was deleted: the committed writes are only in the deleted file, still open
        # here. Copy them into the store file (a checkpoint through the open files) unless
        # another program has written to the store since: then copying pages over its writes
        # would mix two versions, so this process's view is saved as a file of its own.
        assert self._ids is not None  # a split is found only against recorded files
        if not untouched(self._ids, file_ids(self._file)):
            why = "another program has written to the store since"
        else:
            try:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                failure = "SQLite was busy"
            except sqlite3.Error as exc:
                busy, failure = 1, str(exc)
            if busy == 0:
                return f"memprobe copied every write it committed into {self.path} itself"
            why = f"copying them into the store file failed ({failure})"
        rescue = self._file.with_name(
            f"{self._file.name}.rescued-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.sqlite"
        )
        try:
            target = sqlite3.connect(rescue)
            try:
                conn.backup(target)
            finally:
                target.close()
        except (sqlite3.Error, OSError) as exc:
            return (
                f"{why}, and saving the store as memprobe sees it as {rescue} failed ({exc}): "
                "what it committed since the deletion is lost when this process ends"
            )
        return (
            f"{why}, so memprobe saved the store as it sees it, every write it committed "
            f"included, as {rescue}"
        )


_NOT_SAVED_YET = "what this process committed since is saved when it next tries to write"


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
