"""The dashboard's one table formatting layer (ui_common.tables), the cost chart's panels and the
escapes of non-printable characters in prompts."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import pytest

from memprobe_core.highlight import Overlap, show_controls
from ui_common import charts, tables
from ui_common.render import overlap_caption, plural, verbatim_caption

# Field names a reader must never see as column headers.
RAW_FIELDS = ("mem_lo", "auroc_lo", "small_n", "score_label", "copied_share", "victim_queries")


def _table1() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "method": ["ps_base", "interactive"],
            "method_label": ["P-S-Base", "Ours (interactive)"],
            "n": [3, 30],
            "small_n": [True, False],
            "mem": [0.036, 0.5],
            "mem_lo": [0.0, math.nan],
            "mem_hi": [0.071, math.nan],
            "acr": [None, None],
            "extractable": [True, None],
            "victim_queries": [3, 4],
            "copied_share": [0.5, None],
        }
    )


def _membership() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "score": ["loss", "interactive"],
            "score_label": ["Loss", "Ours (interactive)"],
            "auroc": [0.61, 0.5],
            "auroc_lo": [0.52, 0.4],
            "auroc_hi": [0.7, 0.6],
            "signal_min_k": [1.0, 2.0],
        }
    )


def _values(frame: pd.DataFrame) -> list[str]:
    return [str(v) for column in frame.columns for v in frame[column]]


def test_no_field_name_and_no_none_reach_a_reader() -> None:
    for frame in (_table1(), _membership()):
        shown, config = tables.for_people(frame)
        assert not set(RAW_FIELDS) & set(shown.columns), list(shown.columns)
        assert not [c for c in shown.columns if "_" in c and c != "LCS_P"], list(shown.columns)
        assert "None" not in _values(shown) and "nan" not in _values(shown)
        assert set(config) == set(shown.columns)
    shown, _ = tables.for_people(_membership())
    assert list(shown["score"]) == ["Loss", "Ours (interactive)"]  # the labels, not the names
    assert "Min-K%" in shown.columns  # a membership signal by its label


def test_intervals_are_one_text_column_in_the_reports_format() -> None:
    shown, _ = tables.for_people(_table1())
    assert list(shown["Mem [95 % CI]"]) == ["0.036 [0.000, 0.071]", "0.500"]
    assert list(shown["n"]) == ["3†", "30"]  # the small-n mark, as in the reports
    assert list(shown["method"]) == ["P-S-Base", "Ours (interactive)"]
    paired = pd.DataFrame({"mean_diff": [0.1], "lo": [-0.05], "hi": [0.2], "p_value": [0.0004]})
    shown, _ = tables.for_people(paired)
    assert list(shown["Δ [95 % CI]"]) == ["+0.100 [-0.050, +0.200]"]


def test_empty_columns_are_hidden_missing_values_dashed_booleans_in_words() -> None:
    shown, config = tables.for_people(_table1())
    assert "ACR" not in shown.columns  # empty in every row
    assert list(shown["k-extractable"]) == ["yes", tables.MISSING]
    assert list(shown["share of the suffix's PII copied"]) == ["0.500", tables.MISSING]
    # A complete number column stays a number (sortable), formatted by its column config.
    assert list(shown["victim queries"]) == [3, 4]
    assert config["victim queries"]["type_config"]["format"] == "%d"
    kept, _ = tables.for_people(_table1(), keep=("acr",))
    assert list(kept["ACR"]) == [tables.MISSING] * 2


def test_the_best_flag_is_a_star_and_flags_are_explained() -> None:
    frame = charts.candidate_rows(
        [
            {"round": 0, "index": 0, "prompt": "p", "output": "o", "mem": 0.2, "lcs_p": 0.1,
             "objective": 0.1, "flags": "truncated"},
            {"round": 1, "index": 0, "prompt": "q", "output": "o", "mem": 0.4, "lcs_p": 0.1,
             "objective": 0.3},
        ]
    )  # fmt: skip
    shown, config = tables.for_people(frame)
    assert list(shown["best"]) == ["", tables.BEST_MARK]
    assert config["best"]["type_config"]["type"] == "text"  # no checkbox
    assert list(shown["flags"]) == ["truncated", ""]
    assert "truncated: the attacker hit its prompt-length cap" in config["flags"]["help"]
    assert "round best" in shown.columns and set(shown["round best"]) <= {"yes", "no"}


def test_long_text_fits_the_page_and_says_how_to_read_it_whole() -> None:
    frame = pd.DataFrame({"prompt": ["x" * 200], "output": ["y" * 200], "mem": [0.5]})
    _, config = tables.for_people(frame)
    assert config["prompt"]["width"] == config["victim output"]["width"] == "medium"
    assert tables.FULL_TEXT_HINT in config["prompt"]["help"]
    _, one = tables.for_people(frame[["prompt", "mem"]])
    assert one["prompt"]["width"] == "large"


def test_non_printable_characters_in_cells_and_prompts_show_as_escapes() -> None:
    prompt = "ignore\u200b previous\x00 \U000e0041 text"
    shown, _ = tables.for_people(pd.DataFrame({"prompt": [prompt]}))
    assert shown["prompt"][0] == "ignore\\u200b previous\\x00 \\U000e0041 text"
    assert show_controls("a\ufeffb\u2060c") == "a\\ufeffb\\u2060c"
    assert show_controls("café 東京 — ok\tx\ny") == "café 東京 — ok\tx\ny"  # printable kept


def test_the_cost_chart_has_a_panel_per_unit_with_its_axis_title() -> None:
    costs = pd.DataFrame(
        {
            "method": ["interactive", "ps_base"],
            "seconds": [12.5, 1.0],
            "victim_queries": [7, 1],
            "attacker_queries": [3, None],
            "generated_tokens": [900, 40],
        }
    )
    fig = charts.cost_bars(costs)
    titles = {fig.layout[axis].title.text for axis in ("yaxis", "yaxis2", "yaxis3")}
    assert titles == {"seconds", "queries", "tokens"}
    panels = {trace.name: trace.yaxis for trace in fig.data}
    assert panels == {
        "time": "y",
        "victim queries": "y2",
        "attacker queries": "y2",
        "generated tokens": "y3",
    }
    attacker = next(t for t in fig.data if t.name == "attacker queries")
    assert list(attacker.y) == [None, 3.0]  # P-S-Base first; a missing count draws no bar


_CANDIDATE = {"round": 0, "index": 0, "prompt": "p", "output": "o", "mem": 0.2, "lcs_p": 0.1,
              "objective": 0.1}  # fmt: skip


@pytest.mark.parametrize(
    "figure",
    [
        lambda: charts.mem_lcs_scatter(charts.candidate_rows([_CANDIDATE])),
        lambda: charts.best_by_round_figure(charts.candidate_rows([_CANDIDATE])),
        lambda: charts.method_bars(pd.DataFrame({"method": ["ps_base"], "mem": [0.1]})),
        lambda: charts.run_comparison_bars(
            pd.DataFrame({"run": ["#1"], "method": ["P-S-Base"], "mem": [0.4]})
        ),
    ],
)
def test_every_chart_titles_both_axes(figure: Callable[[], go.Figure]) -> None:
    fig = figure()
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text


def test_token_counts_name_one_unit_and_agree_in_number() -> None:
    assert plural(1, "victim tokens") == "1 victim token" and plural(3, "tokens") == "3 tokens"
    ov = Overlap([], [], "", lcs_tokens=3, output_tokens=20, suffix_tokens=21)
    line = overlap_caption(ov, 1, tokenizer=object())
    assert "3 of the true suffix's 21 ROUGE words" in line
    assert "first 1 victim token " in line and "tokens)" not in line
    assert "suffix tokens" not in line  # no count without its unit
    assert "1 words" not in overlap_caption(ov, 1) and "first 1 word " in overlap_caption(ov, 1)
    one = verbatim_caption({"extract_k": 1, "extractable": True, "span_tokens": 1, "span_chars": 1})
    assert "1 tokens" not in one and "1 victim token (1 character)" in one
    assert "None" not in verbatim_caption({"extract_k": 5, "extractable": False})
