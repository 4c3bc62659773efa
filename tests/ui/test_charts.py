"""Dashboard tables and figures built from candidates and results (no Streamlit)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ui_common import charts
from memprobe_core.attacks.result import Candidate


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
    assert per_round.to_dict("list") == {"round": [0, 1, 2], "best": [0.0, 0.3, 0.3],
                                         "best_so_far": [0.0, 0.3, 0.3]}


def test_empty_frames_do_not_break_the_charts() -> None:
    frame = charts.candidate_rows([])
    assert frame.empty and charts.best_candidate(frame) is None
    assert charts.best_by_round(frame).empty
    charts.best_by_round_figure(frame)


def test_scatter_has_a_star_on_the_best_and_no_prompt_text() -> None:
    fig = charts.mem_lcs_scatter(charts.candidate_rows(_cands()))
    star = [t for t in fig.data if t.name == "best"][0]
    assert list(star.x) == [0.1] and list(star.y) == [0.5]
    assert "p1" not in fig.to_json()


def test_method_bars_follow_the_paper_order() -> None:
    results = pd.DataFrame({"method": ["interactive", "ps_base"], "mem": [0.5, 0.2],
                            "lcs_p": [0.1, 0.3], "dis": [0.4, math.nan], "objective": [0.2, 0.0]})
    fig = charts.method_bars(results)
    assert [t.name for t in fig.data] == ["P-S-Base", "Ours (interactive)"]
    assert list(fig.data[1].y) == [0.5, 0.1, 0.4, 0.2]
    assert fig.data[0].y[2] is None


def test_ner_heatmap_labels_are_escaped() -> None:
    data = {"z": np.zeros((1, 2)), "x": ["0:<b>", "1:{name}"], "y": ["step 0"],
            "text": [["<b>", "{name}"]]}
    fig = charts.importance_heatmap(data, title="t")
    assert list(fig.data[0].x) == ["0:&lt;b&gt;", "1:{name}"]
