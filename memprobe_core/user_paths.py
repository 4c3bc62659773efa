"""The one way to check and open a path a user names: a flag, a positional, the store, a file.

A path a user types can name anything: a symbolic-link loop, a named pipe (reading it waits for a
writer forever), a device (``/dev/zero`` never ends, ``/dev/stdin`` is the terminal), a folder, a
kernel pseudo-file (``/proc/self/environ`` says its size is 0 and holds the environment;
``/proc/kcore`` is endless), a path through a regular file, a place that cannot be read or
written. Each is refused here with one line naming the option, the path, what it is and what to
do (``--junit /tmp/loop: a symlink loop; give a regular file``), before any work; nothing else
in memprobe stats or opens such a path on its own.

- :func:`reading_problem` / :func:`check_readable`: a regular file that can be read.
- :func:`writing_problem` / :func:`check_writable`: a regular file (or a new one in an existing,
  writable folder) that can be written; memprobe replaces it.
- :func:`store_problem`: the run store, read and written, created with its folders when missing.
- :func:`open_readable` / :func:`read_bytes` / :func:`write_bytes`: open without following a swap
  made after the check to a pipe or device (the opened file is checked, not the name), never
  blocking on one.

Hand-written on ``os.stat``: no library refuses these kinds of files (``pathlib`` raises
``RuntimeError`` on a loop in Python 3.11, waits on a pipe, and reads ``/proc`` files as empty).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from memprobe_core.errors import UsageError

# A caller's own error class (``DataError``, ``PolicyError`` …) built from the message.
ErrorClass = Callable[[str], Exception]

# File systems the kernel makes up as they are read: a file's size says nothing of what it holds
# (``/proc`` files read as size 0, ``/proc/kcore`` claims terabytes), reading may never end or
# change the system, and writing one is a command to the kernel. ``autofs`` is left out (stating
# one mounts it) and ``devtmpfs`` (its devices are refused as devices).
PSEUDO_FILESYSTEMS: frozenset[str] = frozenset(
    {
        "proc",
        "sysfs",
        "debugfs",
        "tracefs",
        "securityfs",
        "configfs",
        "cgroup",
        "cgroup2",
        "efivarfs",
        "bpf",
        "pstore",
        "fusectl",
        "binfmt_misc",
        "devpts",
        "mqueue",
        "selinuxfs",
        "rpc_pipefs",
        "nsfs",
    }
)
_MOUNTINFO = "/proc/self/mountinfo"
# Mount tables of containers hold hundreds of lines; a bound keeps a hostile one cheap.
_MAX_MOUNTS = 100_000
REGULAR = "give a regular file"


class PathError(UsageError):
    """A path a user named that cannot be read or written as a regular file (the message names
    the option, the path, what it is and what to do)."""


def reading_problem(path: str | Path, *, folder: bool = False) -> str | None:
    """What stops ``path`` being read as a regular file (``"a symlink loop; give a regular
    file"``), or ``None``. ``folder``: a folder is read too (its files are checked as they are
    opened)."""
    status, problem = _stat(path)
    if problem:
        return problem
    assert status is not None
    if folder and stat.S_ISDIR(status.st_mode):
        if _is_pseudo(status):
            return "a kernel pseudo-file system (/proc, /sys); give a folder of regular files"
        if not os.access(path, os.R_OK | os.X_OK):
            return "cannot be read (permission denied); give a folder you can read"
        return None
    problem = _kind_problem(status)
    if problem:
        return problem
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied); give a file you can read"
    return None


def writing_problem(path: str | Path) -> str | None:
    """What stops memprobe writing (creating or replacing) a regular file at ``path``, or
    ``None``. A missing file needs an existing folder that can be written."""
    status, problem = _stat(path)
    if status is not None:
        if stat.S_ISDIR(status.st_mode):
            return "it is a folder; give a file name"
        problem = _kind_problem(status)
        if problem:
            return problem
        if not os.access(path, os.W_OK):
            return "the file exists and cannot be replaced; choose a path you can write to"
        return None
    if problem and not problem.startswith("does not exist"):
        return problem
    if os.path.islink(path):
        return (
            f"a symbolic link to {os.readlink(path)}, which does not exist; {REGULAR} or remove "
            "the link"
        )
    folder = Path(path).parent
    folder_status, folder_problem = _stat(folder)
    if folder_status is None:
        if folder_problem and folder_problem.startswith("does not exist"):
            return f"folder {folder} does not exist; create it or choose another path"
        return f"folder {folder}: {folder_problem}"
    if not stat.S_ISDIR(folder_status.st_mode):
        return f"{folder} is not a folder; choose another path"
    if _is_pseudo(folder_status):
        return f"folder {folder} is a kernel pseudo-file system (/proc, /sys); {REGULAR}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"folder {folder} cannot be written; choose a path you can write to"
    return None


def store_problem(path: str | Path) -> str | None:
    """What stops ``path`` being the run store (an SQLite file read and written, created with
    its missing folders), or ``None``."""
    status, problem = _stat(path)
    if status is not None:
        problem = _kind_problem(status)
        if problem:
            return problem
        if not os.access(path, os.R_OK):
            return "cannot be read (permission denied); give a file you can read"
        return None  # a read-only store is read; a write says so, naming the store
    if problem and not problem.startswith("does not exist"):
        return problem
    # Missing: its nearest existing folder must be a writable folder (the rest is created).
    above = Path(os.path.abspath(path)).parent
    while True:
        above_status, above_problem = _stat(above)
        if above_status is not None or above == above.parent:
            break
        if above_problem and not above_problem.startswith("does not exist"):
            return f"folder {above}: {above_problem}"
        above = above.parent
    if above_status is None or not stat.S_ISDIR(above_status.st_mode):
        return f"{above} is not a folder; choose another path"
    if _is_pseudo(above_status):
        return f"folder {above} is a kernel pseudo-file system (/proc, /sys); {REGULAR}"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"folder {above} cannot be written; choose a path you can write to"
    return None


def check_readable(path: str | Path, named: str, error: ErrorClass = PathError) -> Path:
    """``path`` as a ``Path`` if it is a regular file that can be read.

    Raises:
        ``error`` (:class:`PathError` by default): ``named PATH: what it is; what to do``.
    """
    problem = reading_problem(path)
    if problem:
        raise error(message(named, path, problem))
    return Path(path)


def check_writable(path: str | Path, named: str, error: ErrorClass = PathError) -> Path:
    """``path`` (``~`` expanded) if a regular file can be written there; checked without
    writing.

    Raises:
        ``error`` (:class:`PathError` by default): ``cannot write NAMED to PATH: …``.
    """
    target = Path(path).expanduser()
    problem = writing_problem(target)
    if problem:
        raise error(f"cannot write {named} to {target}: {problem}")
    return target


def open_readable(path: str | Path, named: str, error: ErrorClass = PathError) -> BinaryIO:
    """``path`` opened for reading in binary mode, once it is checked to be a regular file.

    Opened without blocking (a pipe swapped in after the check does not wait for a writer) and
    the opened file is checked again, so what is read is the regular file that was checked.

    Raises:
        ``error`` (:class:`PathError` by default): as :func:`check_readable`, or the open failed.
    """
    check_readable(path, named, error)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(message(named, path, _errno_problem(exc, path))) from None
    try:
        problem = _kind_problem(os.fstat(fd))
        if problem:
            raise error(message(named, path, problem))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(
    path: str | Path, named: str, limit: int | None = None, error: ErrorClass = PathError
) -> bytes:
    """The bytes of the regular file ``path``, opened with :func:`open_readable`: at most
    ``limit + 1`` of them when ``limit`` is given (a caller refuses more than ``limit`` in its
    own words).

    Raises:
        ``error``: as :func:`open_readable`, or the read failed.
    """
    with open_readable(path, named, error) as file:
        try:
            return file.read() if limit is None else file.read(limit + 1)
        except OSError as exc:
            raise error(message(named, path, _errno_problem(exc, path))) from None


def write_bytes(path: str | Path, data: bytes, named: str, error: ErrorClass = PathError) -> Path:
    """Write ``data`` to ``path`` (created or replaced), once it is checked with
    :func:`check_writable`; opened without blocking (a pipe swapped in after the check is
    refused, not waited on) and the opened file checked again before anything is written.

    Raises:
        ``error``: as :func:`check_writable`, or the file turned out not to be a regular one.
        OSError: the write itself failed (disk full …).
    """
    target = check_writable(path, named, error)
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(target, flags | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise error(f"cannot write {named} to {target}: {_errno_problem(exc, target)}") from None
    with os.fdopen(fd, "wb") as file:
        problem = _kind_problem(os.fstat(fd))
        if problem:
            raise error(f"cannot write {named} to {target}: {problem}")
        os.set_blocking(fd, True)
        file.truncate(0)
        file.write(data)
    return target


def message(named: str, path: str | Path, problem: str) -> str:
    """``named PATH: problem`` (``--policy /tmp/loop: a symlink loop; give a regular file``)."""
    return f"{named} {os.fspath(path)}: {problem}"


def _stat(path: str | Path) -> tuple[os.stat_result | None, str | None]:
    """``os.stat(path)`` (links followed) or ``(None, what is wrong)``."""
    try:
        return os.stat(path), None
    except OSError as exc:
        return None, _errno_problem(exc, path)
    except ValueError:  # a NUL byte in the name
        return None, "not a usable path (it holds a NUL character); check the path"


def _errno_problem(exc: OSError, path: str | Path) -> str:
    if exc.errno == errno.ELOOP:
        return f"a symlink loop; {REGULAR}"
    if exc.errno == errno.ENOENT:
        return "does not exist; check the path"
    if exc.errno == errno.ENOTDIR:
        return f"a path through a file that is not a folder; {REGULAR}"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "cannot be reached (permission denied); give a file you can read"
    if exc.errno == errno.ENAMETOOLONG:
        return "the name is too long; check the path"
    if exc.errno == errno.ENXIO:
        return f"a device or pipe with no one at the other end; {REGULAR}"
    return f"{exc.strerror or exc}; {REGULAR}"


def _kind_problem(status: os.stat_result) -> str | None:
    """What is wrong with a file that exists for reading or writing, or ``None`` when it is a
    regular file on a real file system."""
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        return f"a folder; {REGULAR}"
    if stat.S_ISFIFO(mode):
        return f"a named pipe (FIFO); {REGULAR}"
    if stat.S_ISCHR(mode):
        return f"a character device; {REGULAR}"
    if stat.S_ISBLK(mode):
        return f"a block device; {REGULAR}"
    if stat.S_ISSOCK(mode):
        return f"a socket; {REGULAR}"
    if not stat.S_ISREG(mode):
        return f"not a regular file; {REGULAR}"
    if _is_pseudo(status):
        return (
            f"a kernel pseudo-file (/proc, /sys: its size says nothing of what it holds); {REGULAR}"
        )
    return None


def _is_pseudo(status: os.stat_result) -> bool:
    """Whether the file lies on a file system the kernel makes up (:data:`PSEUDO_FILESYSTEMS`),
    told by its device against the mount table (so a link or bind mount elsewhere is caught)."""
    return status.st_dev in _pseudo_devices()


def _pseudo_devices() -> set[int]:
    """The device numbers of the mounted pseudo file systems, from ``/proc/self/mountinfo``
    (read each time: mounts change; empty where there is none, off Linux)."""
    devices: set[int] = set()
    try:
        with open(_MOUNTINFO, encoding="utf-8", errors="replace") as table:
            # Line by line, at most _MAX_MOUNTS: read(n) would allocate n bytes up front (4 MiB
            # on every path check, seen by the loaders' memory test).
            lines = list(islice(table, _MAX_MOUNTS))
    except OSError:
        return devices
    for line in lines:
        # id parent major:minor root mountpoint options [optional…] - fstype source superoptions
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        fstype = rest.split(" ", 1)[0] if rest else ""
        if len(parts) < 3 or fstype not in PSEUDO_FILESYSTEMS:
            continue
        major, _, minor = parts[2].partition(":")
        if major.isdigit() and minor.isdigit():
            devices.add(os.makedev(int(major), int(minor)))
    return devices
