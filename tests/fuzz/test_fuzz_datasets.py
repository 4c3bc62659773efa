"""Property-based tests of the dataset loaders (``memprobe_core.snippets.loaders``).

For any file: the load gives snippets and named rejections that account for every row, or a
``DataError`` naming the file; never another exception (``tests/fuzz/dataset_files.py``). Where
the file's content is known, the snippets' texts are checked against an independent parse.
"""

from __future__ import annotations

import csv
import io
import json
import re
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memprobe_core.snippets.loaders import (
    SUPPORTED_EXTENSIONS,
    LoadResult,
    LoadSpec,
    load_snippets,
    load_snippets_from_bytes,
)
from memprobe_core.snippets.split import DataError
from tests.fuzz.dataset_files import (
    RAW_JSONL_LINES,
    SURROGATE,
    csv_document,
    encoded,
    hostile_text,
    jsonl_document,
    load_or_refusal,
    txt_document,
)

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

LONG_NUMBER_LINE = RAW_JSONL_LINES[0]
NESTED_REPEATED_KEY_LINE = RAW_JSONL_LINES[3]


def _snippets_by_row(result: LoadResult, filename: str) -> dict[int, str]:
    return {int(s.source.removeprefix(f"{filename} row ")): s.text for s in result.snippets}


def _same_outcome_from_disk(data: bytes, filename: str, spec: LoadSpec, expected: object) -> None:
    """A file on disk loads exactly as its bytes do (one code path for both)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / filename
        path.write_bytes(data)
        outcome = load_or_refusal(lambda: load_snippets(path, spec), filename)
    assert outcome == expected


# --- any bytes, any format ----------------------------------------------------------------------


@given(
    data=st.binary(max_size=3000),
    extension=st.sampled_from(SUPPORTED_EXTENSIONS),
    encoding=st.sampled_from(["utf-8", "latin-1", "utf-16", "utf-7", "cp1252"]),
    blocks=st.booleans(),
)
def test_any_bytes_load_or_are_refused_naming_the_file(data, extension, encoding, blocks):
    name = f"random{extension}"
    spec = LoadSpec(
        encoding="utf-8" if extension == ".parquet" else encoding,
        txt_mode="blocks" if blocks and extension == ".txt" else "file",
    )
    load_or_refusal(lambda: load_snippets_from_bytes(data, name, spec), name)


# --- JSONL --------------------------------------------------------------------------------------


@given(document=jsonl_document(), id_column=st.sampled_from([None, "id"]))
@example(document=LONG_NUMBER_LINE + "\n", id_column=None)
@example(document=NESTED_REPEATED_KEY_LINE + "\n", id_column=None)
@example(document='{"text": "t", "id": {"k": 1, "k": 2}}\n', id_column="id")
def test_jsonl_snippets_are_the_texts_of_their_rows(document, id_column):
    name = "rows.jsonl"
    data = document.encode("utf-8")
    spec = LoadSpec(id_column=id_column)
    outcome = load_or_refusal(lambda: load_snippets_from_bytes(data, name, spec), name)
    _same_outcome_from_disk(data, name, spec, outcome)
    if outcome.result is None:
        return
    # Rows are the non-blank lines; each snippet is its row's "text", parsed here independently
    # (a byte-order mark opening the file is skipped: the loader reads UTF-8 as utf-8-sig).
    rows = [line for line in document.removeprefix("\ufeff").split("\n") if line.strip()]
    assert len(outcome.result.snippets) + len(outcome.result.rejected) == len(rows)
    for row, text in _snippets_by_row(outcome.result, name).items():
        assert json.loads(rows[row - 1])["text"] == text


@given(document=jsonl_document(), data=st.data())
def test_jsonl_in_any_encoding_loads_or_is_refused(document, data):
    raw, told = data.draw(encoded(document))
    name = "encoded.jsonl"
    load_or_refusal(lambda: load_snippets_from_bytes(raw, name, LoadSpec(encoding=told)), name)


# --- CSV ----------------------------------------------------------------------------------------


@given(
    document=csv_document(),
    id_column=st.sampled_from([None, "id"]),
    label_column=st.sampled_from([None, "label"]),
)
def test_csv_snippets_are_the_texts_of_their_rows(document, id_column, label_column):
    name = "table.csv"
    data = document.encode("utf-8")
    spec = LoadSpec(id_column=id_column, label_column=label_column)
    outcome = load_or_refusal(lambda: load_snippets_from_bytes(data, name, spec), name)
    _same_outcome_from_disk(data, name, spec, outcome)
    if outcome.result is None:
        return
    records = csv.reader(io.StringIO(document, newline=""))
    header = next(records)
    rows = [record for record in records if record]  # a blank line is not a record
    assert len(outcome.result.snippets) + len(outcome.result.rejected) == len(rows)
    for row, text in _snippets_by_row(outcome.result, name).items():
        assert rows[row - 1][header.index("text")] == text


@given(document=csv_document(), data=st.data())
def test_csv_in_any_encoding_loads_or_is_refused(document, data):
    raw, told = data.draw(encoded(document))
    name = "encoded.csv"
    load_or_refusal(lambda: load_snippets_from_bytes(raw, name, LoadSpec(encoding=told)), name)


# --- TXT ----------------------------------------------------------------------------------------


def _universal_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


@given(document=txt_document(), blocks=st.booleans(), bom=st.booleans())
@example(document="\ufeffbom at the start\n\n", blocks=False, bom=False)  # skipped: utf-8-sig
def test_txt_keeps_every_word_in_order(document, blocks, bom):
    name = "notes.txt"
    data = ("\ufeff" if bom else "").encode() + document.encode("utf-8")
    spec = LoadSpec(txt_mode="blocks" if blocks else "file")
    outcome = load_or_refusal(lambda: load_snippets_from_bytes(data, name, spec), name)
    _same_outcome_from_disk(data, name, spec, outcome)
    if outcome.result is None:
        return
    # What the loader decodes: the bytes as utf-8-sig, whose one opening byte-order mark goes.
    text = _universal_newlines((("\ufeff" if bom else "") + document).removeprefix("\ufeff"))
    kept = "\n".join(s.text for s in outcome.result.snippets)
    if blocks:  # blank lines separate blocks; every word is in one, in order
        assert kept.split() == text.split()
        assert all(not re.search(r"\n[ \t]*\n", s.text) for s in outcome.result.snippets)
    elif outcome.result.snippets:  # the file is the snippet (its outer newlines dropped)
        assert kept == text.strip("\n")


@given(document=txt_document(), data=st.data(), blocks=st.booleans())
def test_txt_in_any_encoding_loads_or_is_refused(document, data, blocks):
    raw, told = data.draw(encoded(document))
    name = "encoded.txt"
    spec = LoadSpec(encoding=told, txt_mode="blocks" if blocks else "file")
    load_or_refusal(lambda: load_snippets_from_bytes(raw, name, spec), name)


# --- Parquet ------------------------------------------------------------------------------------


def _parquet_bytes(table: object) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def _invalid_utf8_strings(values: list[bytes]) -> object:
    """A string column of raw bytes, UTF-8 or not (pyarrow checks none on write or read)."""
    offsets = [0]
    for value in values:
        offsets.append(offsets[-1] + len(value))
    offset_buffer = pa.array(offsets, pa.int32()).buffers()[1]
    return pa.Array.from_buffers(
        pa.string(), len(values), [None, offset_buffer, pa.py_buffer(b"".join(values))]
    )


_storable_text = hostile_text.map(lambda text: SURROGATE.sub("?", text))
# Per arrow type, the values a column of it holds (None: a null), and how to build it.
COLUMN_KINDS: dict[str, tuple[st.SearchStrategy, Callable[[list], object]]] = {
    "string": (_storable_text, lambda v: pa.array(v, pa.string())),
    "large string": (_storable_text, lambda v: pa.array(v, pa.large_string())),
    "dictionary": (_storable_text, lambda v: pa.array(v, pa.string()).dictionary_encode()),
    "string bytes": (st.binary(max_size=6), _invalid_utf8_strings),
    "binary": (st.binary(max_size=6), lambda v: pa.array(v, pa.binary())),
    "int64": (st.integers(-(2**63), 2**63 - 1), lambda v: pa.array(v, pa.int64())),
    "float": (st.floats(), lambda v: pa.array(v, pa.float64())),
    "bool": (st.booleans(), lambda v: pa.array(v, pa.bool_())),
    "list": (st.lists(st.text(max_size=3).map(str.strip), max_size=2), pa.array),
    # Any int64 of milliseconds or days: most are far outside Python's years 1-9999.
    "timestamp": (st.integers(-(2**63) + 1, 2**63 - 1), lambda v: pa.array(v, pa.timestamp("ms"))),
    "date": (st.integers(-(2**31), 2**31 - 1), lambda v: pa.array(v, pa.date32())),
}


@st.composite
def parquet_file(draw: st.DrawFn) -> bytes:
    """A parquet file of drawn columns: names (maybe repeated), arrow types, hostile values."""
    rows = draw(st.integers(min_value=0, max_value=5))
    names = draw(st.lists(st.sampled_from(["text", "id", "label", "domain", "x"]), max_size=4))
    if draw(st.booleans()):
        names.insert(0, "text")
    arrays = []
    for _ in names:
        kind = draw(st.sampled_from(sorted(COLUMN_KINDS)))
        values, build = COLUMN_KINDS[kind]
        if kind != "string bytes":  # a raw-bytes column has no null bitmap here
            values = st.one_of(st.none(), values)
        arrays.append(build(draw(st.lists(values, min_size=rows, max_size=rows))))
    return _parquet_bytes(pa.Table.from_arrays(arrays, names=names))


@given(data=parquet_file(), id_column=st.sampled_from([None, "id"]))
@example(  # a timestamp in year 146 million: pyarrow's OverflowError escaped the loader
    data=_parquet_bytes(pa.table({"text": ["t"], "id": pa.array([2**62], pa.timestamp("ms"))})),
    id_column="id",
)
@example(  # invalid UTF-8 in a string column: the refusal said to pass an encoding
    data=_parquet_bytes(pa.table({"text": _invalid_utf8_strings([b"\xff"])})), id_column=None
)
def test_parquet_columns_of_any_type_load_or_are_refused(data, id_column):
    name = "typed.parquet"
    spec = LoadSpec(id_column=id_column)
    outcome = load_or_refusal(lambda: load_snippets_from_bytes(data, name, spec), name)
    _same_outcome_from_disk(data, name, spec, outcome)


@given(data=parquet_file(), at=st.integers(min_value=0), junk=st.binary(min_size=1, max_size=8))
def test_damaged_parquet_bytes_load_or_are_refused(data, at, junk):
    at %= len(data)
    damaged = data[:at] + junk + data[at + len(junk) :]
    load_or_refusal(lambda: load_snippets_from_bytes(damaged, "damaged.parquet"), "damaged.parquet")


# --- huge inputs: peak memory bounded ----------------------------------------------------------


def _huge_field() -> str:
    return ("word " * (8 * 2**20 // 5)).strip()  # one 8 MiB text


def _many_rows() -> bytes:
    return b"".join(b'{"text": "row %d"}\n' % i for i in range(400_000))  # ~8.7 MiB of rows


def _peak_bytes(load: Callable[[], object]) -> int:
    """The most memory Python allocated during ``load()`` (tracemalloc), above what was held."""
    tracemalloc.start()
    try:
        held = tracemalloc.get_traced_memory()[0]
        load()
        return tracemalloc.get_traced_memory()[1] - held
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("name", "build", "spec", "times"),
    [
        # Measured here (tracemalloc, 8 MiB): JSONL 2.0x (the line, then the text), .txt 1.0x,
        # blocks 2.1x. A fresh process's peak RSS for 50 MiB files (MAX_FILE_BYTES): JSONL
        # 2.6x, .txt 2.0x, parquet 4.2x (arrow's buffers: not seen by tracemalloc, not here).
        ("field.jsonl", lambda: json.dumps({"text": _huge_field()}).encode(), LoadSpec(), 5),
        ("field.txt", lambda: _huge_field().encode(), LoadSpec(), 5),
        (
            "blocks.txt",
            lambda: _huge_field().replace("word word ", "word\n\n", 1000).encode(),
            LoadSpec(txt_mode="blocks"),
            5,
        ),
        # CSV 6.0x (8.4x at 20 MiB; 6.6x RSS at 50 MiB): the csv module builds a field in a
        # buffer of 4 bytes a character, grown by doubling, before it becomes the text. Linear
        # in the file, so bounded by max_bytes.
        ("field.csv", lambda: f'text\n"{_huge_field()}"\n'.encode(), LoadSpec(), 12),
        # Rows are streamed: a load stopped by `limit` or refused past `max_snippets` holds a
        # few rows at a time, whatever the file's size (measured: 0.02 and 0.42 MiB).
        ("rows.jsonl", _many_rows, LoadSpec(limit=10), 0.25),
        ("rows.jsonl", _many_rows, LoadSpec(max_snippets=1000), 0.25),
    ],
)
def test_huge_inputs_load_in_memory_bounded_by_the_file(name, build, spec, times):
    data = build()

    def load() -> None:
        try:
            load_snippets_from_bytes(data, name, spec)
        except DataError as exc:  # the refusal past max_snippets
            assert name in str(exc)

    assert _peak_bytes(load) < times * len(data)
