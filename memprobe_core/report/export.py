"""CSV export that is safe to open in a spreadsheet, and reads back into pandas exactly.

**Formulas.** Snippets and model outputs are untrusted text: a cell such as
``=HYPERLINK("http://evil", "x")`` becomes a live formula when the CSV is opened in Excel or
LibreOffice. Following OWASP's "CSV Injection" advice, a single quote (``'``) goes in front of every
**text** cell that

- starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (OWASP's list), or
- starts with any run of whitespace or invisible characters (spaces, NBSP and the other Unicode
  spaces, newlines, control and format characters such as U+200B or a BOM) followed by one of
  ``= + - @`` or their full-width forms (``＝ ＋ － ＠``): spreadsheet programs trim leading
  whitespace on import, so ``" =1+1"`` and ``"\n=1+1"`` are formulas too (the full-width forms are
  a cheap precaution, not a case we saw a spreadsheet evaluate), or
- already starts with ``'`` — so that exactly one leading quote is always the exporter's, and
  :func:`read_safe_csv` can take it off without guessing.

Spreadsheets show a leading ``'`` cell as text. The csv writer quotes cells with commas, quotes and
newlines, so a cell cannot break out of its field.

What is *not* touched, on purpose: numbers stay numbers (a negative score stored as a number,
``-0.25``, is written as ``-0.25``; the same text ``"-0.25"`` stored as a string is neutralised,
because a spreadsheet would evaluate it). Output is UTF-8 (no BOM), one header row, no index
column, CRLF row ends; a missing value (None, NaN, NaT) is an empty field.

**Reading it back (the round trip, stated exactly).** pandas' defaults turn the *text* cells
``NA``, ``null``, ``None``, ``nan``, ``NaN``, ``N/A``, ``#N/A``, ``<NA>`` … into NaN. The call that
keeps them is :func:`read_safe_csv`, which is::

    frame = pd.read_csv(source, encoding="utf-8", keep_default_na=False, na_values=[""],
                        dtype={c: str for c in text_columns})
    frame[text_columns] = frame[text_columns].fillna("")
    # then one leading "'" is removed from every text cell and column name that has one

What comes back:

- every text cell as written (``"NA"``, ``"null"``, ``"None"``, ``"nan"``, commas, quotes,
  newlines, non-ASCII, formula-like text without the added quote);
- numbers with their type (int, float, bool) and NaN where a value was missing;
- ``""`` (empty text) only in the columns named in ``text_columns``. CSV spells an empty text and a
  missing value the same way (an empty field), and pandas cannot tell ``""`` from nothing, so a
  column must say which it means: in ``text_columns`` an empty field is ``""`` (a missing text
  value also comes back as ``""``); elsewhere it is NaN.
- text columns whose every cell looks like a number (snippet ids ``"001"``) stay text only when
  named in ``text_columns``; otherwise pandas reads them as numbers.

Callers add manifest columns (models, ROUGE variant, α, seed) to the frame before exporting;
``Store.results_frame`` already carries them.
"""

from __future__ import annotations

import io
import numbers
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import pandas as pd

from memprobe_core.errors import MemprobeError
from memprobe_core.user_paths import check_writable, write_bytes

# OWASP CSV injection: characters that make a spreadsheet treat a cell as a formula.
FORMULA_PREFIXES: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"
# Formula starts that count after leading whitespace/invisible characters (plus full-width forms).
_FORMULA_STARTS = frozenset("=+-@\uff1d\uff0b\uff0d\uff20")
# Unicode categories a spreadsheet may drop or not show in front of a formula: control (Cc),
# format (Cf: zero-width space, BOM, direction marks), space/line/paragraph separators.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
_READ_KWARGS: dict[str, Any] = {"encoding": "utf-8", "keep_default_na": False, "na_values": [""]}


class ExportError(MemprobeError, OSError):
    """The CSV could not be written; the message names the path and what to do."""


def _invisible(char: str) -> bool:
    return char.isspace() or unicodedata.category(char) in _INVISIBLE_CATEGORIES


def needs_quote(text: str) -> bool:
    """Whether ``text`` gets the leading ``'`` (the rule in the module docstring)."""
    if not text:
        return False
    if text.startswith(FORMULA_PREFIXES) or text.startswith(QUOTE):
        return True
    for char in text:
        if not _invisible(char):
            return char in _FORMULA_STARTS
    return False


def neutralize_cell(value: Any) -> Any:
    """A cell value made safe for spreadsheets (see the module docstring for the rule)."""
    if value is None or isinstance(value, (bool, numbers.Number)):
        return value
    if isinstance(value, (pd.Timestamp, pd.Timedelta)) or value is pd.NaT:
        return value
    text = value if isinstance(value, str) else str(value)
    if needs_quote(text):
        return QUOTE + text
    return value


def neutralize_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` with text cells and column names neutralised (numbers untouched)."""
    out = frame.copy()
    for column in out.columns:
        series = out[column]
        if pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
            continue
        if pd.api.types.is_datetime64_any_dtype(series):
            continue
        out[column] = series.map(neutralize_cell)
    out.columns = [neutralize_cell(c) if isinstance(c, str) else c for c in out.columns]
    return out


# Columns that hold Unix times in the store; exports write them as ISO 8601 (UTC).
TIME_COLUMNS: tuple[str, ...] = ("created", "updated", "started", "finished")


def readable_export(frame: pd.DataFrame) -> pd.DataFrame:
    """A per-unit or per-candidate frame as a person reads it in a spreadsheet.

    - :data:`TIME_COLUMNS` as ISO 8601 UTC text (``2026-12-03T07:45:34Z``), not Unix seconds;
    - columns empty in every row dropped (a results frame has a column for every method family's
      figures; one run fills a few). Which columns a file has therefore depends on the run:
      read them by name (docs/options.md, "CSV exports").
    """
    out = frame.copy()
    for column in TIME_COLUMNS:
        if column in out and pd.api.types.is_numeric_dtype(out[column]):
            times = pd.to_datetime(out[column], unit="s", utc=True)
            text = times.dt.strftime("%Y-%m-%dT%H:%M:%SZ").astype(object)
            out[column] = text.where(times.notna(), None)
    empty = [c for c in out.columns if out[c].map(_is_empty).all()]
    return out.drop(columns=empty) if len(out) else out


def _is_empty(value: Any) -> bool:
    if isinstance(value, str):
        return value == ""
    if isinstance(value, (list, tuple, dict)):
        return len(value) == 0
    return bool(pd.isna(value))


def to_safe_csv(frame: pd.DataFrame) -> bytes:
    """The frame as UTF-8 CSV bytes, one header row, no index, formula injection neutralised.

    Args:
        frame: any DataFrame (add manifest columns before calling).

    Returns:
        Bytes ready for a download button or a file.
    """
    buffer = io.StringIO()
    # CRLF as RFC 4180 says; it also makes the csv writer quote cells holding a bare CR, which
    # it would otherwise write raw (and readers would take as a row break).
    neutralize_frame(frame).to_csv(buffer, index=False, lineterminator="\r\n")
    return buffer.getvalue().encode("utf-8")


def writable_target(path: str | Path, what: str = "CSV") -> Path:
    """``path`` (``~`` expanded) if a file can be written there, checked without writing.

    The CLI checks every output path with this before any work (a ``--csv`` naming a folder
    used to fail only after minutes of scoring); :func:`write_output` checks again when writing.

    Raises:
        ExportError: ``path`` is a folder, a symlink loop, a pipe, a device or a kernel
            pseudo-file, its folder does not exist or cannot be written, or the file exists and
            cannot be replaced (:func:`memprobe_core.user_paths.writing_problem`); the message
            names ``what`` and the path.
    """
    # The one check of a path a user names: a symlink loop, a pipe, a device, a /proc file are
    # refused too (docs/security.md).
    return check_writable(path, what, ExportError)


def write_output(data: bytes, path: str | Path, what: str) -> Path:
    """Write ``data`` to ``path`` (replacing an existing file) and return the path.

    Raises:
        ExportError: as :func:`writable_target`, or the write itself failed (disk full …).
    """
    target = writable_target(path, what)
    try:
        write_bytes(target, data, what, ExportError)
    except ExportError:
        raise
    except OSError as exc:
        raise ExportError(
            f"cannot write {what} to {target}: {exc.strerror or exc}; choose a path you can "
            "write to"
        ) from exc
    return target


def write_safe_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write ``to_safe_csv(frame)`` to ``path`` (replacing an existing file).

    Returns:
        The path written.

    Raises:
        ExportError: the folder does not exist or cannot be written, or ``path`` is a folder.
    """
    return write_output(to_safe_csv(frame), path, "CSV")


def _unquote(value: Any) -> Any:
    return value[1:] if isinstance(value, str) and value.startswith(QUOTE) else value


def read_safe_csv(
    source: str | Path | bytes | IO[Any], *, text_columns: Iterable[str] = ()
) -> pd.DataFrame:
    """Read a CSV written by :func:`to_safe_csv` back into the frame it came from.

    Args:
        source: a path, the CSV bytes, or an open file.
        text_columns: columns to read as text, where an empty field means ``""`` (see the module
            docstring for why a CSV needs to be told).

    Returns:
        The frame: text cells as written (the exporter's leading ``'`` removed), numbers typed,
        missing values NaN.
    """
    text_columns = list(text_columns)
    data = io.BytesIO(source) if isinstance(source, bytes) else source
    # dtype is keyed by the header as written, where a name like "=x" carries the added quote.
    frame = pd.read_csv(data, **_READ_KWARGS, dtype={neutralize_cell(c): str for c in text_columns})
    frame.columns = [_unquote(c) for c in frame.columns]
    present = [c for c in text_columns if c in frame.columns]
    if present:
        frame[present] = frame[present].fillna("")
    for column in frame.columns:
        if not (
            pd.api.types.is_numeric_dtype(frame[column])
            or pd.api.types.is_bool_dtype(frame[column])
        ):
            frame[column] = frame[column].map(_unquote)
    return frame
