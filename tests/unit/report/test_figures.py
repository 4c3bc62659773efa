"""The report's figures (no Streamlit): ROC curves of a labelled run."""

from __future__ import annotations

import pandas as pd

from memprobe_core.report.build import MEMBERSHIP_COLUMNS, ROC_COLUMNS
from memprobe_core.report.figures import escape_label, roc_figure


def _roc() -> pd.DataFrame:
    rows = []
    for score, label, kind in (
        ("zlib", "zlib <b>ratio</b>", "signal"),
        ("ps_inst", "P-S-Inst", "method"),
    ):
        for length in (50, 200):
            for fpr, tpr in ((0.0, 0.0), (0.25, 0.75), (1.0, 1.0)):
                rows.append(dict(zip(ROC_COLUMNS, (score, label, kind, length, fpr, tpr))))
    return pd.DataFrame(rows, columns=ROC_COLUMNS)


def test_roc_figure_draws_one_curve_per_score_at_one_length() -> None:
    fig = roc_figure(_roc(), 200)
    curves = {t.name: t for t in fig.data}
    assert set(curves) == {escape_label("zlib <b>ratio</b>"), "P-S-Inst", "chance"}
    zlib = curves[escape_label("zlib <b>ratio</b>")]
    assert list(zlib.x) == [0.0, 0.25, 1.0] and list(zlib.y) == [0.0, 0.75, 1.0]
    assert zlib.line.dash == "solid" and curves["P-S-Inst"].line.dash == "dash"
    assert fig.layout.xaxis.type != "log" and "length 200" in fig.layout.title.text


def test_roc_figure_names_the_auroc_and_can_use_log_axes() -> None:
    membership = pd.DataFrame(
        [dict.fromkeys(MEMBERSHIP_COLUMNS) | {"score": "zlib", "length": 200, "auroc": 0.8125}],
        columns=MEMBERSHIP_COLUMNS,
    )
    fig = roc_figure(_roc(), 200, membership=membership, log_axes=True)
    names = [t.name for t in fig.data]
    assert escape_label("zlib <b>ratio</b>") + " (AUROC 0.812)" in names
    assert "P-S-Inst" in names  # no AUROC row: no number
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert list(fig.data[-1].x) == [1e-3, 1.0]  # the chance line starts where the axis does
