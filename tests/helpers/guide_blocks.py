"""The example plugin package of a guide (docs/adding-a-*.md), written out from its Markdown.

A guide's example plugin is a set of fenced code blocks, each opening with a comment line that
names the file's path relative to the plugin package's root::

    ```python
    # file: memprobe_echo/signal.py
    ...
    ```

Blocks without such a first line are illustrations, not files. :func:`write_package` writes the
files into a folder (the comment line stays: it is a valid comment in Python and TOML) and
:func:`install_package` installs that folder with pip into a target directory, which a test puts
on ``PYTHONPATH`` of a subprocess, so the guide is tested exactly as written.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

# The opening fence, the file-naming comment as its first line, then the body up to the closing
# fence (the same run of backticks). ``#`` comments serve Python, TOML and shell files.
_BLOCK = re.compile(
    r"^(?P<fence>`{3,})[^\n]*\n#\s*file:\s*(?P<path>\S+)[ \t]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


def guide_blocks(markdown: str) -> dict[str, str]:
    """``{relative path: file text}`` of every file block of a guide, in document order.

    Raises:
        ValueError: a path named twice, or one that leaves the package root.
    """
    files: dict[str, str] = {}
    for match in _BLOCK.finditer(markdown):
        path = match["path"]
        if path.startswith("/") or ".." in Path(path).parts:
            raise ValueError(f"guide block names {path!r}: give a path inside the package root")
        if path in files:
            raise ValueError(f"guide block names {path!r} twice: one block per file")
        files[path] = f"# file: {path}\n{match['body']}"
    return files


def write_package(guide: Path, root: Path) -> dict[str, Path]:
    """Write the file blocks of ``guide`` under ``root``; returns ``{relative path: file}``."""
    written: dict[str, Path] = {}
    for rel, text in guide_blocks(guide.read_text(encoding="utf-8")).items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written[rel] = target
    return written


def install_package(source: Path, target: Path) -> None:
    """``pip install --no-deps --no-build-isolation --target target source`` (offline: the
    build backend is the one the running Python has)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--quiet",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip could not install {source}:\n{done.stdout}\n{done.stderr}")
