"""The one check of a path a user names (memprobe_core.user_paths), and every reader and writer
that goes through it: each kind of path that is not a regular file is refused in one line with
the reader's own error class, naming the path, what it is and what to do.

These tests run as root here: permissions do not stop root reading or writing, so the
unwritable places tested are those no one can write (a path under a regular file, a /proc file,
a new file in /proc); chmod-based cases are left out as they would pass as root for the wrong
reason.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from memprobe_core import user_paths
from memprobe_core.documents.reading import DocumentError, read_document
from memprobe_core.errors import MemprobeError, UsageError
from memprobe_core.ner.conll import ConllError, read_conll
from memprobe_core.ner.names import NameListError, read_name_list
from memprobe_core.ner.prompts import PromptError, read_prompts
from memprobe_core.release.policy import PolicyError, read_policy
from memprobe_core.report.export import ExportError, write_output
from memprobe_core.snippets.loaders import load_reference_corpus, load_snippets
from memprobe_core.snippets.split import DataError
from memprobe_core.store import Store
from memprobe_core.store.schema import StoreError
from memprobe_core.user_paths import (
    PathError,
    check_readable,
    check_writable,
    open_readable,
    reading_problem,
    store_problem,
    write_bytes,
    writing_problem,
)


def _loop(tmp: Path) -> Path:
    (tmp / "a").symlink_to(tmp / "b")
    (tmp / "b").symlink_to(tmp / "a")
    return tmp / "a"


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "pipe")
    return tmp / "pipe"


def _socket(tmp: Path) -> Path:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp / "sock"))
    server.close()
    return tmp / "sock"


def _folder(tmp: Path) -> Path:
    (tmp / "dir").mkdir()
    return tmp / "dir"


def _through_a_file(tmp: Path) -> Path:
    (tmp / "plain.txt").write_text("x\n")
    return tmp / "plain.txt" / "inside.csv"


# (kind, how to make it, what the message says)
KINDS: list[tuple[str, Callable[[Path], Path], str]] = [
    ("symlink loop", _loop, "a symlink loop; give a regular file"),
    ("named pipe", _fifo, "a named pipe (FIFO); give a regular file"),
    ("socket", _socket, "a socket; give a regular file"),
    ("/dev/zero", lambda tmp: Path("/dev/zero"), "a character device; give a regular file"),
    ("/dev/null", lambda tmp: Path("/dev/null"), "a character device; give a regular file"),
    ("/proc file", lambda tmp: Path("/proc/self/environ"), "a kernel pseudo-file"),
    ("/proc/version", lambda tmp: Path("/proc/version"), "a kernel pseudo-file"),
    ("through a file", _through_a_file, "a path through a file that is not a folder"),
]
if os.path.exists("/dev/stdin") and not Path("/dev/stdin").resolve().is_file():
    KINDS.append(("/dev/stdin", lambda tmp: Path("/dev/stdin"), "give a regular file"))


@pytest.mark.parametrize(("kind", "make", "says"), KINDS, ids=[k[0] for k in KINDS])
def test_every_kind_is_refused_for_reading_writing_and_the_store(kind, make, says, tmp_path):
    path = make(tmp_path)
    for problem in (reading_problem(path), writing_problem(path), store_problem(path)):
        assert problem is not None and says in problem, (kind, problem)
    with pytest.raises(PathError, match=f"^--flag {path}: "):
        check_readable(path, "--flag")
    with pytest.raises(PathError, match=f"^cannot write --out to {path}: "):
        check_writable(path, "--out")


def test_a_folder_missing_file_and_missing_folder(tmp_path):
    folder = _folder(tmp_path)
    assert reading_problem(folder) == "a folder; give a regular file"
    assert writing_problem(folder) == "it is a folder; give a file name"
    assert store_problem(folder) == "a folder; give a regular file"
    assert reading_problem(folder, folder=True) is None  # --in-conll takes a folder
    missing = tmp_path / "missing.txt"
    assert reading_problem(missing) == "does not exist; check the path"
    assert writing_problem(missing) is None and store_problem(missing) is None  # created
    deep = tmp_path / "no" / "such" / "runs.sqlite"
    assert reading_problem(deep) == "does not exist; check the path"
    assert writing_problem(deep) == (
        f"folder {deep.parent} does not exist; create it or choose another path"
    )
    assert store_problem(deep) is None  # the store creates its folders
    Store(deep).close()
    assert deep.is_file()
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone.csv")
    assert reading_problem(dangling) == "does not exist; check the path"
    assert "a symbolic link to" in (writing_problem(dangling) or "")


def test_unwritable_places_as_root(tmp_path):
    """Root writes anywhere permissions allow; these places nobody can write."""
    new_in_proc = Path("/proc/memprobe-test.csv")
    assert "folder /proc is a kernel pseudo-file system" in (writing_problem(new_in_proc) or "")
    assert "folder /proc is a kernel pseudo-file system" in (store_problem(new_in_proc) or "")
    assert "a kernel pseudo-file" in (writing_problem("/proc/version") or "")
    under_a_file = _through_a_file(tmp_path)
    assert "through a file" in (writing_problem(under_a_file) or "")
    assert "through a file" in (store_problem(under_a_file / "deeper" / "runs.sqlite") or "")


def test_a_regular_file_and_a_link_to_one_are_fine(tmp_path):
    file = tmp_path / "f.txt"
    file.write_text("words\n")
    link = tmp_path / "link.txt"
    link.symlink_to(file)
    for path in (file, link):
        assert reading_problem(path) is None
        assert writing_problem(path) is None
        assert store_problem(path) is None
        with open_readable(path, "--x") as opened:
            assert opened.read() == b"words\n"


def test_a_pipe_swapped_in_after_the_check_is_refused_without_waiting(tmp_path, monkeypatch):
    """The opened file is checked, not the name: a pipe put where the checked file was is
    refused at once, for reading and writing (a plain open would wait for the other end)."""
    fifo = _fifo(tmp_path)
    monkeypatch.setattr(user_paths, "check_readable", lambda path, named, error: Path(path))
    monkeypatch.setattr(user_paths, "check_writable", lambda path, named, error: Path(path))
    outcome: list[BaseException] = []

    def attempt() -> None:
        for action in (
            lambda: open_readable(fifo, "--in"),
            lambda: write_bytes(fifo, b"data", "--out"),
        ):
            try:
                action()
            except PathError as exc:
                outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "blocked on the pipe"
    assert [str(e) for e in outcome] == [
        f"--in {fifo}: a named pipe (FIFO); give a regular file",
        f"cannot write --out to {fifo}: a device or pipe with no one at the other end; "
        "give a regular file",
    ]


def test_write_bytes_replaces_a_regular_file(tmp_path):
    target = tmp_path / "out.csv"
    target.write_bytes(b"old and longer content")
    assert write_bytes(target, b"new", "--csv") == target
    assert target.read_bytes() == b"new"


# --- every reader and writer goes through the one check, with its own error class -----------
def _policy(path: Path) -> object:
    return read_policy(path)


READERS: list[tuple[str, Callable[[Path], object], type[MemprobeError]]] = [
    ("dataset", load_snippets, DataError),
    (
        "reference corpus",
        lambda p: load_reference_corpus(p, named=f"--dc-pdd-corpus {p}", empty="no text"),
        UsageError,
    ),
    ("document", read_document, DocumentError),
    ("policy", _policy, PolicyError),
    ("name list", read_name_list, NameListError),
    ("CoNLL file", read_conll, ConllError),
    ("prompt file", read_prompts, PromptError),
]


@pytest.mark.parametrize(("what", "read", "error"), READERS, ids=[r[0] for r in READERS])
@pytest.mark.parametrize("kind", ["symlink loop", "named pipe", "/dev/zero", "/proc file"])
def test_every_reader_refuses_what_is_not_a_regular_file(what, read, error, kind, tmp_path):
    make, says = next((make, says) for name, make, says in KINDS if name == kind)
    path = make(tmp_path)
    with pytest.raises(error) as caught:
        read(path)
    assert says in str(caught.value) and str(path) in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("kind", ["symlink loop", "named pipe", "/dev/null", "/proc/version"])
def test_outputs_and_the_store_refuse_what_is_not_a_regular_file(kind, tmp_path):
    make, says = next((make, says) for name, make, says in KINDS if name == kind)
    path = make(tmp_path)
    with pytest.raises(ExportError) as written:
        write_output(b"<html>", path, "--html")
    assert str(written.value).startswith(f"cannot write --html to {path}: {says}")
    with pytest.raises(StoreError) as opened:
        Store(path)
    assert str(opened.value).startswith(f"store {path}: {says}")
