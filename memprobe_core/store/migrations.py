"""The ordered migrations of the store file and the schema version they lead to.

``MIGRATIONS[i]`` takes version ``i`` to ``i + 1`` (version 1 creates the tables); the version a
file has is kept in ``PRAGMA user_version`` and :func:`memprobe_core.store.schema.migrate` runs
the steps a file lacks. ``SCHEMA_VERSION`` is the version this memprobe writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from memprobe_core.store.columns import V3_COLUMNS, V4_COLUMNS
from memprobe_core.store.upgrade_v2 import v2_result_columns

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


def _v3_selection_columns(conn: sqlite3.Connection) -> None:
    """Version 3: the Mem of each selection rule (initial prompt, best in trace, reference's).

    Older results get NULL; ``mem_best`` is filled from their stored candidates (non-empty ones),
    the others need the round structure a report cannot assume for every method.
    """
    for column in V3_COLUMNS:
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
    for column in V4_COLUMNS:
        conn.execute(f"ALTER TABLE units ADD COLUMN {column} TEXT")


MIGRATIONS: list[str | Callable[[sqlite3.Connection], None]] = [
    _V1,
    v2_result_columns,
    _v3_selection_columns,
    _v4_membership_columns,
]
SCHEMA_VERSION = len(MIGRATIONS)
