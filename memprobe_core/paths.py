"""Where memprobe keeps files: one home folder (``MEMPROBE_HOME``, default ``~/.cache/memprobe``)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from memprobe_core.user_paths import PathError


def home() -> Path:
    """memprobe's folder for caches and the run store; created on first use.

    Raises:
        PathError: the folder cannot be made (``MEMPROBE_HOME`` or ``HOME`` names a file, or a
            place that cannot be written); the message names the variable to change.
    """
    given = os.environ.get("MEMPROBE_HOME")
    path = Path(given or Path.home() / ".cache" / "memprobe").expanduser()
    return _folder(path, "MEMPROBE_HOME" if given else "HOME")


def model_cache_dir() -> Path:
    """Converted embedded models (safetensors) and the trained embedded NER model."""
    folder = home()
    return _folder(
        folder / "models", "MEMPROBE_HOME" if os.environ.get("MEMPROBE_HOME") else "HOME"
    )


def default_store_path() -> Path:
    """The SQLite file that remembers every run (``MEMPROBE_STORE`` overrides it)."""
    override = os.environ.get("MEMPROBE_STORE")
    return Path(override).expanduser() if override else home() / "runs.sqlite"


def _folder(path: Path, variable: str) -> Path:
    """``path`` made (with its parents) if missing; a file in the way, or a place that cannot be
    written, is one line naming ``variable`` (``HOME=/tmp/x.txt`` was a bare
    ``[Errno 20] Not a directory``)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            what = "a file, not a folder, has that name"
        elif exc.errno == errno.ENOTDIR:
            what = "a file, not a folder, is on its path"
        else:
            what = exc.strerror or str(exc)
        remedy = (
            "set MEMPROBE_HOME to a folder you can write to"
            if variable == "MEMPROBE_HOME"
            else "set HOME, or MEMPROBE_HOME, to a folder you can write to"
        )
        raise PathError(
            f"{variable}={os.environ.get(variable, '')}: memprobe's folder {path} cannot be made "
            f"({what}); {remedy}"
        ) from exc
    return path
