"""Load snippets from files: .txt, .jsonl, .csv and .parquet, with a column mapping.

One code path serves files on disk (:func:`load_snippets`) and dashboard uploads
(:func:`load_snippets_from_bytes`). Nothing is silently dropped: every record of the file either
becomes a :class:`~memprobe_core.snippets.split.Snippet` or is listed in :attr:`LoadResult.rejected` with
its row number and the reason. Problems with the file as a whole (unknown format, too big, too
many rows, bytes that do not decode, a column that does not exist or is named twice) raise
:class:`~memprobe_core.snippets.split.DataError` naming the file and what to do.

Files are read as a stream, one record at a time: no whole-file text, line list or list of every
row is held, so a file's rows cost memory only as the snippets they become. A file with more rows
than ``max_snippets`` (:data:`MAX_FILE_SNIPPETS`) is refused as soon as the row after the bound is
read (:class:`TooManySnippets`); ``limit=N`` stops reading once N snippets are kept.

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
import itertools
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import IO, Any, Literal

from memprobe_core.bounded import MAX_DEPTH, nesting_depth
from memprobe_core.errors import UsageError
from memprobe_core.snippets.split import MEMBER, NONMEMBER, DataError, Snippet
from memprobe_core.user_paths import check_readable, open_readable

log = logging.getLogger(__name__)

# The largest file loaded (the dashboard's upload cap reads this too).
MAX_FILE_BYTES = 50 * 1024 * 1024
# The most rows (records) a file may hold (`--max-snippets`; the dashboard's uploads too). Every
# snippet becomes methods × lengths units of seconds to minutes of model time each: the paper's
# datasets and a member/non-member benchmark hold hundreds to a few thousand snippets per
# domain, and 100,000 snippets of one method are already days of GPU time (hours on a fleet of
# endpoints). A file with more rows is nearly always the wrong file, or one to sample with
# `limit`; 100,000 rows load in about a second and make a store of tens of MB.
MAX_FILE_SNIPPETS = 100_000
SUPPORTED_EXTENSIONS: tuple[str, ...] = (".txt", ".jsonl", ".ndjson", ".csv", ".parquet")
TxtMode = Literal["file", "blocks"]
TXT_MODES: tuple[str, ...] = ("file", "blocks")

# Rejections shown by LoadResult.summary() before "... and N more".
_SUMMARY_REJECTIONS = 5
_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
# Half of a UTF-16 pair on its own (JSON's "\ud800"): not a character, no UTF-8 encoding.
_SURROGATE = re.compile("[\ud800-\udfff]")
# The csv module's longest field: as long as any file (the largest a C long holds everywhere).
_CSV_FIELD_LIMIT = 2**31 - 1
# Parquet rows converted to Python at a time.
_PARQUET_BATCH = 4096

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


class TooManySnippets(DataError):
    """A file with more rows than ``max_snippets`` allows.

    Attributes:
        source: the file name.
        max_snippets: the bound.
        rows: the file's row count where it is known without reading the rows (parquet), else
            ``None`` (the file holds more than ``max_snippets``).
        limit: the ``limit`` the load was given.
    """

    def __init__(
        self, source: str, max_snippets: int, rows: int | None = None, limit: int | None = None
    ) -> None:
        if rows is not None:
            held = f"{rows:,} rows"
        else:
            held = f"more than {max_snippets:,} row{'s' if max_snippets != 1 else ''}"
        todo = (
            f"limit={limit} asks for more snippets than that: pass a larger max_snippets"
            if limit is not None and limit > max_snippets
            else "audit a part with limit=N, or pass a larger max_snippets"
        )
        super().__init__(f"file {source!r} holds {held} (max_snippets={max_snippets}): {todo}")
        self.source, self.max_snippets, self.rows, self.limit = source, max_snippets, rows, limit

    def __reduce__(self) -> tuple[type, tuple[str, int, int | None, int | None]]:
        return (type(self), (self.source, self.max_snippets, self.rows, self.limit))


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
class LoadSpec:
    """How to read a snippet file: what :func:`load_snippets` and
    :func:`load_snippets_from_bytes` take (checked when a file is read, after its name and size).

    Attributes:
        text_column: the column (JSON key) holding the text. Not used for ``.txt``.
        id_column: the column holding unique ids; None generates ``"<stem>:<row>"``.
        domain_column: the column holding each row's domain; a row without one gets ``domain``.
        domain: the domain of every snippet without its own (``"unknown"`` when None).
        txt_mode: ``.txt`` only: ``"file"`` (the file is one snippet) or ``"blocks"`` (one
            snippet per blank-line-separated block).
        max_bytes: refuse bigger files (default :data:`MAX_FILE_BYTES`, 50 MiB).
        max_snippets: refuse a file with more rows than this (kept and rejected ones; default
            :data:`MAX_FILE_SNIPPETS`), as soon as the row after the bound is read.
        limit: stop reading once this many snippets are kept (None: read the whole file); rows
            after them are never read, so a big file's first rows load quickly.
        encoding: text encoding of ``.txt``/``.jsonl``/``.csv`` (a UTF-8 byte-order mark is
            skipped); a parquet file's text is always UTF-8.
        label_column: the column holding each row's member / non-member label (values of
            :data:`LABEL_WORDS` or :data:`MEMBER_WORDS`, any case); None looks for a column
            named ``label``, then ``member`` (any case); a file with neither is unlabelled.
        read_labels: ``False`` reads no label column at all, not even one named ``label``
            (dataset inference gives each file's texts their label itself).
    """

    text_column: str = "text"
    id_column: str | None = None
    domain_column: str | None = None
    domain: str | None = None
    txt_mode: TxtMode = "file"
    max_bytes: int = MAX_FILE_BYTES
    max_snippets: int = MAX_FILE_SNIPPETS
    limit: int | None = None
    encoding: str = "utf-8"
    label_column: str | None = None
    read_labels: bool = True

    @cached_property
    def codec(self) -> str:
        """What the text is decoded with (utf-8 as ``utf-8-sig``: a byte-order mark is skipped);
        DataError for an unknown or non-text encoding."""
        return _codec(self.encoding)

    def check(self) -> None:
        """Refuse an unknown ``txt_mode``, a bound below 1 or an unusable encoding (DataError)."""
        if self.txt_mode not in TXT_MODES:
            raise DataError(f"txt_mode {self.txt_mode!r} is unknown; use one of {list(TXT_MODES)}")
        for name, value in (("max_snippets", self.max_snippets), ("limit", self.limit)):
            if value is None and name == "limit":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DataError(f"{name}={value!r}: give a whole number of 1 or more")
        _ = self.codec  # resolved now: an unusable encoding is refused before any read


def load_snippets(path: str | Path, spec: LoadSpec | None = None) -> LoadResult:
    """Read snippets from a file; the format follows the extension.

    Args:
        path: a ``.txt``, ``.jsonl`` (or ``.ndjson``), ``.csv`` or ``.parquet`` file.
        spec: how to read it (:class:`LoadSpec`; ``None``: its defaults).

    Returns:
        The snippets and the rejected rows.

    Raises:
        DataError: missing file, unknown extension, file too big, more rows than
            ``max_snippets`` (:class:`TooManySnippets`), undecodable bytes, an encoding that is
            unknown or not a text encoding, a column that does not exist or that a CSV header
            or parquet schema names twice, a column option given for ``.txt``, ``txt_mode``
            ``"blocks"`` or an ``encoding`` that does not apply to the format, a file with no
            records, or a label value that is not allowed (the message names the row and the
            value).
    """
    spec = spec or LoadSpec()
    # A symlink loop, pipe, device, folder or /proc file is refused here (docs/security.md).
    path = check_readable(path, "file", DataError)
    _check_extension(path.name)
    size = path.stat().st_size
    # Before reading: never load a 5 GB file to refuse it.
    _check_size(path.name, size, spec.max_bytes)
    spec.check()
    return _load(lambda: open_readable(path, "file", DataError), path.name, spec)


# The names a reference corpus's errors use for the loader's arguments: the corpus's own
# options (another file's --encoding or --max-bytes never reaches a reference corpus).
CORPUS_OPTION_NAMES = ("encoding", "max_bytes", "max_texts")
_LOADER_NAME = re.compile(r"(?<![\w.-])(?:(encoding)=|(max_bytes|max_snippets)(?!\w))")
_CORPUS_NAME = {"max_bytes": "max_bytes", "max_snippets": "max_texts"}


def load_reference_corpus(
    path: Path,
    *,
    named: str,
    empty: str,
    encoding: str = "utf-8",
    max_bytes: int = MAX_FILE_BYTES,
    max_texts: int = MAX_FILE_SNIPPETS,
    options: dict[str, str] | None = None,
) -> list[Snippet]:
    """The texts of a reference corpus (DC-PDD's, divergence's): a ``.txt`` holds one text per
    blank-line-separated block; a ``.jsonl``, ``.csv`` or ``.parquet`` file one per row, in its
    ``text`` column. A corpus is texts only: no other column is read, not even one named
    ``label`` (a topic label is not a member label and must not refuse the file); a rejected
    row is left out.

    Args:
        named: how errors name the corpus (a flag or an option, and the path).
        empty: what the error says when no text is left.
        encoding / max_bytes / max_texts: how the file is read (:class:`LoadSpec`'s
            ``encoding``, ``max_bytes`` and ``max_snippets``).
        options: the names errors give those three (keys :data:`CORPUS_OPTION_NAMES`), the
            corpus's own options (``dc_pdd_encoding``, ``divergence.reference_encoding``);
            default: the argument names.

    Raises:
        UsageError: the file cannot be read, or holds no text (naming it and the corpus's own
            option that changes what was refused).
    """
    names = {name: name for name in CORPUS_OPTION_NAMES} | (options or {})
    blocks = path.suffix.lower() == ".txt"
    spec = LoadSpec(
        txt_mode="blocks" if blocks else "file",
        read_labels=False,
        encoding=encoding,
        max_bytes=max_bytes,
        max_snippets=max_texts,
    )
    try:
        loaded = load_snippets(path, spec)
    except TooManySnippets as exc:
        option = names["max_texts"]
        raise UsageError(
            f"{named}: it holds more than {exc.max_snippets:,} text(s) ({option}={max_texts}): "
            f"pass a larger {option}, or keep part of the corpus in a file of its own"
        ) from exc
    except MissingColumn as exc:
        raise UsageError(
            f"{named}: it has no column {exc.column!r} (its columns are {exc.available}); a "
            "reference corpus's texts are read from its 'text' column: name that column text"
        ) from exc
    except DataError as exc:
        # The loader names its own arguments; the corpus's options are what reach this file.
        def own(match: re.Match[str]) -> str:
            if match.group(1):
                return f"{names['encoding']}="
            return names[_CORPUS_NAME[match.group(2)]]

        raise UsageError(f"{named}: {_LOADER_NAME.sub(own, str(exc))}") from exc
    if not loaded.snippets:
        raise UsageError(
            f"{named}: {empty} ({len(loaded.rejected)} row(s) rejected); give a file of "
            "non-empty texts"
        )
    return loaded.snippets


def load_snippets_from_bytes(
    data: bytes, filename: str, spec: LoadSpec | None = None
) -> LoadResult:
    """Read snippets from the bytes of a file (a dashboard upload); see :func:`load_snippets`.

    Args:
        data: the file's content.
        filename: its name; the extension picks the format and the stem makes generated ids.
        spec: how to read it, as in :func:`load_snippets`.
    """
    spec = spec or LoadSpec()
    _check_extension(filename)
    _check_size(filename, len(data), spec.max_bytes)
    spec.check()
    return _load(lambda: io.BytesIO(data), filename, spec)  # shares the bytes: no copy


_Opener = Callable[[], IO[bytes]]  # opens the file afresh (a decode error reads it again)
# One record: (row, {field: value}), or (row, why it is rejected).
_Record = tuple[int, "dict[str, Any] | str"]
_Records = Generator[_Record, None, None]


def _load(open_file: _Opener, filename: str, opts: LoadSpec) -> LoadResult:
    ext = _check_extension(filename)
    if ext != ".txt" and opts.txt_mode != "file":
        raise DataError(
            f"txt_mode={opts.txt_mode!r} applies to .txt files only; {ext} file {filename!r} "
            f"holds one snippet per row: leave it out"
        )
    stem = _name_text(Path(filename).stem)
    keys: dict[str, None] = {}  # every column (JSON key) seen, in order of first appearance
    records: _Records
    if ext == ".txt":
        keys["text"] = None
        records = _txt_records(filename, open_file, opts)
    elif ext in (".jsonl", ".ndjson"):
        records = _jsonl_records(open_file, opts, keys)
    elif ext == ".csv":
        records = _csv_records(filename, open_file, opts, keys)
    else:
        if opts.codec != "utf-8-sig":
            raise DataError(
                f"encoding={opts.encoding!r} does not apply to .parquet file {filename!r} (parquet "
                f"stores its text as UTF-8): leave it out"
            )
        records = _parquet_records(filename, open_file, opts, keys)
    try:
        result = _to_snippets(filename, stem, records, opts, keys)
    except UnicodeError:
        raise _decode_error(filename, open_file, opts) from None
    if not result.snippets and not result.rejected:
        raise DataError(f"file {filename!r} holds no records; is it the right file?")
    log.info("%s", result.summary())
    return result


# --- checks -----------------------------------------------------------------------------------


def _codec(encoding: str) -> str:
    """The codec ``encoding`` is decoded with; DataError for one that is unknown or that is not
    a text encoding (``rot13``, ``base64``, ``bz2``: they map bytes to bytes or str to str)."""
    examples = "e.g. encoding='utf-8', encoding='latin-1' or encoding='cp1252'"
    try:
        name = codecs.lookup(encoding).name
    except (LookupError, TypeError, ValueError):
        raise DataError(
            f"encoding={encoding!r} is unknown; pass a text encoding, {examples}"
        ) from None
    try:
        io.TextIOWrapper(io.BytesIO(), encoding=encoding)  # refuses a codec that is not text
    except LookupError:
        raise DataError(
            f"encoding={encoding!r} is not a text encoding (it does not turn bytes into text); "
            f"pass a text encoding, {examples}"
        ) from None
    # utf-8-sig: Excel and Notepad write a byte-order mark that would otherwise end up in the
    # first column name or the first snippet.
    return "utf-8-sig" if name == "utf-8" else encoding


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


def _text(raw: IO[bytes], opts: LoadSpec, newline: str | None) -> io.TextIOWrapper:
    """``raw`` decoded as it is read (``UnicodeError`` at the first bad byte)."""
    return io.TextIOWrapper(raw, encoding=opts.codec, errors="strict", newline=newline)


def _decode_error(filename: str, open_file: _Opener, opts: LoadSpec) -> DataError:
    """Where the file stops decoding, for a message (read again whole: this is the error path)."""
    with open_file() as raw:
        data = raw.read()
    try:
        data.decode(opts.codec)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return DataError(
            f"file {filename!r} is not valid {opts.encoding}: byte {exc.start} (line {line}) is "
            f"{data[exc.start : exc.start + 1]!r} ({exc.reason}); pass the file's encoding, "
            f"e.g. encoding='latin-1' or encoding='cp1252'"
        )
    except UnicodeError as exc:
        return DataError(
            f"file {filename!r} cannot be read as {opts.encoding} ({exc}); pass the file's "
            f"encoding, e.g. encoding='utf-8' or encoding='latin-1'"
        )
    return DataError(f"file {filename!r} is not valid {opts.encoding}; pass the file's encoding")


class MissingColumn(DataError):
    """A file without the column a role (``text``, ``id``, ``domain``, ``label``) names."""

    def __init__(self, filename: str, role: str, column: str, available: list[str]) -> None:
        super().__init__(
            f"file {filename!r} has no {role} column {column!r}; its columns are {available}; "
            f"pass {role}_column= with one of them"
        )
        self.filename, self.role, self.column, self.available = filename, role, column, available

    def __reduce__(self) -> tuple[type, tuple[str, str, str, list[str]]]:
        return (type(self), (self.filename, self.role, self.column, self.available))


def _missing_column(filename: str, role: str, column: str, available: list[str]) -> DataError:
    return MissingColumn(filename, role, column, available)


def _check_unique_columns(filename: str, names: list[str], where: str) -> None:
    """A column named twice would silently give one of its values: refuse the file."""
    first: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        if not name.strip():  # unnamed columns (trailing commas) are never mapped
            continue
        if name in first:
            raise DataError(
                f"file {filename!r} names column {name!r} twice in its {where} (columns "
                f"{first[name]} and {position}); rename one so each column has its own name"
            )
        first[name] = position


# --- records: (row, {field: value}) or (row, Rejection reason) --------------------------------


def _txt_records(filename: str, open_file: _Opener, opts: LoadSpec) -> _Records:
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
    with open_file() as raw:
        text = _text(raw, opts, newline=None).read()  # universal newlines, as open() gives
    if opts.txt_mode == "file":
        yield 1, {"text": text.strip("\n")}
        return
    row, start = 0, 0
    for separator in itertools.chain(_BLANK_LINES.finditer(text), [None]):  # one at a time
        end = len(text) if separator is None else separator.start()
        block = text[start:end].strip("\n")
        start = len(text) if separator is None else separator.end()
        if block.strip():
            row += 1
            yield row, {"text": block}


class _Duplicated(dict[str, Any]):
    """A JSON object that named a key more than once (the key is in ``duplicated``)."""

    duplicated = ""


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) == len(pairs):
        return value
    flagged = _Duplicated(value)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            flagged.duplicated = key
            break
        seen.add(key)
    return flagged


class _NumberTooLong(ValueError):
    """A JSON integer with more digits than Python turns into an int (``sys.int_info``)."""

    def __init__(self, digits: int, limit: int) -> None:
        super().__init__(f"{digits} digits, over the limit of {limit}")
        self.digits, self.limit = digits, limit


def _json_int(literal: str) -> int:
    """``int(literal)``, refusing an integer too long for Python as :class:`_NumberTooLong`.

    Python refuses to convert more than ``sys.get_int_max_str_digits()`` digits (4,300 by
    default: a guard against quadratic-time parsing) with a bare ``ValueError`` that the JSON
    decoder lets through; named here, it rejects its row instead of failing the whole file.
    """
    limit = sys.get_int_max_str_digits()  # 0: no limit
    digits = len(literal) - literal.startswith("-")
    if limit and digits > limit:
        raise _NumberTooLong(digits, limit)
    return int(literal)


# One decoder for every line (json.loads with a hook would build one per call).
_JSON = json.JSONDecoder(object_pairs_hook=_json_object, parse_int=_json_int)


def _jsonl_records(open_file: _Opener, opts: LoadSpec, keys: dict[str, None]) -> _Records:
    row = 0
    with open_file() as raw:
        # newline="\n": lines end at "\n" only; JSON strings may hold a raw U+2028 or U+0085,
        # which splitlines() would treat as line ends (a "\r" before it is JSON whitespace).
        for line_no, line in enumerate(_text(raw, opts, newline="\n"), start=1):
            if not line.strip():
                continue
            row += 1
            # Before parsing: json recurses per level and overflows the stack (bounded.py).
            depth = nesting_depth(line)
            if depth > MAX_DEPTH:
                yield (
                    row,
                    f"line {line_no}: JSON nested {depth:,} levels deep; memprobe reads at most "
                    f"{MAX_DEPTH} levels: a row needs 1 (an object of fields)",
                )
                continue
            try:
                value = _JSON.decode(line)
            except json.JSONDecodeError as exc:
                yield row, f"line {line_no}: malformed JSON: {exc.msg} (column {exc.colno})"
                continue
            except _NumberTooLong as exc:
                yield (
                    row,
                    f"line {line_no}: a number of {exc.digits:,} digits is longer than can be "
                    f"read (at most {exc.limit:,}); write it as a string, or remove it",
                )
                continue
            if not isinstance(value, dict):
                yield row, f"line {line_no}: expected a JSON object, got {type(value).__name__}"
                continue
            if isinstance(value, _Duplicated):
                yield (
                    row,
                    f"line {line_no}: key {value.duplicated!r} appears more than once in the "
                    "object, so which value is meant is unclear; keep one",
                )
                continue
            if not value.keys() <= keys.keys():  # a column no row before had
                keys.update(dict.fromkeys(value))
            yield row, value


def _csv_records(
    filename: str, open_file: _Opener, opts: LoadSpec, keys: dict[str, None]
) -> _Records:
    # The csv module rather than pandas: it reports the line of a bad record, so one bad row is
    # rejected instead of failing the whole file, and it keeps "NA"/"null" texts as text.
    # A field may be as long as the file (JSONL has no per-field limit either): the module's
    # default limit (128 KiB) would refuse a whole file over one long text. The limit is
    # process-wide, so it is only ever raised, never put back.
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)
    with open_file() as raw:
        reader = csv.reader(_text(raw, opts, newline=""))
        try:
            header = next(reader, None)
            if header is None:
                return
            _check_unique_columns(filename, header, "header")
            _check_columns(filename, header, opts)
            keys.update(dict.fromkeys(header))
            row, end_line = 0, reader.line_num
            for fields in reader:
                start_line, end_line = end_line + 1, reader.line_num
                if not fields:  # blank line: not a record
                    continue
                row += 1
                if len(fields) != len(header):
                    yield (
                        row,
                        f"line {start_line}: {len(fields)} fields, the header has {len(header)}",
                    )
                    continue
                yield row, dict(zip(header, fields))
        except csv.Error as exc:
            raise DataError(
                f"file {filename!r}: CSV error at line {reader.line_num}: {exc}"
            ) from None


def _parquet_records(
    filename: str, open_file: _Opener, opts: LoadSpec, keys: dict[str, None]
) -> _Records:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError("reading .parquet needs pyarrow: pip install pyarrow") from None
    with open_file() as raw:
        try:
            parquet = pq.ParquetFile(raw)
            names = list(parquet.schema_arrow.names)
            rows = parquet.metadata.num_rows
        except Exception as exc:  # pyarrow raises several types for a broken file
            raise DataError(f"file {filename!r} is not a readable parquet file: {exc}") from None
        _check_unique_columns(filename, names, "schema")
        _check_columns(filename, names, opts)
        if opts.limit is None and rows > opts.max_snippets:  # known without reading a row
            raise TooManySnippets(filename, opts.max_snippets, rows=rows)
        wanted = [column for _, column in _column_roles(opts) if column is not None]
        if opts.label_column is None and opts.read_labels:  # the auto-detected one too
            wanted += [n for n in names if n.lower() in AUTO_LABEL_COLUMNS]
        wanted = list(dict.fromkeys(wanted))
        keys.update(dict.fromkeys(wanted))
        row = 0
        batches = parquet.iter_batches(batch_size=_PARQUET_BATCH, columns=wanted)
        while True:
            try:
                batch = next(batches, None)
            except Exception as exc:
                raise DataError(
                    f"file {filename!r} is not a readable parquet file: {exc}"
                ) from None
            if batch is None:
                return
            for record in _batch_rows(batch):
                row += 1
                yield row, record


def _batch_rows(batch: Any) -> list[dict[str, Any] | str]:
    """The rows of a parquet record batch as dicts, or for a row holding a value Python cannot
    hold, why it is rejected.

    A well-formed file can still hold such values: a timestamp or date outside Python's years
    1–9999 (``OverflowError`` / ``ValueError``) or a string column with invalid UTF-8 (pyarrow
    does not check it on read: ``UnicodeDecodeError``). Without this, one such value failed the
    whole file with pyarrow's exception, or with a message to pass an ``encoding`` that parquet
    does not take. The whole batch is converted at once (fast); only a batch that fails is
    converted again row by row, to name the row and the column.
    """
    try:
        rows: list[dict[str, Any] | str] = batch.to_pylist()
    except Exception:  # pyarrow raises several types (see above); each row says its own
        rows = [_row_or_reason(batch, index) for index in range(batch.num_rows)]
    return rows


def _row_or_reason(batch: Any, index: int) -> dict[str, Any] | str:
    """Row ``index`` of ``batch`` as a dict, or which column's value cannot be read."""
    record: dict[str, Any] = {}
    for name, column in zip(batch.schema.names, batch.columns):
        try:
            record[name] = column[index].as_py()
        except Exception as exc:
            return (
                f"column {name!r} ({column.type}) holds a value Python cannot read "
                f"({type(exc).__name__}: {exc}); fix or remove the row"
            )
    return record


def _column_roles(opts: LoadSpec) -> tuple[tuple[str, str | None], ...]:
    return (
        ("text", opts.text_column),
        ("id", opts.id_column),
        ("domain", opts.domain_column),
        ("label", opts.label_column),
    )


def _check_columns(filename: str, available: list[str], opts: LoadSpec) -> None:
    for role, column in _column_roles(opts):
        if column is not None and column not in available:
            raise _missing_column(filename, role, column, list(available))


# --- records to snippets ----------------------------------------------------------------------


def _to_snippets(
    filename: str, stem: str, records: _Records, opts: LoadSpec, keys: dict[str, None]
) -> LoadResult:
    """Consume ``records`` (stopping at ``opts.limit`` snippets, refusing a row past
    ``opts.max_snippets``); labels are read last, once every column of the file is known."""
    result = LoadResult(source=filename)
    first_row_of_id: dict[str, int] = {}
    # Per kept snippet, the values of the columns that may be its label (usually none).
    label_values: list[tuple[int, dict[str, Any]]] = []
    keys_seen, label_keys = 0, _label_candidates(keys, opts)
    parsed = False
    try:
        for row, record in records:
            if row > opts.max_snippets:
                raise TooManySnippets(filename, opts.max_snippets, limit=opts.limit)
            if isinstance(record, str):
                result.rejected.append(Rejection(row, record))
                continue
            parsed = True
            problem, snippet = _one_snippet(filename, stem, row, record, opts)
            if problem is None and snippet is not None:
                if snippet.id in first_row_of_id:
                    first = first_row_of_id[snippet.id]
                    problem = f"duplicate id {snippet.id!r} (first used by row {first})"
                else:
                    first_row_of_id[snippet.id] = row
                    result.snippets.append(snippet)
                    if len(keys) != keys_seen:  # a new column: maybe the label's
                        keys_seen, label_keys = len(keys), _label_candidates(keys, opts)
                    label_values.append((row, {key: record.get(key) for key in label_keys}))
                    if opts.limit is not None and len(result.snippets) >= opts.limit:
                        break
                    continue
            result.rejected.append(Rejection(row, problem or "unreadable record"))
    finally:
        records.close()  # a read stopped early closes its file now
    if parsed:  # a column no row has is a mapping mistake, not a row problem (JSONL)
        for role, column in _column_roles(opts):
            if column is not None and column not in keys:
                raise _missing_column(filename, role, column, sorted(keys))
    labels = _label_column(keys, opts)
    if labels is not None:
        result.snippets = [
            replace(snippet, label=_parse_label(filename, row, values, *labels))
            for snippet, (row, values) in zip(result.snippets, label_values)
        ]
    return result


def _label_candidates(keys: dict[str, None], opts: LoadSpec) -> list[str]:
    """The columns among ``keys`` that may be the label column (the one given, or any named
    like one of :data:`AUTO_LABEL_COLUMNS`)."""
    if not opts.read_labels:
        return []
    if opts.label_column is not None:
        return [opts.label_column]
    return [k for k in keys if isinstance(k, str) and k.strip().lower() in AUTO_LABEL_COLUMNS]


def _one_snippet(
    filename: str, stem: str, row: int, record: dict[str, Any], opts: LoadSpec
) -> tuple[str | None, Snippet | None]:
    if opts.text_column not in record:
        return f"no {opts.text_column!r} field (fields: {sorted(record)})", None
    text = record[opts.text_column]
    if text is None or (isinstance(text, float) and text != text):  # None or NaN
        return "empty text (null)", None
    if not isinstance(text, str):
        return f"text is {_type_name(text)}, expected a string", None
    if not text.strip():
        return "empty text", None
    if opts.id_column is None:
        snippet_id = f"{stem}:{row}"
    else:
        raw_id = record.get(opts.id_column)
        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
            kind = "missing" if raw_id is None else f"a {_type_name(raw_id)}"
            return f"id is {kind}; ids must be strings or integers", None
        snippet_id = str(raw_id).strip()
        if not snippet_id:
            return "empty id", None
    snippet_domain = opts.domain or "unknown"
    if opts.domain_column is not None:
        raw_domain = record.get(opts.domain_column)
        if raw_domain is not None and str(raw_domain).strip():
            snippet_domain = str(raw_domain).strip()
    for role, value in (("text", text), ("id", snippet_id), ("domain", snippet_domain)):
        problem = None if value.isascii() else _surrogate_problem(role, value)
        if problem:
            return problem, None
    source = f"{_name_text(filename)} row {row}"
    return None, Snippet(id=snippet_id, text=text, domain=snippet_domain, source=source)


def _name_text(name: str) -> str:
    r"""A file name as text that can be stored and shown: a byte that is not UTF-8 (a legal name
    on Linux, ``\xfc.jsonl``, which Python reads as a lone surrogate) as a ``\xfc`` escape.
    Generated ids and sources are built from the name; a surrogate in them rejected every row."""
    try:
        raw = os.fsencode(name)
    except UnicodeError:  # a surrogate that is no escaped byte (an uploaded name's "\ud800")
        raw = name.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "backslashreplace")


def _type_name(value: object) -> str:
    """The type of a value as a reader knows it: a JSON object whose keys repeat is read as an
    internal ``dict`` subclass (:class:`_Duplicated`), whose name means nothing to them."""
    return "dict" if isinstance(value, dict) else type(value).__name__


def _surrogate_problem(role: str, value: str) -> str | None:
    """Why ``value`` cannot be stored: it holds half of a UTF-16 pair (a JSON ``\\ud800``)."""
    found = _SURROGATE.search(value)
    if found is None:
        return None
    return (
        f"{role} holds a lone surrogate {found.group()!r} at character {found.start() + 1} (half "
        "of a UTF-16 pair, not a character: a broken \\u escape); fix or remove the row"
    )


# --- labels -----------------------------------------------------------------------------------


def _label_column(keys: dict[str, None], opts: LoadSpec) -> tuple[str, dict[str, str]] | None:
    """The column labels are read from and its vocabulary; None for an unlabelled file."""
    if not opts.read_labels:
        return None
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
