"""Opening a store file at the current schema version: :func:`migrate`, and what it refuses.

:func:`migrate` creates the tables of a new file, upgrades an older one step by step (the
:data:`~memprobe_core.store.migrations.MIGRATIONS`, the version kept in ``PRAGMA user_version``)
and refuses files it cannot use with a :class:`StoreError` that says what to do. Also here: how
long a writer waits for another process's lock (``BUSY_TIMEOUT_MS``), used by the migration and
by every connection (:mod:`.connections`).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

from memprobe_core.errors import MemprobeError
from memprobe_core.store.migrations import MIGRATIONS, SCHEMA_VERSION
from memprobe_core.store.quarantine import last_quarantined, quarantine_notices

log = logging.getLogger(__name__)


# How long a writer waits for another process's write lock before giving up (ms).
BUSY_TIMEOUT_MS = 30_000


class StoreError(MemprobeError, RuntimeError):
    """The store file cannot be used; the message says which file and what to do."""


def migrate(conn: sqlite3.Connection, path: Path, write_lock: threading.Lock) -> list[str]:
    """Bring the store file behind ``conn`` to ``SCHEMA_VERSION`` (create it when empty).

    Rows an upgrade cannot read are quarantined, never lost (see :mod:`.upgrade_v2`): the
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
                quarantined = last_quarantined(conn)
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
        notices = quarantine_notices(conn, path, quarantined)
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
