"""Reading a document file: UTF-8 text, refused in one line when it cannot be one."""

from __future__ import annotations

from pathlib import Path

from memprobe_core.errors import UsageError
from memprobe_core.user_paths import check_readable, read_bytes

# A long novel is about 1 MB of text; 32 MiB is a shelf of them. The word lists nv-recall aligns
# take about 60 bytes a word, so a bigger file is a mistake (a dataset, a binary), not a book.
MAX_DOCUMENT_BYTES = 32 * 1024 * 1024


class DocumentError(UsageError):
    """A document that cannot be read as text (the message names the file and why)."""


def read_document(path: str | Path, what: str = "document") -> str:
    """The text of ``path`` (UTF-8; a byte-order mark is skipped).

    Raises:
        DocumentError: missing, not a regular file (a folder, a symlink loop, a pipe, a device,
            a /proc file: :mod:`memprobe_core.user_paths`), over :data:`MAX_DOCUMENT_BYTES`,
            binary (a NUL byte), not UTF-8, or without a word.
    """
    # A symlink loop, pipe, device, folder or /proc file is refused here (docs/security.md).
    path = check_readable(path, what, DocumentError)
    size = path.stat().st_size
    if size > MAX_DOCUMENT_BYTES:
        raise _too_big(what, path.name, size)
    data = read_bytes(path, what, MAX_DOCUMENT_BYTES, DocumentError)
    return document_from_bytes(data, path.name, what)


def document_from_bytes(data: bytes, name: str, what: str = "document") -> str:
    """The text of a document's bytes (a file read, or an upload on the dashboard).

    Raises:
        DocumentError: over :data:`MAX_DOCUMENT_BYTES`, binary (a NUL byte), not UTF-8, or
            without a word.
    """
    if len(data) > MAX_DOCUMENT_BYTES:
        raise _too_big(what, name, len(data))
    if b"\x00" in data:
        raise DocumentError(f"{what} {name!r} is binary (it holds NUL bytes): give a text file")
    try:
        # Every leading byte-order mark, not just the first (a file saved twice with one).
        text = data.decode("utf-8-sig").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        raise DocumentError(
            f"{what} {name!r} is not UTF-8 text (byte {exc.start} cannot be decoded); "
            "convert it to UTF-8"
        ) from None
    if not text.split():
        raise DocumentError(f"{what} {name!r} holds no words")
    return text


def _too_big(what: str, name: str, size: int) -> DocumentError:
    # In bytes: a file one byte over the cap would read "32.0 MiB; capped at 32 MiB".
    return DocumentError(
        f"{what} {name!r} is {size:,} bytes; documents are capped at {MAX_DOCUMENT_BYTES:,} "
        f"bytes ({MAX_DOCUMENT_BYTES // 2**20} MiB; a long book is about 1 MiB)"
    )
