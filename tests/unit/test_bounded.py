"""``memprobe_core.bounded``: the depth and size of outside JSON and TOML, found before parsing."""

from __future__ import annotations

import json
import tomllib

import pytest

from memprobe_core.bounded import (
    MAX_DEPTH,
    InputTooLargeError,
    NestingError,
    NumberTooLongError,
    loads_json,
    loads_toml,
    nesting_depth,
    value_depth,
)
from memprobe_core.errors import MemprobeError

NEEDS = "a test input needs 2"


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ("{}", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('{"a": "[[[[[[", "b": "\\"[[["}', 1),  # brackets in strings, escaped quotes
        ('["]]]]", [[]]]', 3),
        ("[" * 5000, 5000),  # unclosed: counted as far as it reads
    ],
)
def test_json_depth_skips_strings(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth == nesting_depth(text.encode())


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("[limits]\nmax_auroc = { loss = 0.6 }\n", 1),
        ("a = [[1], [2]]\n", 2),
        ('a = \'[[[[\'\nb = "[[[\\"[["\nc = [1]  # [[[[[\n', 1),
        ('a = """\n[[[[ \\""" [[[\n"""\nb = \'\'\'[[[[\'\'\'\n', 0),
        ("[[fruits]]\nname = 'x'\n", 2),
    ],
)
def test_toml_depth_skips_strings_and_comments(text: str, depth: int) -> None:
    tomllib.loads(text)  # each is valid TOML
    assert nesting_depth(text, "toml") == depth


def test_the_hostile_inputs_are_refused_before_the_parser_recurses() -> None:
    arrays = "max_mean_mem = " + "[" * 1000 + "]" * 1000 + "\n"
    tables = "max_mean_mem = " + "{a=" * 2000 + "1" + "}" * 2000 + "\n"
    for text, depth in ((arrays, 1000), (tables, 2000)):
        with pytest.raises(RecursionError):
            tomllib.loads(text)  # what the check is for
        with pytest.raises(NestingError) as info:
            loads_toml(text, "p.toml", needs=NEEDS, max_bytes=10**6)
        assert str(info.value) == (
            f"p.toml nests {depth:,} levels deep; memprobe reads at most {MAX_DEPTH} levels: "
            f"{NEEDS}"
        )
        assert isinstance(info.value, MemprobeError)
    with pytest.raises(NestingError, match="nests 1,000 levels deep"):
        loads_json("[" * 1000 + "]" * 1000, "answer", needs=NEEDS, max_bytes=10**6)


def test_dotted_keys_nest_without_brackets_and_are_refused_too() -> None:
    # tomllib reads them without recursion, but the value is as deep (its repr overflows).
    text = "[limits]\nmax_auroc." + ".".join(f"k{i}" for i in range(200)) + " = 1\n"
    assert nesting_depth(text, "toml") == 1
    with pytest.raises(NestingError, match="nests 201 levels deep"):
        loads_toml(text, "p.toml", needs=NEEDS, max_bytes=10**6)


def test_the_limit_is_inclusive() -> None:
    at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert value_depth(loads_json(at_limit, "x", needs=NEEDS, max_bytes=10**6)) == MAX_DEPTH
    with pytest.raises(NestingError, match=f"nests {MAX_DEPTH + 1} levels"):
        loads_json("[" + at_limit + "]", "x", needs=NEEDS, max_bytes=10**6)
    toml_at_limit = "a = " + "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert loads_toml(toml_at_limit, "x", needs=NEEDS, max_bytes=10**6)["a"]


def test_size_is_checked_before_parsing() -> None:
    with pytest.raises(InputTooLargeError) as info:
        loads_json('"' + "x" * 100 + '"', "answer", needs=NEEDS, max_bytes=50)
    assert str(info.value) == f"answer is 102 bytes; memprobe reads at most 50 bytes: {NEEDS}"
    with pytest.raises(InputTooLargeError, match="reads at most 10 bytes"):
        loads_toml("a = 'é' # 12 bytes", "p.toml", needs=NEEDS, max_bytes=10)


def test_value_depth_counts_without_recursion() -> None:
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert value_depth(deep) == 100_001
    assert value_depth({"a": [1, {"b": "c"}]}) == 3 and value_depth("text") == 0


def test_malformed_json_is_left_to_the_parser() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads_json('{"a": [1, 2', "x", needs=NEEDS, max_bytes=100)


def test_a_multi_line_string_ending_in_quotes_hides_no_brackets() -> None:
    # Found by trying to fool the scan: '''x'''' holds "x'"; a scan that closed the string at
    # the first three quotes took the fourth for the start of a string over the real brackets.
    text = "a = [''''x'''', " + "[" * 2000 + "]" * 2000 + ", 'y']\n"
    assert nesting_depth(text, "toml") == 2001
    with pytest.raises(NestingError, match="nests 2,001 levels deep"):
        loads_toml(text, "p.toml", needs=NEEDS, max_bytes=10**6)
    assert nesting_depth('a = """x"""""\nb = [[1]]\n', "toml") == 2


def test_a_level_the_scan_misses_is_still_the_inputs_fault(monkeypatch) -> None:
    import memprobe_core.bounded as bounded

    monkeypatch.setattr(bounded, "nesting_depth", lambda text, syntax="json": 0)
    for load in (loads_toml, loads_json):
        with pytest.raises(NestingError) as info:
            load(
                ("a = " if load is loads_toml else "") + "[" * 5000,
                "p",
                needs=NEEDS,
                max_bytes=10**6,
            )
        assert str(info.value) == (
            f"p nests deeper than Python's parser reads; memprobe reads at most 64 levels: {NEEDS}"
        )


def test_a_number_longer_than_python_reads_names_the_input_line_and_key() -> None:
    # Python refuses integers of more than 4,300 digits with a bare ValueError naming neither.
    big = "9" * 5000
    with pytest.raises(NumberTooLongError) as toml_error:
        loads_toml(f"[limits]\nmax_pii_copied = {big}\n", "p.toml", needs="2", max_bytes=10**6)
    assert str(toml_error.value) == (
        "p.toml line 2: max_pii_copied = a number of 5,000 digits; memprobe reads at most "
        "4,300: write a smaller number"
    )
    with pytest.raises(NumberTooLongError, match=r"^a\.json line 2: a number of 5,000 digits"):
        loads_json(f'{{"x":\n{big}}}', "a.json", needs="1", max_bytes=10**6)
    with pytest.raises(tomllib.TOMLDecodeError):  # other errors stay the parser's
        loads_toml("a = = 1", "p.toml", needs="2", max_bytes=10**6)
