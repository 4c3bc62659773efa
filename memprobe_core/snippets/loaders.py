"""Load snippets from files: .txt, .jsonl, .csv and .parquet, with a column mapping.

One code path serves files on disk (:func:`load_snippets`) and dashboard uploads
(:func:`load_snippets_from_bytes`). Nothing is silently dropped: every record of the file either
becomes a :class:`~memprobe_core.snippets.split.Snippet` or is listed in :attr:`LoadResult.rejected` with
its row number and the reason. Problems with the file as a whole (unknown format, too big, bytes
that do not decode, a column that does not exist) raise :class:`~memprobe_core.snippets.split.DataError`
naming the file and what to do.

Rows are numbered from 1 in file order and count records only (a CSV header and blank lines are
not rows); for text formats the reasons also give the line number. Generated ids are
``"<file stem>:<row>"``.

Labels (for labelled audits: AUROC and TPR at low FPR of membership signals and methods) come
from a ``label`` column (``member`` / ``nonmember``, any case) or, failing that, a ``member``
column (``true``/``false``, ``1``/``0``, ``yes``/``no``); ``label_column=`` names another column
(either vocabulary). In a labelled file every kept row must carry an allowed value: anything else
raises :class:`~memprobe_core.snippets.split.DataError` naming the file, row and value, since a silently
unlabelled row would bias the evaluation.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import logging
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from memprobe_core.snippets.split import MEMBER, NONMEMBER, DataError, Snippet

log = logging.getLogger(__name__)

# The largest file loaded (the dashboard's upload cap reads this too).
MAX_FILE_BYTES = 50 * 1024 * 1024
SUPPORTED_EXTENSIONS: tuple[str, ...] = (".txt", ".jsonl", ".ndjson", ".csv", ".parquet")
TxtMode = Literal["file", "blocks"]
TXT_MODES: tuple[str, ...] = ("file", "blocks")

# Rejections shown by LoadResult.summary() before "... and N more".
_SUMMARY_REJECTIONS = 5
_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")

# Label vocabularies: a `label` column names the class, a `member` column says yes or no.
LABEL_WORDS: dict[str, str] = {
    "member": MEMBER,
    "nonmember": NONMEMBER,
    "non-member": NONMEMBER,
    "non_member": NONMEMBER,
}
MEMBER_WORDS: dict[str, str] = {
    "true": MEMBER,
    "1": MEMBER,
    "yes": MEMBER,
    "false": NONMEMBER,
    "0": NONMEMBER,
    "no": NONMEMBER,
}
# Column names looked for (any case) when label_column is not given, in this order.
AUTO_LABEL_COLUMNS: tuple[str, ...] = ("label", "member")


@dataclass(frozen=True)
class Rejection:
    """A record that did not become a snippet.

    Attributes:
        row: 1-based record number in the file (header and blank lines not counted).
        reason: what was wrong, e.g. ``"empty text"``.
    """

    row: int
    reason: str


@dataclass
class LoadResult:
    """What a loader found in one file.

    Attributes:
        snippets: the records that became snippets, in file order.
        rejected: every other record, with the reason.
        source: the file name (or upload name) read.
    """

    snippets: list[Snippet] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    source: str = ""

    def summary(self) -> str:
        """One line for people: ``"a.jsonl: 3 snippets (legal: 3), 1 rejected (row 2: …)"``."""
        domains: dict[str, int] = {}
        for snippet in self.snippets:
            domains[snippet.domain] = domains.get(snippet.domain, 0) + 1
        by_domain = ", ".join(f"{name}: {count}" for name, count in sorted(domains.items()))
        plural = "s" if len(self.snippets) != 1 else ""
        text = f"{self.source}: {len(self.snippets)} snippet{plural}"
        if by_domain:
            text += f" ({by_domain})"
        if not self.rejected:
            return text + ", none rejected"
        shown = "; ".join(f"row {r.row}: {r.reason}" for r in self.rejected[:_SUMMARY_REJECTIONS])
        more = len(self.rejected) - _SUMMARY_REJECTIONS
        if more > 0:
            shown += f"; … and {more} more"
        return f"{text}, {len(self.rejected)} rejected ({shown})"


@dataclass(frozen=True)
class _Options:
    text_column: str
    id_column: str | None
    domain_column: str | None
    domain: str | None
    txt_mode: str
    encoding: str
    label_column: str | None = None


def load_snippets(
    path: str | Path,
    *,
    text_column: str = "text",
    id_column: str | None = None,
    domain_column: str | None = None,
    domain: str | None = None,
    txt_mode: TxtMode = "file",
    max_bytes: int = MAX_FILE_BYTES,
    encoding: str = "utf-8",
    label_column: str | None = None,
) -> LoadResult:
    """Read snippets from a file; the format follows the extension.

    Args:
        path: a ``.txt``, ``.jsonl`` (or ``.ndjson``), ``.csv`` or ``.parquet`` file.
        text_column: the column (JSON key) holding the text. Not used for ``.txt``.
        id_column: the column holding unique ids; None generates ``"<stem>:<row>"``.
        domain_column: the column holding each row's domain; a row without one gets ``domain``.
        domain: the domain of every snippet without its own (``"unknown"`` when None).
        txt_mode: ``.txt`` only: ``"file"`` (the file is one snippet) or ``"blocks"`` (one
            snippet per blank-line-separated block).
        max_bytes: refuse bigger files (default :data:`MAX_FILE_BYTES`, 50 MiB).
        encoding: text encoding of ``.txt``/``.jsonl``/``.csv`` (a UTF-8 byte-order mark is
            skipped).
        label_column: the column holding each row's member / non-member label (values of
            :data:`LABEL_WORDS` or :data:`MEMBER_WORDS`, any case); None looks for a column
            named ``label``, then ``member`` (any case); a file with neither is unlabelled.

    Returns:
        The snippets and the rejected rows.

    Raises:
        DataError: missing file, unknown extension, file too big, undecodable bytes, a column
            that does not exist, a column option given for ``.txt``, a file with no records, or
            a label value that is not allowed (the message names the row and the value).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"file {str(path)!r} does not exist or is not a file")
    _check_extension(path.name)
    size = path.stat().st_size
    _check_size(path.name, size, max_bytes)  # before reading: never load a 5 GB file to refuse it
    return load_snippets_from_bytes(
        path.read_bytes(),
        path.name,
        text_column=text_column,
        id_column=id_column,
        domain_column=domain_column,
        domain=domain,
        txt_mode=txt_mode,
        max_bytes=max_bytes,
        encoding=encoding,
        label_column=label_column,
    )


def load_snippets_from_bytes(
    data: bytes,
    filename: str,
    *,
    text_column: str = "text",
    id_column: str | None = None,
    domain_column: str | None = None,
    domain: str | None = None,
    txt_mode: TxtMode = "file",
    max_bytes: int = MAX_FILE_BYTES,
    encoding: str = "utf-8",
    label_column: str | None = None,
) -> LoadResult:
    """Read snippets from the bytes of a file (a dashboard upload); see :func:`load_snippets`.

    Args:
        data: the file's content.
        filename: its name; the extension picks the format and the stem makes generated ids.
        text_column, id_column, domain_column, domain, txt_mode, max_bytes, encoding,
            label_column: as in :func:`load_snippets`.
    """
    ext = _check_extension(filename)
    _check_size(filename, len(data), max_bytes)
    if txt_mode not in TXT_MODES:
        raise DataError(f"txt_mode {txt_mode!r} is unknown; use one of {list(TXT_MODES)}")
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise DataError(
            f"encoding {encoding!r} is unknown; try 'utf-8', 'latin-1' or 'cp1252'"
        ) from None
    opts = _Options(text_column, id_column, domain_column, domain, txt_mode, encoding, label_column)
    stem = Path(filename).stem
    if ext == ".txt":
        records = _txt_records(filename, data, opts)
    elif ext in (".jsonl", ".ndjson"):
        records = _jsonl_records(filename, data, opts)
    elif ext == ".csv":
        records = _csv_records(filename, data, opts)
    else:
        records = _parquet_records(filename, data, opts)
    result = _to_snippets(filename, stem, records, opts)
    if not result.snippets and not result.rejected:
        raise DataError(f"file {filename!r} holds no records; is it the right file?")
    log.info("%s", result.summary())
    return result


# --- checks -----------------------------------------------------------------------------------


def _check_extension(filename: str) -> str:
    ext = Path(filename).suffix.lower()
    if ext not in SUPPORTED_EXTENSIONS:
        raise DataError(
            f"file {filename!r} has extension {ext or '(none)'!r}; supported: "
            f"{', '.join(SUPPORTED_EXTENSIONS)}"
        )
    return ext


def _check_size(filename: str, size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise DataError(
            f"file {filename!r} is {size / 2**20:.1f} MiB ({size:,} bytes); the limit is "
            f"{max_bytes / 2**20:.1f} MiB ({max_bytes:,} bytes): split the file or pass a larger "
            f"max_bytes"
        )


def _decode(filename: str, data: bytes, encoding: str) -> str:
    # utf-8-sig: Excel and Notepad write a byte-order mark that would otherwise end up in the
    # first column name or the first snippet.
    codec = "utf-8-sig" if codecs.lookup(encoding).name == "utf-8" else encoding
    try:
        return data.decode(codec)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(
            f"file {filename!r} is not valid {encoding}: byte {exc.start} (line {line}) is "
            f"{data[exc.start : exc.start + 1]!r} ({exc.reason}); pass the file's encoding, "
            f"e.g. encoding='latin-1' or encoding='cp1252'"
        ) from None


def _missing_column(filename: str, role: str, column: str, available: list[str]) -> DataError:
    return DataError(
        f"file {filename!r} has no {role} column {column!r}; its columns are {available}; "
        f"pass {role}_column= with one of them"
    )


# --- records: (row, {field: value}) or (row, Rejection reason) --------------------------------

_Record = tuple[int, "dict[str, Any] | str"]


def _txt_records(filename: str, data: bytes, opts: _Options) -> list[_Record]:
    for name, value, default in (
        ("text_column", opts.text_column, "text"),
        ("id_column", opts.id_column, None),
        ("domain_column", opts.domain_column, None),
        ("label_column", opts.label_column, None),
    ):
        if value != default:
            raise DataError(
                f"{name}={value!r} does not apply to .txt file {filename!r} (it has no columns); "
                f"use .jsonl/.csv/.parquet for columns, or leave it out"
            )
    # Universal newlines, as open() in text mode would give.
    text = _decode(filename, data, opts.encoding).replace("\r\n", "\n").replace("\r", "\n")
    if opts.txt_mode == "file":
        return [(1, {"text": text.strip("\n")})]
    blocks = [block.strip("\n") for block in _BLANK_LINES.split(text)]
    return [(row, {"text": block}) for row, block in enumerate((b for b in blocks if b.strip()), 1)]


def _jsonl_records(filename: str, data: bytes, opts: _Options) -> list[_Record]:
    text = _decode(filename, data, opts.encoding)
    records: list[_Record] = []
    keys: set[str] = set()
    # split("\n"), not splitlines(): JSON strings may hold a raw U+2028 or U+0085, which
    # splitlines() would treat as line ends.
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        row = len(records) + 1
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            records.append((row, f"line {line_no}: malformed JSON: {exc.msg} (column {exc.colno})"))
            continue
        if not isinstance(value, dict):
            got = type(value).__name__
            records.append((row, f"line {line_no}: expected a JSON object, got {got}"))
            continue
        keys.update(value)
        records.append((row, value))
    parsed = any(isinstance(rec, dict) for _, rec in records)
    if parsed:  # a column no row has is a mapping mistake, not a row problem
        for role, column in _column_roles(opts):
            if column is not None and column not in keys:
                raise _missing_column(filename, role, column, sorted(keys))
    return records


def _csv_records(filename: str, data: bytes, opts: _Options) -> list[_Record]:
    # The csv module rather than pandas: it reports the line of a bad record, so one bad row is
    # rejected instead of failing the whole file, and it keeps "NA"/"null" texts as text.
    text = _decode(filename, data, opts.encoding)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            return []
        _check_columns(filename, header, opts)
        records: list[_Record] = []
        end_line = reader.line_num
        for fields in reader:
            start_line, end_line = end_line + 1, reader.line_num
            if not fields:  # blank line: not a record
                continue
            row = len(records) + 1
            if len(fields) != len(header):
                records.append(
                    (row, f"line {start_line}: {len(fields)} fields, the header has {len(header)}")
                )
                continue
            records.append((row, dict(zip(header, fields))))
    except csv.Error as exc:
        raise DataError(f"file {filename!r}: CSV error at line {reader.line_num}: {exc}") from None
    return records


def _parquet_records(filename: str, data: bytes, opts: _Options) -> list[_Record]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError("reading .parquet needs pyarrow: pip install pyarrow") from None
    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
        names = list(parquet.schema_arrow.names)
        _check_columns(filename, names, opts)
        wanted = [column for _, column in _column_roles(opts) if column is not None]
        if opts.label_column is None:  # the auto-detected label column must be read too
            wanted += [n for n in names if n.lower() in AUTO_LABEL_COLUMNS]
        rows = parquet.read(columns=list(dict.fromkeys(wanted))).to_pylist()
    except DataError:
        raise
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise DataError(f"file {filename!r} is not a readable parquet file: {exc}") from None
    return list(enumerate(rows, start=1))


def _column_roles(opts: _Options) -> tuple[tuple[str, str | None], ...]:
    return (
        ("text", opts.text_column),
        ("id", opts.id_column),
        ("domain", opts.domain_column),
        ("label", opts.label_column),
    )


def _check_columns(filename: str, available: list[str], opts: _Options) -> None:
    for role, column in _column_roles(opts):
        if column is not None and column not in available:
            raise _missing_column(filename, role, column, list(available))


# --- records to snippets ----------------------------------------------------------------------


def _to_snippets(filename: str, stem: str, records: list[_Record], opts: _Options) -> LoadResult:
    result = LoadResult(source=filename)
    first_row_of_id: dict[str, int] = {}
    labels = _label_column(records, opts)
    for row, record in records:
        if isinstance(record, str):
            result.rejected.append(Rejection(row, record))
            continue
        problem, snippet = _one_snippet(filename, stem, row, record, opts)
        if problem is None and snippet is not None and labels is not None:
            snippet = replace(snippet, label=_parse_label(filename, row, record, *labels))
        if problem is None and snippet is not None:
            if snippet.id in first_row_of_id:
                first = first_row_of_id[snippet.id]
                problem = f"duplicate id {snippet.id!r} (first used by row {first})"
            else:
                first_row_of_id[snippet.id] = row
                result.snippets.append(snippet)
                continue
        result.rejected.append(Rejection(row, problem or "unreadable record"))
    return result


def _one_snippet(
    filename: str, stem: str, row: int, record: dict[str, Any], opts: _Options
) -> tuple[str | None, Snippet | None]:
    if opts.text_column not in record:
        return f"no {opts.text_column!r} field (fields: {sorted(record)})", None
    text = record[opts.text_column]
    if text is None or (isinstance(text, float) and text != text):  # None or NaN
        return "empty text (null)", None
    if not isinstance(text, str):
        return f"text is {type(text).__name__}, expected a string", None
    if not text.strip():
        return "empty text", None
    if opts.id_column is None:
        snippet_id = f"{stem}:{row}"
    else:
        raw_id = record.get(opts.id_column)
        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
            kind = "missing" if raw_id is None else f"a {type(raw_id).__name__}"
            return f"id is {kind}; ids must be strings or integers", None
        snippet_id = str(raw_id).strip()
        if not snippet_id:
            return "empty id", None
    snippet_domain = opts.domain or "unknown"
    if opts.domain_column is not None:
        raw_domain = record.get(opts.domain_column)
        if raw_domain is not None and str(raw_domain).strip():
            snippet_domain = str(raw_domain).strip()
    source = f"{filename} row {row}"
    return None, Snippet(id=snippet_id, text=text, domain=snippet_domain, source=source)


# --- labels -----------------------------------------------------------------------------------


def _label_column(records: list[_Record], opts: _Options) -> tuple[str, dict[str, str]] | None:
    """The column labels are read from and its vocabulary; None for an unlabelled file."""
    keys: dict[str, None] = {}
    for _, record in records:
        if isinstance(record, dict):
            keys.update(dict.fromkeys(record))
    if opts.label_column is not None:
        return opts.label_column, {**LABEL_WORDS, **MEMBER_WORDS}
    for wanted, words in zip(AUTO_LABEL_COLUMNS, (LABEL_WORDS, MEMBER_WORDS)):
        for key in keys:
            if isinstance(key, str) and key.strip().lower() == wanted:
                return key, words
    return None


def _parse_label(
    filename: str, row: int, record: dict[str, Any], column: str, words: dict[str, str]
) -> str:
    """``member`` or ``nonmember`` from one row's value (DataError for anything else)."""
    value = record.get(column)
    key: str | None
    if isinstance(value, bool):
        key = "true" if value else "false"
    elif isinstance(value, (int, float)) and value in (0, 1):  # parquet/JSON numbers
        key = str(int(value))
    elif isinstance(value, str):
        key = value.strip().lower()
    else:
        key = None
    if key is not None and key in words:
        return words[key]
    allowed = ", ".join(sorted(words))
    shown = "no value" if value is None or value == "" else f"value {value!r}"
    raise DataError(
        f"file {filename!r} row {row}: label column {column!r} has {shown}; allowed (any "
        f"case): {allowed}. Label every row, or remove the column for an unlabelled audit"
    )
