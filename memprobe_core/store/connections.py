"""The store's SQLite file: per-thread connections, one writer at a time, one name, its own -wal.

:class:`StoreFile` (the base of ``memprobe_core.store.Store``) holds one connection per thread and
one writer at a time, and opens the file through :func:`memprobe_core.store.schema.migrate`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

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
from memprobe_core.store.schema import BUSY_TIMEOUT_MS, StoreError, migrate
from memprobe_core.user_paths import message, store_problem


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
            read and were quarantined, see :func:`~memprobe_core.store.schema.migrate`); also
            logged as warnings.

    Raises:
        StoreError: the path is not a regular file (a symlink loop, a folder, a pipe, a device, a
            /proc file: :func:`memprobe_core.user_paths.store_problem`), the file cannot be
            created or opened, has more than one name, or
            :func:`~memprobe_core.store.schema.migrate` refuses it.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        if path is None:
            path = default_store_path()
        self.path = Path(path).expanduser()
        # A symlink loop, folder, pipe, device or /proc file is refused (docs/security.md).
        problem = store_problem(self.path)
        if problem:
            raise StoreError(message("store", self.path, problem))
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
