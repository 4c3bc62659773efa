"""The run store: one SQLite file that remembers every run, sample, scored candidate and result.

Layout (schema version in ``PRAGMA user_version``, upgraded by the ordered ``MIGRATIONS``):

- ``runs``: one row per probe, audit or comparison (kind, status, config and manifest as JSON).
- ``samples``: the snippets of a run (kept in full so a run resumes without its source file).
- ``units``: one row per (snippet, method, length) with its status, error, attempts, timings and
  the final ``AttackResult`` as JSON.
- ``candidates``: every scored candidate, written when it is scored, so a crash or a kill loses
  at most the candidate in flight.

Concurrency: SQLite in WAL mode, so readers never block the writer. Each thread gets its own
connection (sqlite3 connections must not be shared across threads). Writes take a process-wide
``threading.Lock`` and ``BEGIN IMMEDIATE`` (with a busy timeout for other processes), so there is
one writer at a time and a write transaction never has to be retried half-way.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from memprobe_core.attacks.result import (
    METHOD_LABELS,
    AttackEvent,
    AttackResult,
    Candidate,
    EventCallback,
)
from memprobe_core.data import Snippet

log = logging.getLogger("memprobe")

RUN_KINDS: tuple[str, ...] = ("probe", "audit", "compare")
RUN_STATUSES: tuple[str, ...] = ("running", "finished", "interrupted", "failed")
UNIT_STATUSES: tuple[str, ...] = ("pending", "running", "done", "error")

# How long a writer waits for another process's write lock before giving up (ms).
BUSY_TIMEOUT_MS = 30_000


class StoreError(RuntimeError):
    """The store file cannot be used; the message says which file and what to do."""


@dataclass(frozen=True, order=True)
class UnitKey:
    """Identifies one unit of work of a run: a snippet probed by one method at one length."""

    snippet_id: str
    method: str
    length: int

    def __str__(self) -> str:
        return f"{self.snippet_id}/{self.method}/{self.length}"


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

MIGRATIONS: list[str | Callable[[sqlite3.Connection], None]] = [_V1]
SCHEMA_VERSION = len(MIGRATIONS)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _loads(text: str | None, default: Any = None) -> Any:
    return default if text is None else json.loads(text)


class Store:
    """A run store on one SQLite file (created and migrated on open).

    Args:
        path: the SQLite file (``memprobe_core.paths.default_store_path()`` by default); its folder
            is created.

    Raises:
        StoreError: the file is not a memprobe store, cannot be created, or was made by a newer
            memprobe (schema version above ``SCHEMA_VERSION``).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        if path is None:
            from memprobe_core.paths import default_store_path

            path = default_store_path()
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder of store {self.path}: {exc}; pass another --store"
            ) from exc
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._migrate()

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
                    f"cannot open store {self.path}: {exc}; check the path or pass another --store"
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

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def _migrate(self) -> None:
        conn = self._conn()
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"store {self.path} has schema version {version}, made by a newer memprobe "
                    f"(this one knows up to {SCHEMA_VERSION}); upgrade memprobe or use another "
                    "--store"
                )
            if version == SCHEMA_VERSION:
                self._check_tables(conn)
                return
            if version == 0 and self._has_foreign_tables(conn):
                raise StoreError(
                    f"{self.path} is an SQLite file but not a memprobe store; pass another --store"
                )
            # WAL is a property of the file; set it once, outside a transaction.
            conn.execute("PRAGMA journal_mode = WAL")
            with self._write_lock:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    # Re-read under the lock: another process may have migrated meanwhile.
                    version = conn.execute("PRAGMA user_version").fetchone()[0]
                    for step in range(version, SCHEMA_VERSION):
                        migration = MIGRATIONS[step]
                        if isinstance(migration, str):
                            for statement in migration.split(";"):
                                if statement.strip():
                                    conn.execute(statement)
                        else:
                            migration(conn)
                        log.info("store %s migrated to schema %d", self.path, step + 1)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self.path} is not a usable memprobe store ({exc}); pass another --store"
            ) from exc

    @staticmethod
    def _has_foreign_tables(conn: sqlite3.Connection) -> bool:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return bool([r for r in rows if not r[0].startswith("sqlite_")])

    def _check_tables(self, conn: sqlite3.Connection) -> None:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        missing = {"runs", "samples", "units", "candidates"} - names
        if missing:
            raise StoreError(
                f"store {self.path} lacks tables {sorted(missing)}; it is damaged — pass another "
                "--store"
            )

    @property
    def schema_version(self) -> int:
        """The schema version of the open file."""
        return int(self._read("PRAGMA user_version")[0][0])

    # --- runs -------------------------------------------------------------------------------------
    def create_run(
        self,
        kind: str,
        *,
        config: dict[str, Any] | None = None,
        manifest: dict[str, Any] | None = None,
        title: str = "",
        status: str = "running",
    ) -> int:
        """Add a run and return its id.

        Args:
            kind: ``probe``, ``audit`` or ``compare``.
            config: everything needed to redo or resume the run (methods, lengths, options,
                model names); stored as JSON.
            manifest: what identifies the run's setting (model ids, versions, scoring variant).
            title: free label shown in run lists.
            status: initial status (``running`` by default).
        """
        if kind not in RUN_KINDS:
            raise ValueError(f"run kind {kind!r} is unknown; use one of {RUN_KINDS}")
        self._check_status(status, RUN_STATUSES, "run")
        now = time.time()
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO runs (kind, title, status, created, updated, config, manifest) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (kind, title, status, now, now, _dumps(config or {}), _dumps(manifest or {})),
            )
            return int(cursor.lastrowid)

    def set_run_status(self, run_id: int, status: str) -> None:
        """Set a run's status (``running``, ``finished``, ``interrupted``, ``failed``)."""
        self._check_status(status, RUN_STATUSES, "run")
        with self._write() as conn:
            self._touch(conn, run_id, status=status)

    def update_run(
        self,
        run_id: int,
        *,
        config: dict[str, Any] | None = None,
        manifest: dict[str, Any] | None = None,
        title: str | None = None,
    ) -> None:
        """Replace a run's config, manifest or title (only the ones given)."""
        with self._write() as conn:
            self._require_run(conn, run_id)
            if config is not None:
                conn.execute("UPDATE runs SET config = ? WHERE id = ?", (_dumps(config), run_id))
            if manifest is not None:
                conn.execute(
                    "UPDATE runs SET manifest = ? WHERE id = ?", (_dumps(manifest), run_id)
                )
            if title is not None:
                conn.execute("UPDATE runs SET title = ? WHERE id = ?", (title, run_id))
            self._touch(conn, run_id)

    def get_run(self, run_id: int) -> dict[str, Any]:
        """One run with its config, manifest and unit counts.

        Raises:
            KeyError: no run with that id (the message lists how to see the runs).
        """
        rows = self._read(_RUN_LIST_SQL + " WHERE r.id = ? GROUP BY r.id", (int(run_id),))
        if not rows:
            raise KeyError(f"run {run_id} is not in store {self.path}; `memprobe runs` lists them")
        return _run_dict(rows[0])

    def list_runs(self, *, kind: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Runs, newest first, each with unit counts (``units_total``, ``units_done``, ...)."""
        sql = _RUN_LIST_SQL
        params: list[Any] = []
        if kind is not None:
            sql += " WHERE r.kind = ?"
            params.append(kind)
        sql += " GROUP BY r.id ORDER BY r.id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_run_dict(row) for row in self._read(sql, params)]

    def delete_run(self, run_id: int) -> None:
        """Remove a run and everything recorded for it."""
        with self._write() as conn:
            for table in ("candidates", "units", "samples"):
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    # --- samples and units ------------------------------------------------------------------------
    def add_samples(self, run_id: int, snippets: Iterable[Snippet]) -> int:
        """Record the snippets of a run (in order); returns how many were added.

        Raises:
            ValueError: two snippets share an id (ids must be unique within a run).
        """
        with self._write() as conn:
            self._require_run(conn, run_id)
            start = conn.execute(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM samples WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            count = 0
            for offset, snippet in enumerate(snippets):
                try:
                    conn.execute(
                        "INSERT INTO samples (run_id, snippet_id, position, domain, text, source) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (run_id, snippet.id, start + offset, snippet.domain, snippet.text,
                         snippet.source),
                    )
                except sqlite3.IntegrityError as exc:
                    raise ValueError(
                        f"snippet id {snippet.id!r} appears twice in run {run_id}; give every "
                        "snippet a unique id"
                    ) from exc
                count += 1
            self._touch(conn, run_id)
            return count

    def samples(self, run_id: int) -> list[Snippet]:
        """The snippets of a run, in the order they were added."""
        rows = self._read(
            "SELECT snippet_id, domain, text, source FROM samples WHERE run_id = ? "
            "ORDER BY position",
            (run_id,),
        )
        return [Snippet(id=r[0], domain=r[1], text=r[2], source=r[3]) for r in rows]

    def add_units(self, run_id: int, units: Iterable[UnitKey]) -> int:
        """Add pending units (their order is the order the audit runs them); returns the count.

        A unit already present is left as it is, so adding twice is harmless.
        """
        with self._write() as conn:
            self._require_run(conn, run_id)
            start = conn.execute(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM units WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            added = 0
            for unit in units:
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO units (run_id, snippet_id, method, length, position) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (run_id, unit.snippet_id, unit.method, int(unit.length), start + added),
                )
                added += cursor.rowcount
            self._touch(conn, run_id)
            return added

    def units(self, run_id: int, *, status: str | None = None) -> list[dict[str, Any]]:
        """Units of a run in run order: key fields, status, error, attempts, timings, result."""
        sql = "SELECT * FROM units WHERE run_id = ?"
        params: list[Any] = [run_id]
        if status is not None:
            self._check_status(status, UNIT_STATUSES, "unit")
            sql += " AND status = ?"
            params.append(status)
        rows = self._read(sql + " ORDER BY position", params)
        return [_unit_dict(row) for row in rows]

    def unit_counts(self, run_id: int) -> dict[str, int]:
        """``{status: count}`` over the run's units (every status present, zero if none)."""
        counts = dict.fromkeys(UNIT_STATUSES, 0)
        for status, count in self._read(
            "SELECT status, COUNT(*) FROM units WHERE run_id = ? GROUP BY status", (run_id,)
        ):
            counts[status] = count
        return counts

    def mark_unit_running(self, run_id: int, unit: UnitKey) -> None:
        """Start (or restart) a unit: status ``running``, attempts + 1, partial candidates dropped.

        Dropping the candidates of an earlier, unfinished attempt means a resumed unit never
        counts a candidate twice.
        """
        with self._write() as conn:
            self._require_unit(conn, run_id, unit)
            conn.execute(
                "DELETE FROM candidates WHERE run_id = ? AND snippet_id = ? AND method = ? "
                "AND length = ?",
                (run_id, *_key(unit)),
            )
            conn.execute(
                "UPDATE units SET status = 'running', attempts = attempts + 1, started = ?, "
                "finished = NULL, seconds = NULL, error = NULL, result = NULL "
                "WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
                (time.time(), run_id, *_key(unit)),
            )
            self._touch(conn, run_id)

    def reset_unit(self, run_id: int, unit: UnitKey, *, if_status: str | None = None) -> None:
        """Put a unit back to ``pending`` and drop its candidates (an attempt that did not end).

        Args:
            if_status: only when the unit has this status (checked in the same transaction, so
                an interrupt that lands just after a unit was committed cannot undo it).
        """
        with self._write() as conn:
            if if_status is not None:
                row = conn.execute(
                    "SELECT status FROM units WHERE run_id = ? AND snippet_id = ? AND method = ? "
                    "AND length = ?",
                    (run_id, *_key(unit)),
                ).fetchone()
                if row is None or row[0] != if_status:
                    return
            conn.execute(
                "DELETE FROM candidates WHERE run_id = ? AND snippet_id = ? AND method = ? "
                "AND length = ?",
                (run_id, *_key(unit)),
            )
            conn.execute(
                "UPDATE units SET status = 'pending', started = NULL, error = NULL "
                "WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
                (run_id, *_key(unit)),
            )
            self._touch(conn, run_id)

    def record_candidate(self, run_id: int, unit: UnitKey, candidate: Candidate) -> None:
        """Write one scored candidate now (called as each one is scored)."""
        with self._write() as conn:
            self._insert_candidates(conn, run_id, unit, [candidate])
            self._touch(conn, run_id)  # `updated` doubles as a liveness sign in run lists

    def mark_round_best(self, run_id: int, unit: UnitKey, round_: int, index: int) -> None:
        """Flag the best candidate of a round (known only when the round ends)."""
        with self._write() as conn:
            conn.execute(
                "UPDATE candidates SET is_round_best = (idx = ?) WHERE run_id = ? AND "
                "snippet_id = ? AND method = ? AND length = ? AND round = ?",
                (index, run_id, *_key(unit), round_),
            )

    def finish_unit(self, run_id: int, unit: UnitKey, result: AttackResult) -> None:
        """Store a unit's final result; its trace replaces the candidates written so far.

        The trace is the method's complete, authoritative list (with round-best flags), so the
        live rows are swapped for it in the same transaction (unless the trace is empty).
        """
        now = time.time()
        with self._write() as conn:
            self._require_unit(conn, run_id, unit)
            if result.trace:  # a result without a trace keeps the candidates recorded live
                conn.execute(
                    "DELETE FROM candidates WHERE run_id = ? AND snippet_id = ? AND method = ? "
                    "AND length = ?",
                    (run_id, *_key(unit)),
                )
                self._insert_candidates(conn, run_id, unit, result.trace)
            conn.execute(
                "UPDATE units SET status = 'done', result = ?, error = NULL, finished = ?, "
                "seconds = ? - COALESCE(started, ?) "
                "WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
                (_dumps(result.to_dict()), now, now, now, run_id, *_key(unit)),
            )
            self._touch(conn, run_id)

    def fail_unit(self, run_id: int, unit: UnitKey, error: str) -> None:
        """Record that a unit failed, with an error text a user can act on."""
        now = time.time()
        with self._write() as conn:
            self._require_unit(conn, run_id, unit)
            conn.execute(
                "UPDATE units SET status = 'error', error = ?, finished = ?, "
                "seconds = ? - COALESCE(started, ?) "
                "WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
                (error, now, now, now, run_id, *_key(unit)),
            )
            self._touch(conn, run_id)

    def result(self, run_id: int, unit: UnitKey) -> AttackResult | None:
        """The stored result of a finished unit, or ``None``."""
        rows = self._read(
            "SELECT result FROM units WHERE run_id = ? AND snippet_id = ? AND method = ? "
            "AND length = ?",
            (run_id, *_key(unit)),
        )
        if not rows or rows[0][0] is None:
            return None
        return AttackResult.from_dict(json.loads(rows[0][0]))

    def candidates(
        self, run_id: int, unit: UnitKey | None = None, *, since_id: int = 0
    ) -> list[dict[str, Any]]:
        """Candidates of a run (or of one unit), in scoring order.

        Args:
            since_id: only candidates with a row id above this (a live view polls with the last
                id it has seen).
        """
        sql = "SELECT * FROM candidates WHERE run_id = ? AND id > ?"
        params: list[Any] = [run_id, since_id]
        if unit is not None:
            sql += " AND snippet_id = ? AND method = ? AND length = ?"
            params.extend(_key(unit))
        return [_candidate_dict(r) for r in self._read(sql + " ORDER BY id", params)]

    def recorder(self, run_id: int, unit: UnitKey) -> EventCallback:
        """An event callback that writes each ``candidate_scored`` event into the store.

        ``round_finished`` events flag the round's best candidate. Other events are ignored, so
        the callback can be chained with a UI's own.
        """

        def on_event(event: AttackEvent) -> None:
            if event.kind == "candidate_scored":
                candidate = event.data.get("candidate")
                if isinstance(candidate, Candidate):
                    self.record_candidate(run_id, unit, candidate)
            elif event.kind == "round_finished":
                best = event.data.get("best")
                if isinstance(best, Candidate):
                    self.mark_round_best(run_id, unit, best.round, best.index)

        return on_event

    # --- frames -----------------------------------------------------------------------------------
    def results_frame(self, run_id: int) -> pd.DataFrame:
        """One row per finished unit: scores, costs, PII counts and manifest columns.

        Columns: run_id, snippet_id, domain, method, method_label, length, mem, lcs_p, dis,
        objective, alpha, status, prompt, output, victim_queries, attacker_queries,
        generated_tokens, seconds, pii_truth, pii_copied, pii_invented, and the manifest columns
        victim, base, attacker, init, reverse, rouge_variant, rouge_stemmer, rouge_tokenizer,
        output_window, seed.
        """
        run = self.get_run(run_id)
        rows = []
        for unit in self.units(run_id, status="done"):
            result = unit["result"]
            if result is None:
                continue
            rows.append(result_row(run_id, result, run["config"]))
        frame = pd.DataFrame(rows, columns=RESULT_COLUMNS)
        return frame

    def errors_frame(self, run_id: int) -> pd.DataFrame:
        """One row per failed unit: snippet_id, method, length, attempts, error."""
        rows = [
            {k: u[k] for k in ("snippet_id", "method", "length", "attempts", "error")}
            for u in self.units(run_id, status="error")
        ]
        return pd.DataFrame(rows, columns=["snippet_id", "method", "length", "attempts", "error"])

    def candidates_frame(self, run_id: int, unit: UnitKey | None = None) -> pd.DataFrame:
        """Every stored candidate of a run (or one unit) as a DataFrame, in scoring order."""
        rows = self.candidates(run_id, unit)
        columns = ["id", "run_id", "snippet_id", "method", "length", "round", "index", "prompt",
                   "output", "mem", "lcs_p", "objective", "flags", "is_round_best", "created"]
        frame = pd.DataFrame(rows, columns=columns)
        frame["flags"] = frame["flags"].map(lambda f: ",".join(f) if isinstance(f, list) else f)
        return frame

    # --- helpers ----------------------------------------------------------------------------------
    def _insert_candidates(
        self, conn: sqlite3.Connection, run_id: int, unit: UnitKey, candidates: Iterable[Candidate]
    ) -> None:
        now = time.time()
        conn.executemany(
            "INSERT INTO candidates (run_id, snippet_id, method, length, round, idx, prompt, "
            "output, mem, lcs_p, objective, flags, is_round_best, extra, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (run_id, *_key(unit), c.round, c.index, c.prompt, c.output, c.mem, c.lcs_p,
                 c.objective, _dumps(list(c.flags)), int(c.is_round_best), _dumps(c.extra), now)
                for c in candidates
            ],
        )

    def _touch(self, conn: sqlite3.Connection, run_id: int, status: str | None = None) -> None:
        if status is None:
            conn.execute("UPDATE runs SET updated = ? WHERE id = ?", (time.time(), run_id))
        else:
            cursor = conn.execute(
                "UPDATE runs SET updated = ?, status = ? WHERE id = ?", (time.time(), status, run_id)
            )
            if cursor.rowcount == 0:
                raise KeyError(f"run {run_id} is not in store {self.path}")

    def _require_run(self, conn: sqlite3.Connection, run_id: int) -> None:
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise KeyError(f"run {run_id} is not in store {self.path}; `memprobe runs` lists them")

    def _require_unit(self, conn: sqlite3.Connection, run_id: int, unit: UnitKey) -> None:
        row = conn.execute(
            "SELECT 1 FROM units WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
            (run_id, *_key(unit)),
        ).fetchone()
        if row is None:
            raise KeyError(f"unit {unit} is not part of run {run_id}; add it with add_units first")

    @staticmethod
    def _check_status(status: str, allowed: tuple[str, ...], what: str) -> None:
        if status not in allowed:
            raise ValueError(f"{what} status {status!r} is unknown; use one of {allowed}")


# --- row conversion -------------------------------------------------------------------------------
_RUN_LIST_SQL = (
    "SELECT r.*, COUNT(u.snippet_id) AS units_total, "
    "COALESCE(SUM(u.status = 'done'), 0) AS units_done, "
    "COALESCE(SUM(u.status = 'error'), 0) AS units_error, "
    "COALESCE(SUM(u.status = 'running'), 0) AS units_running, "
    "COALESCE(SUM(u.status = 'pending'), 0) AS units_pending "
    "FROM runs r LEFT JOIN units u ON u.run_id = r.id"
)

RESULT_COLUMNS: list[str] = [
    "run_id", "snippet_id", "domain", "method", "method_label", "length", "mem", "lcs_p", "dis",
    "objective", "alpha", "status", "prompt", "output", "victim_queries", "attacker_queries",
    "generated_tokens", "seconds", "pii_truth", "pii_copied", "pii_invented", "victim", "base",
    "attacker", "init", "reverse", "rouge_variant", "rouge_stemmer", "rouge_tokenizer",
    "output_window", "seed",
]


def _key(unit: UnitKey) -> tuple[str, str, int]:
    return (unit.snippet_id, unit.method, int(unit.length))


def _run_dict(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    data["config"] = _loads(data.get("config"), {})
    data["manifest"] = _loads(data.get("manifest"), {})
    return data


def _unit_dict(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    data["key"] = UnitKey(data["snippet_id"], data["method"], int(data["length"]))
    data["result"] = _loads(data.get("result"))
    return data


def _candidate_dict(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    data["index"] = data.pop("idx")
    data["flags"] = _loads(data.get("flags"), [])
    data["extra"] = _loads(data.get("extra"), {})
    data["is_round_best"] = bool(data["is_round_best"])
    return data


def _model_name(manifest: dict[str, Any], config: dict[str, Any], role: str) -> str | None:
    """A model's id for a role: the result manifest first, then the run config's model names."""
    models = manifest.get("models")
    if isinstance(models, dict):
        # The result says which models it used; a role it left empty was not used.
        entry = models.get(role)
        if isinstance(entry, dict):
            return str(entry.get("model_id")) if entry.get("model_id") else None
        return str(entry) if entry else None
    named = (config.get("models") or {}).get(role)
    return str(named) if named else None


def pii_counts(pii: dict[str, Any]) -> tuple[int, int, int]:
    """``(in truth, copied, invented)`` item counts from an ``AttackResult.pii`` dict.

    Accepts counts or lists under ``truth``/``copied``/``invented`` (also ``in_truth``,
    ``suffix``), or a ``totals`` sub-dict, so the count survives small changes of the PII
    report's shape.
    """
    source = pii.get("totals") if isinstance(pii.get("totals"), dict) else pii

    def count(*names: str) -> int:
        for name in names:
            if name in source:
                value = source[name]
                if isinstance(value, (list, tuple, set)):
                    return len(value)
                if isinstance(value, dict):
                    return sum(len(v) if isinstance(v, (list, tuple)) else int(v)
                               for v in value.values())
                if value is None:
                    return 0
                return int(value)
        return 0

    return (count("truth", "in_truth", "suffix", "n_truth"), count("copied", "n_copied"),
            count("invented", "n_invented"))


def result_row(run_id: int, result: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Flatten one stored ``AttackResult`` dict into a results-frame row."""
    costs = result.get("costs") or {}
    manifest = result.get("manifest") or {}
    scoring = manifest.get("scoring") or (config.get("options") or {}).get("scoring") or {}
    truth, copied, invented = pii_counts(result.get("pii") or {})
    seed = manifest.get("seed", (config.get("options") or {}).get("seed"))
    return {
        "run_id": run_id,
        "snippet_id": result["snippet_id"],
        "domain": result.get("domain", "unknown"),
        "method": result["method"],
        "method_label": METHOD_LABELS.get(result["method"], result["method"]),
        "length": int(result["length"]),
        "mem": result.get("mem"),
        "lcs_p": result.get("lcs_p"),
        "dis": result.get("dis"),
        "objective": result.get("objective"),
        "alpha": result.get("alpha"),
        "status": result.get("status", "finished"),
        "prompt": result.get("prompt", ""),
        "output": result.get("output", ""),
        "victim_queries": costs.get("victim_queries", 0),
        "attacker_queries": costs.get("attacker_queries", 0),
        "generated_tokens": costs.get("generated_tokens", 0),
        "seconds": costs.get("wall_seconds", 0.0),
        "pii_truth": truth,
        "pii_copied": copied,
        "pii_invented": invented,
        **{role: _model_name(manifest, config, role)
           for role in ("victim", "base", "attacker", "init", "reverse")},
        "rouge_variant": scoring.get("variant"),
        "rouge_stemmer": scoring.get("stemmer"),
        "rouge_tokenizer": scoring.get("tokenizer"),
        "output_window": scoring.get("output_window"),
        "seed": seed,
    }
