"""Loaders: every format round trip, column mapping, and every error path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memprobe_core.snippets.loaders import (
    MAX_FILE_BYTES,
    MAX_FILE_SNIPPETS,
    LoadResult,
    LoadSpec,
    Rejection,
    TooManySnippets,
    load_snippets,
    load_snippets_from_bytes,
)
from memprobe_core.snippets.split import DataError, Snippet

ROWS = [
    {"uid": "a", "body": "First snippet text.\nWith two lines.", "kind": "legal"},
    {"uid": "b", "body": "Second — with non-ASCII: café 東京", "kind": "code"},
    {"uid": "c", "body": "Third", "kind": ""},
]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _write_csv(path: Path, rows: list[dict]) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _write_parquet(path: Path, rows: list[dict]) -> Path:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    pd.DataFrame(rows).to_parquet(path)
    return path


WRITERS = {"jsonl": _write_jsonl, "csv": _write_csv, "parquet": _write_parquet}


def test_max_file_bytes_is_50_mib() -> None:
    assert MAX_FILE_BYTES == 50 * 1024 * 1024


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_round_trip_with_column_mapping(tmp_path: Path, fmt: str) -> None:
    path = WRITERS[fmt](tmp_path / f"set.{fmt}", ROWS)
    result = load_snippets(
        path, LoadSpec(text_column="body", id_column="uid", domain_column="kind", domain="cc")
    )
    assert result.snippets == [
        Snippet("a", ROWS[0]["body"], "legal", f"set.{fmt} row 1"),
        Snippet("b", ROWS[1]["body"], "code", f"set.{fmt} row 2"),
        Snippet("c", "Third", "cc", f"set.{fmt} row 3"),  # empty domain cell -> default domain
    ]
    assert result.rejected == [] and result.source == f"set.{fmt}"


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_generated_ids_and_default_domain(tmp_path: Path, fmt: str) -> None:
    rows = [{"text": "one"}, {"text": "two"}]
    result = load_snippets(WRITERS[fmt](tmp_path / f"my data.{fmt}", rows))
    assert [(s.id, s.text, s.domain) for s in result.snippets] == [
        ("my data:1", "one", "unknown"),
        ("my data:2", "two", "unknown"),
    ]


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_from_bytes_same_as_from_file(tmp_path: Path, fmt: str) -> None:
    path = WRITERS[fmt](tmp_path / f"up.{fmt}", ROWS)
    kwargs = {"text_column": "body", "id_column": "uid", "domain": "books"}
    assert load_snippets_from_bytes(
        path.read_bytes(), f"up.{fmt}", LoadSpec(**kwargs)
    ) == load_snippets(path, LoadSpec(**kwargs))


def test_txt_file_mode(tmp_path: Path) -> None:
    path = tmp_path / "licence.txt"
    path.write_bytes(b"\r\nLine one\r\n\r\nLine two\r\n\r\n")
    result = load_snippets(path, LoadSpec(domain="legal"))
    assert result.snippets == [
        Snippet("licence:1", "Line one\n\nLine two", "legal", "licence.txt row 1")
    ]


def test_txt_blocks_mode(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(
        "\n\nblock one\n  indented line\n\n \n\t\nblock two\n\n\nblock three\n", "utf-8"
    )
    result = load_snippets(path, LoadSpec(txt_mode="blocks"))
    assert [(s.id, s.text) for s in result.snippets] == [
        ("notes:1", "block one\n  indented line"),
        ("notes:2", "block two"),
        ("notes:3", "block three"),
    ]


def test_txt_empty_file_is_rejected_not_dropped(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("  \n\n", "utf-8")
    result = load_snippets(path)
    assert result.snippets == [] and result.rejected == [Rejection(1, "empty text")]
    assert "0 snippets" in result.summary() and "row 1: empty text" in result.summary()


def test_txt_blocks_of_nothing_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "blank.txt"
    path.write_text("\n \n", "utf-8")
    with pytest.raises(DataError, match="file 'blank.txt' holds no records"):
        load_snippets(path, LoadSpec(txt_mode="blocks"))


@pytest.mark.parametrize(
    "option", [{"id_column": "id"}, {"domain_column": "d"}, {"text_column": "body"}]
)
def test_txt_rejects_column_options(tmp_path: Path, option: dict[str, str]) -> None:
    path = tmp_path / "a.txt"
    path.write_text("hello", "utf-8")
    with pytest.raises(DataError, match=r"does not apply to \.txt file 'a.txt'"):
        load_snippets(path, LoadSpec(**option))


def test_bad_txt_mode(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="txt_mode 'lines' is unknown"):
        load_snippets_from_bytes(b"x", "a.txt", LoadSpec(txt_mode="lines"))  # type: ignore[arg-type]


def test_jsonl_every_row_accounted_for(tmp_path: Path) -> None:
    lines = [
        '{"text": "good one", "id": "x"}',
        "",  # blank line: not a record
        '{"text": "broken", "id": ',  # malformed
        '["a", "list"]',  # not an object
        '{"text": "   ", "id": "y"}',  # empty text
        '{"text": "dup", "id": "x"}',  # duplicate id
        '{"id": "z"}',  # no text field
        '{"text": null, "id": "n"}',  # null text
        '{"text": 42, "id": "num"}',  # not a string
        '{"text": "no id"}',  # missing id
        '{"text": "good two", "id": 7}',  # integer ids are fine
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    result = load_snippets(path, LoadSpec(id_column="id"))
    assert [(s.id, s.text) for s in result.snippets] == [("x", "good one"), ("7", "good two")]
    reasons = {r.row: r.reason for r in result.rejected}
    assert sorted(reasons) == [2, 3, 4, 5, 6, 7, 8, 9]
    assert reasons[2].startswith("line 3: malformed JSON: ")
    assert reasons[3] == "line 4: expected a JSON object, got list"
    assert reasons[4] == "empty text"
    assert reasons[5] == "duplicate id 'x' (first used by row 1)"
    assert reasons[6] == "no 'text' field (fields: ['id'])"
    assert reasons[7] == "empty text (null)"
    assert reasons[8] == "text is int, expected a string"
    assert reasons[9] == "id is missing; ids must be strings or integers"
    assert len(result.snippets) + len(result.rejected) == 10  # ten non-blank lines
    summary = result.summary()
    assert summary.startswith(
        "rows.jsonl: 2 snippets (unknown: 2), 8 rejected (row 2: line 3: malformed JSON"
    )
    assert summary.endswith("… and 3 more)")


def test_jsonl_unicode_line_separators_inside_strings() -> None:
    text = "para\u2028sep\x85next"
    data = (json.dumps({"text": text}, ensure_ascii=False) + "\r\n").encode("utf-8")
    result = load_snippets_from_bytes(data, "u.jsonl")
    assert [s.text for s in result.snippets] == [text] and result.rejected == []


def test_csv_bad_rows_and_quoted_newlines(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('text,id\n"multi\nline",a\n\nNA,b\nx,c,extra\n,d\nnull,a\n', "utf-8")
    result = load_snippets(path, LoadSpec(id_column="id"))
    # "NA" and "null" are texts, not missing values.
    assert [(s.id, s.text) for s in result.snippets] == [("a", "multi\nline"), ("b", "NA")]
    assert result.rejected == [
        Rejection(3, "line 6: 3 fields, the header has 2"),
        Rejection(4, "empty text"),
        Rejection(5, "duplicate id 'a' (first used by row 1)"),
    ]


def test_csv_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufefftext\nhello\n".encode())
    assert [s.text for s in load_snippets(path).snippets] == ["hello"]


def test_csv_header_only_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("text,id\n", "utf-8")
    with pytest.raises(DataError, match="holds no records"):
        load_snippets(path)


def test_parquet_nulls_and_types(tmp_path: Path) -> None:
    rows = [
        {"text": "ok", "id": 1},
        {"text": None, "id": 2},
        {"text": "", "id": 3},
        {"text": "dup", "id": 1},
    ]
    result = load_snippets(_write_parquet(tmp_path / "p.parquet", rows), LoadSpec(id_column="id"))
    assert [(s.id, s.text) for s in result.snippets] == [("1", "ok")]
    assert result.rejected == [
        Rejection(2, "empty text (null)"),
        Rejection(3, "empty text"),
        Rejection(4, "duplicate id '1' (first used by row 1)"),
    ]


def test_parquet_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"this is not parquet at all")
    with pytest.raises(DataError, match="file 'bad.parquet' is not a readable parquet file"):
        load_snippets(path)


@pytest.mark.parametrize("fmt", sorted(WRITERS))
@pytest.mark.parametrize(
    ("option", "role", "column"),
    [
        ({"text_column": "content"}, "text", "content"),
        ({"id_column": "key"}, "id", "key"),
        ({"domain_column": "area"}, "domain", "area"),
    ],
)
def test_missing_column_names_column_and_columns(
    tmp_path: Path, fmt: str, option: dict, role: str, column: str
) -> None:
    path = WRITERS[fmt](tmp_path / f"m.{fmt}", [{"text": "a", "id": "1"}])
    with pytest.raises(DataError) as info:
        load_snippets(path, LoadSpec(**option))
    message = str(info.value)
    assert f"file 'm.{fmt}' has no {role} column '{column}'" in message
    assert "['text', 'id']" in message or "['id', 'text']" in message
    assert f"pass {role}_column=" in message


@pytest.mark.parametrize("name", ["u.txt", "u.jsonl", "u.csv"])
def test_undecodable_bytes(name: str) -> None:
    data = b'text\n"caf\xe9"\n' if name.endswith(".csv") else b'{"text": "caf\xe9"}\n'
    with pytest.raises(DataError) as info:
        load_snippets_from_bytes(data, name)
    message = str(info.value)
    offset = data.index(b"\xe9")
    assert f"file '{name}' is not valid utf-8: byte {offset} (line" in message
    assert "encoding='latin-1'" in message
    # ...and the suggestion works.
    result = load_snippets_from_bytes(data, name, LoadSpec(encoding="latin-1"))
    assert "café" in result.snippets[0].text


@pytest.mark.parametrize("name", ["far.jsonl", "far.csv", "far.txt"])
def test_undecodable_byte_far_into_a_streamed_file_is_placed_exactly(name: str) -> None:
    # Files are decoded as they are read; the message still gives the byte and line in the file.
    head = b"text\n" if name.endswith(".csv") else b""
    row = b'"fine"\n' if name.endswith(".csv") else b'{"text": "fine"}\n'
    data = head + row * 20_000 + b'{"text": "caf\xe9"}\n'
    with pytest.raises(DataError) as info:
        load_snippets_from_bytes(data, name)
    bad = b"\xe9"
    offset, line = data.index(bad), data.count(b"\n")
    assert f"byte {offset} (line {line}) is {bad!r}" in str(info.value)


def test_unknown_encoding() -> None:
    with pytest.raises(DataError, match="encoding='utf-99' is unknown; pass a text encoding"):
        load_snippets_from_bytes(b"x", "a.txt", LoadSpec(encoding="utf-99"))


@pytest.mark.parametrize("codec", ["rot13", "base64", "bz2", "zlib", "hex"])
@pytest.mark.parametrize("name", ["a.txt", "a.jsonl", "a.csv"])
def test_codec_that_is_not_a_text_encoding_is_a_data_error(codec: str, name: str) -> None:
    # These codecs exist (codecs.lookup finds them) but map bytes to bytes or str to str:
    # decoding with them raised a bare LookupError.
    with pytest.raises(DataError) as info:
        load_snippets_from_bytes(b'{"text": "a"}\n', name, LoadSpec(encoding=codec))
    assert str(info.value) == (
        f"encoding={codec!r} is not a text encoding (it does not turn bytes into text); pass a "
        "text encoding, e.g. encoding='utf-8', encoding='latin-1' or encoding='cp1252'"
    )


def test_file_over_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 3 * 2**20)
    with pytest.raises(DataError) as info:
        load_snippets(path, LoadSpec(max_bytes=2 * 2**20))
    assert str(info.value) == (
        "file 'big.txt' is 3.0 MiB (3,145,728 bytes); the limit is 2.0 MiB (2,097,152 bytes): "
        "split the file or pass a larger max_bytes"
    )
    with pytest.raises(DataError, match="is 3.0 MiB"):
        load_snippets_from_bytes(path.read_bytes(), "big.txt", LoadSpec(max_bytes=2 * 2**20))


@pytest.mark.parametrize("name", ["data.xlsx", "data", "data.json"])
def test_unknown_extension_lists_supported(name: str) -> None:
    with pytest.raises(DataError) as info:
        load_snippets_from_bytes(b"x", name)
    assert f"file '{name}' has extension" in str(info.value)
    assert ".txt, .jsonl, .ndjson, .csv, .parquet" in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load_snippets(tmp_path / "nope.jsonl")


def test_extension_is_case_insensitive(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "UP.JSONL", [{"text": "t"}])
    assert load_snippets(path).snippets[0].id == "UP:1"


def test_summary_without_rejections() -> None:
    result = LoadResult(snippets=[Snippet("a", "t", "legal")], source="s.jsonl")
    assert result.summary() == "s.jsonl: 1 snippet (legal: 1), none rejected"


# --- member / non-member labels ---------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_label_column_any_case(tmp_path: Path, fmt: str) -> None:
    rows = [
        {"text": "one", "label": "member"},
        {"text": "two", "label": "NonMember"},
        {"text": "three", "label": " MEMBER "},
    ]
    result = load_snippets(WRITERS[fmt](tmp_path / f"l.{fmt}", rows))
    assert [s.label for s in result.snippets] == ["member", "nonmember", "member"]


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_member_column_booleans(tmp_path: Path, fmt: str) -> None:
    values = ["true", "False", "1", "0", "YES", "no"]
    rows = [{"text": f"t{i}", "Member": v} for i, v in enumerate(values)]
    result = load_snippets(WRITERS[fmt](tmp_path / f"m.{fmt}", rows))
    expected = ["member", "nonmember"] * 3
    assert [s.label for s in result.snippets] == expected


def test_member_column_json_booleans_and_numbers(tmp_path: Path) -> None:
    rows = [{"text": "a", "member": True}, {"text": "b", "member": 0}, {"text": "c", "member": 1}]
    result = load_snippets(_write_jsonl(tmp_path / "b.jsonl", rows))
    assert [s.label for s in result.snippets] == ["member", "nonmember", "member"]


def test_unlabelled_file_keeps_label_none(tmp_path: Path) -> None:
    result = load_snippets(_write_jsonl(tmp_path / "u.jsonl", [{"text": "a", "kind": "x"}]))
    assert result.snippets[0].label is None


def test_label_column_wins_over_member_column(tmp_path: Path) -> None:
    rows = [{"text": "a", "label": "nonmember", "member": "yes"}]
    assert load_snippets(_write_csv(tmp_path / "w.csv", rows)).snippets[0].label == "nonmember"


def test_named_label_column_takes_either_vocabulary(tmp_path: Path) -> None:
    rows = [{"text": "a", "seen": "yes"}, {"text": "b", "seen": "nonmember"}]
    path = _write_csv(tmp_path / "n.csv", rows)
    assert [s.label for s in load_snippets(path, LoadSpec(label_column="seen")).snippets] == [
        "member",
        "nonmember",
    ]
    with pytest.raises(DataError, match="has no label column 'in_training'"):
        load_snippets(path, LoadSpec(label_column="in_training"))


@pytest.mark.parametrize(
    ("column", "value", "shown", "allowed"),
    [
        ("label", "maybe", "value 'maybe'", "member, non-member, non_member, nonmember"),
        ("label", "", "no value", "member, non-member"),
        ("member", "2", "value '2'", "0, 1, false, no, true, yes"),
        ("member", "member", "value 'member'", "0, 1, false, no, true, yes"),
    ],
)
def test_bad_label_names_file_row_value_and_what_is_allowed(
    tmp_path: Path, column: str, value: str, shown: str, allowed: str
) -> None:
    rows = [{"text": "fine", column: "1" if column == "member" else "member"}]
    rows.append({"text": "second", column: value})
    path = _write_csv(tmp_path / "bad.csv", rows)
    with pytest.raises(DataError) as info:
        load_snippets(path)
    message = str(info.value)
    assert f"file 'bad.csv' row 2: label column {column!r} has {shown}" in message
    assert f"allowed (any case): {allowed}" in message


def test_missing_label_in_a_labelled_jsonl_is_an_error(tmp_path: Path) -> None:
    rows = [{"text": "a", "label": "member"}, {"text": "b"}]
    with pytest.raises(DataError, match="row 2: label column 'label' has no value"):
        load_snippets(_write_jsonl(tmp_path / "gap.jsonl", rows))


def test_rejected_rows_are_not_label_checked(tmp_path: Path) -> None:
    rows = [{"text": "a", "label": "member"}, {"text": "  ", "label": "???"}]
    result = load_snippets(_write_jsonl(tmp_path / "r.jsonl", rows))
    assert [s.label for s in result.snippets] == ["member"]
    assert result.rejected == [Rejection(2, "empty text")]


def test_txt_rejects_label_column(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("hello", "utf-8")
    with pytest.raises(DataError, match=r"label_column='label' does not apply to \.txt"):
        load_snippets(path, LoadSpec(label_column="label"))


def test_label_column_first_seen_after_unlabelled_rows_is_an_error(tmp_path: Path) -> None:
    # Rows are read one at a time: the label column is only known once a row has it, yet an
    # earlier row without a label is still refused (labels are read when the file is done).
    rows = [{"text": "a"}, {"text": "b", "label": "member"}]
    with pytest.raises(DataError, match="row 1: label column 'label' has no value"):
        load_snippets(_write_jsonl(tmp_path / "late.jsonl", rows))


# --- many rows: --max-snippets and --limit ----------------------------------------------------


def _many(tmp_path: Path, fmt: str, count: int) -> Path:
    rows = [{"text": f"snippet {i}"} for i in range(count)]
    if fmt == "txt":
        path = tmp_path / "many.txt"
        path.write_text("\n\n".join(r["text"] for r in rows), "utf-8")
        return path
    return WRITERS[fmt](tmp_path / f"many.{fmt}", rows)


def test_max_file_snippets_default() -> None:
    assert MAX_FILE_SNIPPETS == 100_000


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "txt", "parquet"])
def test_more_rows_than_max_snippets_is_refused(tmp_path: Path, fmt: str) -> None:
    path = _many(tmp_path, fmt, 30)
    kwargs = {"txt_mode": "blocks"} if fmt == "txt" else {}
    with pytest.raises(TooManySnippets) as info:
        load_snippets(path, LoadSpec(max_snippets=10, **kwargs))
    held = "30 rows" if fmt == "parquet" else "more than 10 rows"  # parquet knows its count
    assert str(info.value) == (
        f"file 'many.{fmt}' holds {held} (max_snippets=10): audit a part with limit=N, or pass "
        "a larger max_snippets"
    )
    assert isinstance(info.value, DataError)
    assert (
        len(load_snippets(path, LoadSpec(max_snippets=30, **kwargs)).snippets) == 30
    )  # the bound is ok


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "txt", "parquet"])
def test_limit_under_the_bound_loads_the_first_rows_of_a_big_file(tmp_path: Path, fmt: str) -> None:
    path = _many(tmp_path, fmt, 30)
    kwargs = {"txt_mode": "blocks"} if fmt == "txt" else {}
    result = load_snippets(path, LoadSpec(max_snippets=10, limit=4, **kwargs))
    assert [s.text for s in result.snippets] == [f"snippet {i}" for i in range(4)]


def test_limit_counts_snippets_and_keeps_the_rejections_before_them(tmp_path: Path) -> None:
    rows = [{"text": ""}, {"text": "a"}, {"text": " "}, {"text": "b"}, {"text": "c"}]
    result = load_snippets(_write_jsonl(tmp_path / "l.jsonl", rows), LoadSpec(limit=2))
    assert [s.text for s in result.snippets] == ["a", "b"]
    assert [r.row for r in result.rejected] == [1, 3]


def test_limit_stops_reading_so_later_rows_are_never_checked(tmp_path: Path) -> None:
    # The bad label in row 3 would stop a whole read; with limit=2 that row is never read.
    rows = [{"text": "a", "label": "member"}, {"text": "b", "label": "nonmember"}]
    rows.append({"text": "c", "label": "perhaps"})
    path = _write_jsonl(tmp_path / "lab.jsonl", rows)
    assert [s.label for s in load_snippets(path, LoadSpec(limit=2)).snippets] == [
        "member",
        "nonmember",
    ]
    with pytest.raises(DataError, match="row 3"):
        load_snippets(path)


def test_limit_over_the_bound_says_to_raise_the_bound(tmp_path: Path) -> None:
    with pytest.raises(TooManySnippets, match=r"limit=50 asks for more snippets than that"):
        load_snippets(_many(tmp_path, "jsonl", 30), LoadSpec(max_snippets=10, limit=50))


@pytest.mark.parametrize(
    "option", [{"max_snippets": 0}, {"max_snippets": None}, {"limit": 0}, {"limit": True}]
)
def test_bad_max_snippets_or_limit(option: dict) -> None:
    with pytest.raises(DataError, match="give a whole number of 1 or more"):
        load_snippets_from_bytes(b'{"text": "a"}\n', "a.jsonl", LoadSpec(**option))


def test_too_many_snippets_pickles() -> None:
    import pickle

    error = TooManySnippets("a.jsonl", 10, rows=12, limit=None)
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) and (again.rows, again.max_snippets) == (12, 10)


@pytest.mark.parametrize("from_bytes", [False, True])
def test_refusal_reads_a_stream_not_the_whole_file(tmp_path: Path, from_bytes: bool) -> None:
    # 300,000 tiny rows (~7 MB): refused after row 1,001 with a few hundred kB allocated; the
    # old loader decoded the whole file, split it into a list of lines and parsed every row
    # (hundreds of MB) before counting anything.
    import tracemalloc

    path = tmp_path / "tiny.jsonl"
    path.write_text("".join(f'{{"text": "t{i}"}}\n' for i in range(300_000)), "utf-8")
    data = path.read_bytes() if from_bytes else b""
    tracemalloc.start()
    try:
        with pytest.raises(TooManySnippets):
            if from_bytes:
                load_snippets_from_bytes(data, "tiny.jsonl", LoadSpec(max_snippets=1000))
            else:
                load_snippets(path, LoadSpec(max_snippets=1000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * 2**20, f"peak {peak:,} bytes"


# --- one long field: CSV as JSONL -------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_a_250_kb_field_loads_in_every_format(tmp_path: Path, fmt: str) -> None:
    # The csv module's default field limit (128 KiB) refused the whole CSV file over one long
    # text that JSONL and parquet loaded: each format loads it now, with the other rows.
    long_text = "word " * 50_000  # 250,000 characters
    rows = [{"text": "short one"}, {"text": long_text}, {"text": "short two"}]
    result = load_snippets(WRITERS[fmt](tmp_path / f"long.{fmt}", rows))
    assert [s.text for s in result.snippets] == ["short one", long_text, "short two"]
    assert result.rejected == []


def test_csv_long_field_row_with_a_bad_shape_is_rejected_on_its_own(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_text(f"text,id\nfine,a\n{'x' * 250_000},b,extra\nalso fine,c\n", "utf-8")
    result = load_snippets(path, LoadSpec(id_column="id"))
    assert [s.id for s in result.snippets] == ["a", "c"]
    assert result.rejected == [Rejection(2, "line 3: 3 fields, the header has 2")]


# --- lone surrogates --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "role"),
    [
        ('{"text": "half \\ud800 a pair", "id": "b"}', "text"),
        ('{"text": "fine", "id": "b\\udc00"}', "id"),
        ('{"text": "fine", "id": "b", "kind": "\\udfff"}', "domain"),
    ],
)
def test_lone_surrogate_escape_rejects_its_row(tmp_path: Path, line: str, role: str) -> None:
    path = tmp_path / "s.jsonl"
    first = '{"text": "first", "id": "a", "kind": "legal"}\n'
    path.write_text(first + line + '\n{"text": "third", "id": "c"}\n', "utf-8")
    result = load_snippets(path, LoadSpec(id_column="id", domain_column="kind"))
    assert [s.id for s in result.snippets] == ["a", "c"]
    ((rejected_row, reason),) = [(r.row, r.reason) for r in result.rejected]
    assert rejected_row == 2
    assert reason.startswith(f"{role} holds a lone surrogate '\\u")
    assert reason.endswith("fix or remove the row")
    for snippet in result.snippets:  # what is kept can be stored (UTF-8)
        (snippet.text + snippet.id + snippet.domain).encode("utf-8")


def test_a_valid_surrogate_pair_escape_is_a_character(tmp_path: Path) -> None:
    path = tmp_path / "pair.jsonl"
    path.write_text('{"text": "emoji \\ud83d\\ude00"}\n')
    assert load_snippets(path).snippets[0].text == "emoji \U0001f600"


# --- a column named twice ---------------------------------------------------------------------


def test_csv_header_naming_a_column_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("id,text,text\n1,first,second\n", "utf-8")
    with pytest.raises(DataError) as info:
        load_snippets(path)
    assert str(info.value) == (
        "file 'dup.csv' names column 'text' twice in its header (columns 2 and 3); rename one "
        "so each column has its own name"
    )


def test_csv_unnamed_columns_may_repeat(tmp_path: Path) -> None:
    path = tmp_path / "trailing.csv"
    path.write_text("text,,\nhello,,\n", "utf-8")  # a spreadsheet's trailing empty columns
    assert [s.text for s in load_snippets(path).snippets] == ["hello"]


def test_parquet_schema_naming_a_column_twice_is_refused(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"])], names=["text", "text"])
    pq.write_table(table, tmp_path / "dup.parquet")
    with pytest.raises(DataError, match="names column 'text' twice in its schema"):
        load_snippets(tmp_path / "dup.parquet")


def test_jsonl_object_naming_a_key_twice_rejects_its_row(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    lines = ['{"text": "one"}', '{"text": "two", "text": "other"}', '{"text": "three"}']
    path.write_text("\n".join(lines) + "\n", "utf-8")
    result = load_snippets(path)
    assert [s.text for s in result.snippets] == ["one", "three"]
    assert result.rejected == [
        Rejection(
            2,
            "line 2: key 'text' appears more than once in the object, so which value is meant "
            "is unclear; keep one",
        )
    ]


# --- options that do not apply ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["a.jsonl", "a.csv", "a.parquet"])
def test_txt_mode_blocks_is_refused_for_a_file_with_rows(name: str) -> None:
    with pytest.raises(DataError) as info:
        load_snippets_from_bytes(b"x", name, LoadSpec(txt_mode="blocks"))
    assert str(info.value).startswith("txt_mode='blocks' applies to .txt files only; ")
    assert f"file {name!r}" in str(info.value) and "leave it out" in str(info.value)


def test_encoding_is_refused_for_parquet(tmp_path: Path) -> None:
    path = _write_parquet(tmp_path / "p.parquet", [{"text": "a"}])
    with pytest.raises(DataError, match=r"encoding='latin-1' does not apply to \.parquet file"):
        load_snippets(path, LoadSpec(encoding="latin-1"))
    assert load_snippets(path, LoadSpec(encoding="UTF-8")).snippets[0].text == "a"


def test_jsonl_nested_too_deeply_rejects_its_row() -> None:
    # json raises RecursionError (not a JSONDecodeError) for 100,000 nested brackets; the depth
    # is found before parsing (memprobe_core.bounded), brackets inside strings not counted.
    data = b'{"text": "a"}\n' + b"[" * 100_000 + b"\n" + b'{"text": "b ' + b"[" * 100 + b'"}\n'
    result = load_snippets_from_bytes(data, "deep.jsonl")
    assert [s.text for s in result.snippets] == ["a", "b " + "[" * 100]
    assert result.rejected == [
        Rejection(
            2,
            "line 2: JSON nested 100,000 levels deep; memprobe reads at most 64 levels: a row "
            "needs 1 (an object of fields)",
        )
    ]


def test_a_file_name_that_is_not_utf8_makes_ids_with_its_bytes_escaped(tmp_path: Path) -> None:
    # A legal Linux name (Latin-1 "ü"): Python reads the byte as a lone surrogate, "\udcfc",
    # which every generated id held, so every row was rejected ("id holds a lone surrogate").
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/\xfc.jsonl")
    loaded = load_snippets(_write_jsonl(Path(name), [{"text": "one"}, {"text": "two"}]))
    assert not loaded.rejected
    assert [s.id for s in loaded.snippets] == ["\\xfc:1", "\\xfc:2"]
    for snippet in loaded.snippets:  # stored as UTF-8 text by the run store
        snippet.id.encode("utf-8")
        snippet.source.encode("utf-8")
    assert loaded.snippets[0].source.endswith("\\xfc.jsonl row 1")
    # An uploaded name with a surrogate that is no escaped byte.
    uploaded = load_snippets_from_bytes(b'{"text": "one"}\n', "\ud800.jsonl")
    assert not uploaded.rejected and uploaded.snippets[0].id == "\\xed\\xa0\\x80:1"


def test_a_row_with_a_number_longer_than_python_reads_is_a_rejected_row(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "one"}\n{"text": "two", "n": ' + "9" * 5000 + "}\n")
    loaded = load_snippets(path)
    assert [s.text for s in loaded.snippets] == ["one"]
    assert [(r.row, r.reason[:42]) for r in loaded.rejected] == [
        (2, "line 2: a number of 5,000 digits is longer")
    ]
