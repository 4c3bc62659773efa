"""The store file's identity checks (``memprobe_core.store.files``) on made-up file states."""

from __future__ import annotations

import dataclasses
import os

from memprobe_core.store.files import FileIds, file_ids, split_of, untouched

OPEN = FileIds(db=(1, 10), wal=(1, 11), shm=(1, 12), links=1, stamp=(4096, 5), wal_stamp=(8272, 6))


def now(**changes: object) -> FileIds:
    return dataclasses.replace(OPEN, **changes)


def kind(recorded: FileIds, found: FileIds) -> str | None:
    split = split_of(recorded, found)
    return None if split is None else split.kind


def test_split_of_names_each_way_the_files_can_change():
    assert kind(OPEN, OPEN) is None
    assert kind(OPEN, now(stamp=(8192, 9), wal_stamp=(0, 9))) is None  # writes are no split
    assert kind(OPEN, now(links=2)) == "link"
    for changed in (now(wal=None), now(wal=(1, 99)), now(shm=None), now(shm=(1, 98))):
        assert kind(OPEN, changed) == "wal"
    for moved in (now(db=None, links=0), now(db=(1, 77))):
        assert kind(OPEN, moved) == "moved"
    read_only = now(wal=None, shm=None)  # recorded without a -wal: nothing to compare
    assert kind(read_only, now()) is None


def test_untouched_tells_a_reader_from_a_writer_since_the_split():
    gone = now(wal=None, shm=None)
    assert untouched(OPEN, gone)
    assert untouched(OPEN, now(wal=(1, 99), wal_stamp=(0, 50)))  # a reader's fresh, empty -wal
    assert not untouched(OPEN, now(wal=(1, 99), wal_stamp=(4152, 50)))  # a writer's frames
    assert not untouched(OPEN, now(wal=None, stamp=(8192, 50)))  # the store file written
    assert untouched(OPEN, now(shm=None))  # -shm deleted, this -wal as this process left it
    assert not untouched(OPEN, now(shm=None, wal_stamp=(12368, 50)))  # and written to since


def test_file_ids_of_a_file_with_links_and_sidecars(tmp_path):
    store = tmp_path / "runs.sqlite"
    assert file_ids(store) == FileIds(None, None, None, 0, None, None)
    store.write_bytes(b"x" * 10)
    (tmp_path / "runs.sqlite-wal").write_bytes(b"")
    ids = file_ids(store)
    assert ids.db == (os.stat(store).st_dev, os.stat(store).st_ino) and ids.links == 1
    assert ids.wal is not None and ids.shm is None and ids.stamp == (10, os.stat(store).st_mtime_ns)
    os.link(store, tmp_path / "other.sqlite")
    assert file_ids(store).links == 2
