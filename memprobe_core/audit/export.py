"""CSV export that is safe to open in a spreadsheet.

Snippets and model outputs are untrusted text: a cell such as ``=HYPERLINK("http://evil", "x")``
becomes a live formula when the CSV is opened in Excel or LibreOffice. Following OWASP's
"CSV Injection" advice, every **text** cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or
a carriage return gets a single quote (``'``) in front, which spreadsheets show as text. The csv
writer quotes cells with commas, quotes and newlines, so the cell cannot break out of its field.

What is *not* touched, on purpose:
- numbers stay numbers: a negative score stored as a number (``-0.25``) is written as ``-0.25``;
  only strings (and other non-numeric objects, written as their ``str``) are inspected. The same
  text ``"-0.25"`` stored as a string is neutralised, because a spreadsheet would evaluate it.
- everything else round-trips through ``pandas.read_csv`` unchanged: UTF-8 (no BOM), one header
  row, no index column, commas, double quotes, newlines and non-ASCII text intact.

Callers add manifest columns (models, ROUGE variant, α, seed) to the frame before exporting;
``Store.results_frame`` already carries them.
"""

from __future__ import annotations

import io
import numbers
from pathlib import Path
from typing import Any

import pandas as pd

from memprobe_core.errors import MemprobeError

# OWASP CSV injection: characters that make a spreadsheet treat a cell as a formula.
FORMULA_PREFIXES: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")


class ExportError(MemprobeError, OSError):
    """The CSV could not be written; the message names the path and what to do."""


def neutralize_cell(value: Any) -> Any:
    """A cell value made safe for spreadsheets (see the module docstring for the rule)."""
    if value is None or isinstance(value, (bool, numbers.Number)):
        return value
    if isinstance(value, (pd.Timestamp, pd.Timedelta)) or value is pd.NaT:
        return value
    text = value if isinstance(value, str) else str(value)
    if text.startswith(FORMULA_PREFIXES):
        return "'" + text
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


def write_safe_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write ``to_safe_csv(frame)`` to ``path`` (replacing an existing file).

    Returns:
        The path written.

    Raises:
        ExportError: the folder does not exist or cannot be written, or ``path`` is a folder.
    """
    target = Path(path).expanduser()
    if target.is_dir():
        raise ExportError(f"cannot write CSV to {target}: it is a folder; give a file name")
    if not target.parent.is_dir():
        raise ExportError(
            f"cannot write CSV to {target}: folder {target.parent} does not exist; create it or "
            "choose another path"
        )
    data = to_safe_csv(frame)
    try:
        target.write_bytes(data)
    except OSError as exc:
        raise ExportError(
            f"cannot write CSV to {target}: {exc.strerror or exc}; choose a path you can write to"
        ) from exc
    return target
