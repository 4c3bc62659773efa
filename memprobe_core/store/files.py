"""Which file a store is, and whether it is still the one its connections write to.

SQLite keeps a store's latest writes in ``FILE-wal`` and the lock table of its writers in
``FILE-shm``, found by *name* beside the name a program opened. Two ways to lose runs follow,
and :class:`memprobe_core.store.connections.StoreFile` refuses both with a ``StoreError``:

- **One file, two names.** A hard link gives the file a second name; a program opening it
  through that name gets its own ``-wal`` and ``-shm``, so two writers each believe they hold the
  write lock, both hand out run id 1, and whichever ``-wal`` is replayed last wins (``PRAGMA
  integrity_check`` still says ok). A store whose file has more than one name (``st_nlink > 1``)
  is refused when it is opened and before and after every write (a link made while an audit
  runs). A symbolic link is no second name: SQLite resolves it (and the store opens
  ``os.path.realpath`` of its path, whatever the SQLite version), so its ``-wal`` is the real
  file's.
- **The ``-wal`` / ``-shm`` deleted** (a cleanup job) while a store is open. The open connections
  keep writing into the deleted files, which no other program can see and which are gone when
  the process ends. :func:`file_ids` records the ``(st_dev, st_ino)`` of the store file and of
  its ``-wal`` and ``-shm`` when the store opens; a write finds them changed before it starts and
  after it commits. It then saves what this process committed — copied into the store file
  through the still-open files (a checkpoint), or, when another program has written to the
  store since (:func:`untouched`), as ``FILE.rescued-….sqlite`` beside it — and refuses this
  and every later write, saying which. No write is reported saved while it sits in a deleted
  file, and none is lost: refusing alone would leave the committed ones in the deleted file.

Limits: a bind mount gives a file a second path without a second link (``st_nlink`` stays 1);
it is not detected. Between two writes nothing is watched: files deleted while a process is idle
are found at its next write (or never, if it writes no more).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

FileId = tuple[int, int]  # (st_dev, st_ino)

# The header SQLite writes at the start of a -wal before its first frame: a -wal no longer than
# this holds no write.
WAL_HEADER_BYTES = 32


@dataclass(frozen=True)
class FileIds:
    """``(st_dev, st_ino)`` of a store file and its ``-wal`` and ``-shm`` (``None``: absent),
    and how many names (hard links) the store file has."""

    db: FileId | None
    wal: FileId | None
    shm: FileId | None
    links: int
    # (st_size, st_mtime_ns) of the store file and of the -wal: what a write changes.
    stamp: tuple[int, int] | None
    wal_stamp: tuple[int, int] | None


def file_ids(file: Path) -> FileIds:
    """The identity of ``file`` and of its ``-wal`` and ``-shm`` now (three ``stat`` calls:
    a few microseconds, done twice per write)."""
    name = os.fspath(file)
    db, wal, shm = _stat(name), _stat(name + "-wal"), _stat(name + "-shm")
    return FileIds(
        db=_id(db),
        wal=_id(wal),
        shm=_id(shm),
        links=db.st_nlink if db is not None else 0,
        stamp=_stamp(db),
        wal_stamp=_stamp(wal),
    )


def untouched(recorded: FileIds, now: FileIds) -> bool:
    """Whether no program has written to the store since ``recorded`` (by its -wal at the path
    or into the store file): only then may a process copy a deleted -wal's pages into it.

    A fresh -wal made by a program that only read holds no frame (at most its header).
    """
    if now.stamp != recorded.stamp:
        return False
    if now.wal is None:
        return True
    if now.wal == recorded.wal:  # the -shm alone was deleted: the -wal is still this one
        return now.wal_stamp == recorded.wal_stamp
    return now.wal_stamp is not None and now.wal_stamp[0] <= WAL_HEADER_BYTES


def links_message(path: Path, links: int) -> str:
    """Why a store whose file has ``links`` names is refused, and what to do."""
    return (
        f"store {path} has {links} names (hard links to one file): SQLite keeps the -wal and "
        "-shm files beside the name a program opens, so programs using two names write past "
        "each other and runs are lost; open the store through one path only — remove the "
        f"other names (`find / -xdev -samefile {path}` lists them) or copy the store to a "
        "new file"
    )


@dataclass(frozen=True)
class Split:
    """How an open store's file stopped being the one its connections write to."""

    kind: str  # "link" (a second name), "wal" (-wal / -shm replaced), "moved" (the file itself)
    what: str  # what happened, as a clause after "store PATH"


def split_of(recorded: FileIds, now: FileIds) -> Split | None:
    """How the files ``now`` differ from those ``recorded`` when the store opened, if they do.

    A ``-wal`` or ``-shm`` that was absent when recorded (a read-only store) is not compared.
    """
    if now.db is None or now.db != recorded.db:
        return Split("moved", "was replaced, moved or deleted by another program while open")
    if now.links > 1:
        return Split(
            "link",
            f"gained a second name (it has {now.links} hard links) while memprobe had it open; "
            "SQLite keeps the -wal and -shm beside the name a program opens, so programs "
            "using two names write past each other",
        )
    if (recorded.wal is not None and now.wal != recorded.wal) or (
        recorded.shm is not None and now.shm != recorded.shm
    ):
        return Split(
            "wal",
            "had its -wal and -shm files deleted or replaced by another program (a cleanup "
            "job?) while memprobe was writing; SQLite keeps the latest writes there",
        )
    return None


def split_message(path: Path, split: Split, saved: str) -> str:
    """The ``StoreError`` text for a split store: what happened, what was saved, what to do."""
    if split.kind == "link":
        todo = "remove the other name (`find / -xdev -samefile PATH` lists them)"
    elif split.kind == "wal":
        todo = "stop whatever deletes the store's -wal and -shm files"
    else:
        todo = "check which file is the store"
    return (
        f"store {path} {split.what}; {saved}; memprobe writes nothing more through this "
        f"connection — {todo.replace('PATH', str(path))}, then start memprobe again (an audit "
        "continues with `memprobe resume RUN`)"
    )


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _stamp(st: os.stat_result | None) -> tuple[int, int] | None:
    return None if st is None else (st.st_size, st.st_mtime_ns)


def _id(st: os.stat_result | None) -> FileId | None:
    return None if st is None else (st.st_dev, st.st_ino)
