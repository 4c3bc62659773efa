"""Where memprobe keeps files: one home folder (``MEMPROBE_HOME``, default ``~/.cache/memprobe``)."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """memprobe's folder for caches and the run store; created on first use."""
    path = Path(os.environ.get("MEMPROBE_HOME") or Path.home() / ".cache" / "memprobe").expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def model_cache_dir() -> Path:
    """Converted embedded models (safetensors) and the trained embedded NER model."""
    path = home() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_store_path() -> Path:
    """The SQLite file that remembers every run (``MEMPROBE_STORE`` overrides it)."""
    override = os.environ.get("MEMPROBE_STORE")
    return Path(override).expanduser() if override else home() / "runs.sqlite"
