"""Dashboard tables and figures built from candidates and results (no Streamlit)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from memprobe_core.attacks.result import Candidate
from ui_common import charts


def _cands() -> list[Candidate]:
    return [
        Candidate(0, 0, "p0", "o0", 0.2, 0.1, 0.0),
        Candidate(1, 0, "p1", "o1", 0.5, 0.1, 0.3, is_round_best=True),
        Candidate(1, 1, "", "", 0.0, 0.0, 0.9, flags=["empty"]),
        Candidate(2, 0, "p3", "o3", 0.4, 0.2, 0.3),
    ]


def test_candidate_rows_mark_the_first_best_non_empty_candidate() -> None:
    frame = charts.candidate_rows(_cands())
    assert list(frame.columns) == charts.CANDIDATE_COLUMNS
    assert frame["is_best"].tolist() == [False, True, False, False]
    assert charts.best_candidate(frame)["prompt"] == "p1"
    # Store rows (dicts with ``idx`` and JSON-decoded flags) give the same frame.
    rows = [dict(vars(c), idx=c.index) for c in _cands()]
    for row in rows:
        row.pop("index")
    assert charts.candidate_rows(rows).equals(frame)


def test_best_by_round_skips_empty_candidates_and_keeps_the_running_best() -> None:
    per_round = charts.best_by_round(charts.candidate_rows(_cands()))
    assert per_round.to_dict("list") == {
        "round": [0, 1, 2],
        "best": [0.0, 0.3, 0.3],
        "best_so_far": [0.0, 0.3, 0.3],
    }


def test_empty_frames_do_not_break_the_charts() -> None:
    frame = charts.candidate_rows([])
    assert frame.empty and charts.best_candidate(frame) is None
    assert charts.best_by_round(frame).empty
    charts.best_by_round_figure(frame)


def test_scatter_has_a_star_on_the_best_and_no_prompt_text() -> None:
    fig = charts.mem_lcs_scatter(charts.candidate_rows(_cands()))
    star = next(t for t in fig.data if t.name == "best")
    assert list(star.x) == [0.1] and list(star.y) == [0.5]
    assert "p1" not in fig.to_json()


def test_method_bars_follow_the_paper_order() -> None:
    results = pd.DataFrame(
        {
            "method": ["interactive", "ps_base"],
            "mem": [0.5, 0.2],
            "lcs_p": [0.1, 0.3],
            "dis": [0.4, math.nan],
            "objective": [0.2, 0.0],
        }
    )
    fig = charts.method_bars(results)
    assert [t.name for t in fig.data] == ["P-S-Base", "Ours (interactive)"]
    assert list(fig.data[1].y) == [0.5, 0.1, 0.4, 0.2]
    assert fig.data[0].y[2] is None


def test_ner_heatmap_labels_are_escaped() -> None:
    data = {
        "z": np.zeros((1, 2)),
        "x": ["0:<b>", "1:{name}"],
        "y": ["step 0"],
        "text": [["<b>", "{name}"]],
    }
    fig = charts.importance_heatmap(data, title="t")
    assert list(fig.data[0].x) == ["0:&lt;b&gt;", "1:{name}"]


EVIL = '<a href="x">d</a>'
EVIL_ESCAPED = "&lt;a href=&#34;x&#34;&gt;d&lt;/a&gt;"


def _json(fig) -> str:
    """The figure's JSON as plotly.js gets it, decoded (plotly writes "/" as "\\u002f")."""
    return json.dumps(json.loads(fig.to_json()), ensure_ascii=False)


def _table1_part(n: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "method": ["interactive", "<b>mine</b>"],
            "domain": [EVIL, "code"],
            "mem": [0.5, 0.2],
            "mem_lo": [0.4, 0.1],
            "mem_hi": [0.6, 0.3],
            "n": n,
            "small_n": [v < 10 for v in n],
        }
    )


def test_escape_label_makes_markup_literal() -> None:
    assert charts.escape_label(EVIL) == EVIL_ESCAPED
    assert charts.escape_label("A & B's") == "A &amp; B&#39;s"
    assert charts.escape_label(3) == "3"


def test_every_entity_escape_label_writes_is_one_plotly_shows_as_its_character() -> None:
    """Plotly decodes numeric entities and a short list of named ones; read that list from
    the plotly.js this package ships. ``&quot;`` is not on it: a domain ``say "hi"`` showed as
    ``say &quot;hi&quot;`` in the charts."""
    import html
    import re
    from pathlib import Path

    import plotly

    js = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()
    named = set(re.findall(r"(\w+):\"", re.search(r"\{mu:[^}]*\}", js).group()))
    assert {"amp", "lt", "gt"} <= named
    every_ascii = "".join(map(chr, range(32, 127)))
    shown = charts.escape_label(every_ascii)
    for entity in re.findall(r"&(#\d+|#x[\da-fA-F]+|[a-z]+);", shown):
        assert entity.startswith("#") or entity in named, f"plotly shows &{entity}; as typed"
    assert html.unescape(shown) == every_ascii and "<" not in shown


def test_domain_bars_escape_domains_and_method_labels_from_data() -> None:
    fig = charts.domain_bars(_table1_part([12, 30]), "mem")
    text = _json(fig)
    assert EVIL_ESCAPED in text and "<a href" not in text and "<b>mine" not in text
    assert list(fig.data[0].x) == [EVIL_ESCAPED]
    assert fig.data[1].name == "&lt;b&gt;mine&lt;/b&gt;"


def test_domain_bars_mark_means_over_fewer_than_ten_snippets() -> None:
    fig = charts.domain_bars(_table1_part([3, 30]), "mem")
    assert list(fig.data[0].text) == [charts.SMALL_N_MARK] and list(fig.data[1].text) == [""]
    notes = [a.text for a in fig.layout.annotations]
    assert any(note.startswith(f"{charts.SMALL_N_MARK} n < 10") for note in notes)
    quiet = charts.domain_bars(_table1_part([10, 30]), "mem")
    assert not quiet.layout.annotations and charts.SMALL_N_MARK not in _json(quiet)


def test_method_and_cost_bars_escape_unknown_method_names() -> None:
    results = pd.DataFrame(
        {
            "method": ["<img src=x onerror=1>"],
            "mem": [0.5],
            "lcs_p": [0.1],
            "dis": [0.2],
            "objective": [0.3],
            "seconds": [1.0],
            "n": [4],
        }
    )
    for fig in (charts.method_bars(results), charts.cost_bars(results)):
        assert "<img" not in _json(fig) and "&lt;img src=x onerror=1&gt;" in _json(fig)
    assert list(charts.method_bars(results).data[0].text) == [charts.SMALL_N_MARK] * 4


def test_ner_charts_escape_types_ids_groups_models_and_titles() -> None:
    table = pd.DataFrame(
        {
            "prompt_id": [EVIL, "p2"],
            "rank": [1, 2],
            "m_mem": [0.7, 0.4],
            "type": ["<b>user</b>", "template"],
        }
    )
    ranking = _json(charts.ner_ranking_figure(table, title="<i>t</i>"))
    assert "<b>user" not in ranking and "&lt;b&gt;user&lt;/b&gt;" in ranking
    assert "<a href" not in ranking and EVIL_ESCAPED in ranking and "<i>t" not in ranking
    groups = pd.DataFrame({"group": [EVIL, "b"], "m_mem": [0.6, 0.5], "model": ["<b>m1</b>", "m2"]})
    box = _json(charts.ner_box_by(groups))
    assert "<a href" not in box and "<b>m1" not in box and "&lt;b&gt;m1&lt;/b&gt;" in box
    heat = charts.attention_heatmap({"z": np.zeros((1, 1)), "x": ["0:x"], "y": [EVIL]}, title=EVIL)
    assert "<a href" not in _json(heat)


def test_run_comparison_bars_escape_method_labels_and_run_names() -> None:
    summary = pd.DataFrame(
        {"run": ["#1", "<b>#2</b>"], "method": [EVIL, "P-S-Base"], "mem": [0.4, 0.6]}
    )
    fig = charts.run_comparison_bars(summary)
    text = _json(fig)
    assert EVIL_ESCAPED in text and "<a href" not in text and "<b>#2" not in text
    assert {trace.name for trace in fig.data} == {"#1", "&lt;b&gt;#2&lt;/b&gt;"}
    assert fig.layout.title.text == "Mean Mem by method, run A vs run B"


def test_the_extraction_curve_rises_to_p_at_n_at_p_and_escapes_the_scheme():
    import math

    import pytest

    from ui_common.charts import extraction_curve

    verbatim = {"log10_p_z": -3.0, "n_at_p": 693.0, "discover_p": 0.5, "pz_scheme": "<b>x</b>"}
    fig = extraction_curve(verbatim)
    curve, marker = fig.data
    assert curve.y[0] == pytest.approx(1e-3)  # one sample: p_z
    assert curve.y[-1] > 0.99 and list(curve.y) == sorted(curve.y)  # rises to certainty
    assert marker.x[0] == 693.0 and marker.y[0] == pytest.approx(1 - (1 - 1e-3) ** 693)
    assert marker.y[0] >= 0.5 > 1 - math.exp(692 * math.log1p(-1e-3))
    assert "<b>" not in fig.layout.title.text
    assert extraction_curve({"log10_p_z": None, "pz_scheme": "greedy"}) is None


def test_the_attention_heatmap_leaves_out_special_tokens_and_names_its_averaging() -> None:
    from ui_common.charts import attention_heatmap

    data = {
        "z": [[0.6, 0.1, 0.1, 0.2], [0.5, 0.2, 0.1, 0.2]],
        "x": ["0:[CLS]", "1:my", "2:[NAME]", "3:[SEP]"],
        "y": ["in-train", "out-of-train"],
    }
    fig = attention_heatmap(data, title="Best prompt")
    assert list(fig.data[0].x) == ["1:my", "2:[NAME]"]
    assert "mean of all layers and heads" in fig.layout.title.text
    assert "special tokens (75% of the weight) not drawn" in fig.layout.title.text


def test_m_mem_by_prompt_type_spans_the_whole_scale_with_the_no_memorization_line() -> None:
    import pandas as pd

    from ui_common.charts import ner_box_by

    groups = pd.DataFrame({"group": ["question", "statement"], "m_mem": [0.97, 0.99]})
    fig = ner_box_by(groups)
    assert tuple(fig.layout.yaxis.range) == (0, 101)
    assert any("no memorization" in (a.text or "") for a in fig.layout.annotations)


def test_the_document_map_names_each_row_by_its_first_window_and_has_room_for_its_scale() -> None:
    n = 2 * charts.MAP_ROW_WINDOWS + 3  # three rows
    frame = pd.DataFrame(
        {
            "window": range(n),
            "suffix_start_token": [50 * (w + 1) for w in range(n)],
            "suffix_tokens": [50] * n,
            "match_tokens": [w % 51 for w in range(n)],
            "match_share": [(w % 51) / 50 for w in range(n)],
            "log10_p_z": [np.nan] * n,
        }
    )
    fig = charts.document_map_figure(frame, title="<b>book</b>")
    y = fig.layout.yaxis
    assert list(y.tickvals) == [0, 1, 2]
    assert list(y.ticktext) == ["0", f"{charts.MAP_ROW_WINDOWS}", f"{2 * charts.MAP_ROW_WINDOWS}"]
    assert tuple(y.range) == (2.5, -0.5)  # top to bottom, no empty row above or below
    assert fig.layout.height >= 260  # a short map still draws a readable colour bar
    assert "<b>" not in fig.layout.title.text
