"""The dashboard's one path a user names, the run store (``MEMPROBE_STORE``): a symlink loop, a
named pipe, a device, a folder or a /proc file is refused on the page in one error naming the
store and what it is (memprobe_core.user_paths), never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.app.conftest import open_page


def _loop(tmp: Path) -> str:
    (tmp / "a").symlink_to(tmp / "b")
    (tmp / "b").symlink_to(tmp / "a")
    return str(tmp / "a")


def _fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "pipe")
    return str(tmp / "pipe")


def _folder(tmp: Path) -> str:
    (tmp / "dir").mkdir()
    return str(tmp / "dir")


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_loop, "a symlink loop; give a regular file"),
        (_fifo, "a named pipe (FIFO); give a regular file"),
        (lambda tmp: "/dev/zero", "a character device; give a regular file"),
        (_folder, "a folder; give a regular file"),
        (lambda tmp: "/proc/version", "a kernel pseudo-file"),
    ],
    ids=["loop", "fifo", "device", "folder", "proc"],
)
def test_a_store_path_that_is_not_a_regular_file_is_one_error_on_the_page(
    make, says, tmp_path, monkeypatch
):
    store = make(tmp_path)
    monkeypatch.setenv("MEMPROBE_STORE", store)
    at = open_page("pages/5_Runs.py")
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 1, errors
    text = errors[0].replace("\\", "")
    assert "Cannot open the run store" in text and f"store {store}: {says}" in text, text
