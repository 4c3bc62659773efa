"""Table ``quarantine``: unit rows an upgrade could not read, kept exactly as they were.

An upgrade (:mod:`.upgrade_v2`) puts such a row here with the reason (:func:`quarantine`);
:func:`memprobe_core.store.schema.migrate` reports the rows each upgrade added
(:func:`quarantine_notices`).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

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
    ``SELECT * FROM quarantine`` shows them; :func:`memprobe_core.store.schema.migrate` reports
    each one.
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


def last_quarantined(conn: sqlite3.Connection) -> int:
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'quarantine'").fetchone() is None:
        return 0
    return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM quarantine").fetchone()[0])


def quarantine_notices(conn: sqlite3.Connection, path: Path, after: int) -> list[str]:
    """One message per row quarantined (id above ``after``): the store, the row, why, what now."""
    if last_quarantined(conn) <= after:
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
