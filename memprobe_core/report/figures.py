"""Plotly figures of an audit report, shared by the dashboard's pages and the HTML report.

No Streamlit here: :mod:`ui_common.charts` re-exports these for the pages, and
:mod:`memprobe_core.report.html` embeds them in a self-contained file.

Plotly renders a subset of HTML in every label, title, legend entry and hover (``<a href>``,
``<b>``, ``<br>`` …), so a domain, model name, method label or snippet id from user data could
draw a link or reshape the chart. Every such string goes through :func:`escape_label` (HTML
entities, which plotly shows as the typed characters).

Charts of means mark cells with fewer than ``SMALL_N`` values with ``†`` and a note, as the
report's tables do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from memprobe_core.attacks import registry
from memprobe_core.attacks.registry import method_order
from memprobe_core.highlight import escape_html
from memprobe_core.report.formatting import SMALL_N_MARK
from memprobe_core.stats import SMALL_N

METRIC_LABELS: dict[str, str] = {
    "mem": "Mem",
    "lcs_p": "LCS_P",
    "dis": "Dis",
    "objective": "Objective",
}

_MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}


# The template of a figure that leaves this process (the HTML report). Importing Streamlit sets
# plotly's default template to Streamlit's, whose colours are placeholders (#000001 … #000010) that
# only Streamlit's front end replaces and whose axes have no automargin: the dashboard's
# "Download HTML report" drew every trace black with clipped tick labels. Naming the template
# keeps the file the same whichever process builds it.
STANDALONE_TEMPLATE = "plotly"


def standalone(fig: go.Figure) -> go.Figure:
    """``fig`` with :data:`STANDALONE_TEMPLATE` in place of this process's default template.

    The report's figures set no colour of their own (traces take the template's colourway when
    drawn), so swapping the template is enough to make them identical in any process.
    """
    fig.layout.template = pio.templates[STANDALONE_TEMPLATE]
    return fig


def escape_label(value: Any) -> str:
    """``value`` as text that plotly shows literally (``<``, ``>``, ``&``, quotes as entities;
    control and bidi characters as visible escapes: :func:`memprobe_core.highlight.escape_html`).

    Use it for every user-supplied string that reaches a figure: category labels, trace names,
    titles, hover text, tick labels.

    Plotly decodes numeric entities and only a few named ones (``amp``, ``lt``, ``gt``, ``nbsp``
    …, not ``quot``): ``html.escape``'s ``&quot;`` showed as those six characters in a chart,
    so a double quote becomes ``&#34;``.
    """
    return escape_html(value).replace("&quot;", "&#34;")


def escaped(values: Iterable[Any]) -> list[str]:
    """:func:`escape_label` of each value."""
    return [escape_label(v) for v in values]


def escaped_method_label(method: str) -> str:
    """The method's display label, escaped for a figure."""
    return escape_label(registry.method_label(method))


def small_n_marks(frame: pd.DataFrame) -> list[str] | None:
    """``†`` for rows with n < SMALL_N (from ``small_n`` or ``n``), else ``""``; None if unknown."""
    if "small_n" in frame:
        flags = frame["small_n"].fillna(False).astype(bool)
    elif "n" in frame:
        flags = pd.to_numeric(frame["n"], errors="coerce") < SMALL_N
    else:
        return None
    return [SMALL_N_MARK if flag else "" for flag in flags]


def note_small_n(fig: go.Figure) -> None:
    """A footnote under the plot when any bar carries the small-n mark."""
    if any(SMALL_N_MARK in (getattr(t, "text", None) or ()) for t in fig.data):
        fig.add_annotation(
            text=f"{SMALL_N_MARK} n < {SMALL_N}: too few snippets for a reliable interval",
            xref="paper",
            yref="paper",
            x=0,
            y=0,
            yanchor="top",
            yshift=-52,  # in pixels, below the tick labels and the axis title
            showarrow=False,
            xanchor="left",
            font={"size": 11},
        )
        fig.update_layout(margin={"b": 80})


def domain_bars(frame: pd.DataFrame, metric: str = "mem") -> go.Figure:
    """Per-domain mean of ``metric`` by method, with the interval when the frame has one.

    ``frame`` has columns ``domain``, ``method`` and ``metric`` (one row per domain × method), and
    optionally ``{metric}_lo`` / ``{metric}_hi`` (interval bounds) and ``n`` / ``small_n``
    (Table 1's columns): bars over fewer than ``SMALL_N`` snippets get ``†`` and a note.
    """
    fig = go.Figure()
    label = escape_label(METRIC_LABELS.get(metric, metric))
    for method in method_order(frame["method"]):
        part = frame[frame["method"] == method]
        error = None
        lo, hi = f"{metric}_lo", f"{metric}_hi"
        if lo in part and hi in part:
            error = {
                "type": "data",
                "symmetric": False,
                "array": (part[hi] - part[metric]).tolist(),
                "arrayminus": (part[metric] - part[lo]).tolist(),
            }
        fig.add_trace(
            go.Bar(
                name=escaped_method_label(method),
                x=escaped(part["domain"]),
                y=part[metric],
                error_y=error,
                text=small_n_marks(part),
                textposition="outside",
            )
        )
    fig.update_layout(
        barmode="group",
        title=f"{label} by domain",
        xaxis_title="domain",
        yaxis_title=f"mean {label}" + (" (0-1)" if metric in ("mem", "lcs_p", "dis") else ""),
        height=360,
        margin=_MARGIN,
    )
    note_small_n(fig)
    return fig


def _auroc_by_score(membership: pd.DataFrame | None, length: Any) -> dict[str, float]:
    """``score -> AUROC`` at ``length`` from a ``Report.membership`` frame (empty if none)."""
    if membership is None or membership.empty:
        return {}
    rows = membership[membership["length"] == length]
    return {str(s): float(a) for s, a in zip(rows["score"], rows["auroc"]) if pd.notna(a)}


# Widths of curves drawn on one line, the first drawn widest: each later (narrower) curve lies on
# top of the earlier ones, so every colour shows as a band of the stack instead of the last
# curve hiding the others (six curves at AUROC 1.000 read as one).
STACK_WIDTHS: tuple[float, ...] = (12, 9.5, 7.5, 5.5, 3.8, 2.4, 1.4)


def coinciding_curves(roc: pd.DataFrame, length: Any) -> list[list[str]]:
    """The scores whose ROC curves at ``length`` are the same line (the same set of points),
    in groups of two or more, each in drawing order; labels as given (not escaped)."""
    groups: dict[tuple[tuple[float, float], ...], list[str]] = {}
    for _score, curve in roc[roc["length"] == length].groupby("score", sort=False):
        points = tuple(sorted(set(zip(curve["fpr"].round(9), curve["tpr"].round(9)))))
        groups.setdefault(points, []).append(str(curve["score_label"].iloc[0]))
    return [labels for labels in groups.values() if len(labels) > 1]


def roc_figure(
    roc: pd.DataFrame,
    length: Any,
    *,
    membership: pd.DataFrame | None = None,
    log_axes: bool = False,
) -> go.Figure:
    """ROC curves of every score at one length, with the chance diagonal.

    Args:
        roc: ``Report.roc`` (:data:`memprobe_core.report.build.ROC_COLUMNS`, one row per point).
        length: the snippet length whose curves are drawn.
        membership: ``Report.membership``; when given, each legend entry carries its AUROC.
        log_axes: both axes logarithmic from 0.1 %: the low-FPR corner is where a membership
            attack is judged ("Membership Inference Attacks From First Principles"), but with a
            few dozen non-members it is empty, so linear axes are the default.

    Membership signals are solid lines, extraction methods (their Mem as the score) dashed.
    """
    part = roc[roc["length"] == length]
    aurocs = _auroc_by_score(membership, length)
    fig = go.Figure()
    for score, curve in part.groupby("score", sort=False):
        name = escape_label(curve["score_label"].iloc[0])
        if str(score) in aurocs:
            name += f" (AUROC {aurocs[str(score)]:.3f})"
        fig.add_trace(
            go.Scatter(
                x=curve["fpr"],
                y=curve["tpr"],
                mode="lines",
                name=name,
                line={"dash": "dash" if curve["kind"].iloc[0] == "method" else "solid"},
                hovertemplate="FPR %{x:.4f}<br>TPR %{y:.4f}<extra>" + name + "</extra>",
            )
        )
    chance = [1e-3, 1.0] if log_axes else [0.0, 1.0]
    fig.add_trace(
        go.Scatter(
            x=chance, y=chance, mode="lines", name="chance", line={"dash": "dot", "color": "#999"}
        )
    )
    axis: dict[str, Any] = {"type": "log", "range": [-3, 0]} if log_axes else {"range": [0, 1]}
    fig.update_xaxes(title="false positive rate", **axis)
    fig.update_yaxes(title="true positive rate", **axis)
    fig.update_layout(
        title=f"ROC, length {escape_label(length)} (member vs non-member)",
        height=420,
        margin=_MARGIN,
        legend={"font": {"size": 11}},
    )
    return _stack_coinciding(fig, roc, length, log_axes=log_axes)


def _stack_coinciding(
    fig: go.Figure, roc: pd.DataFrame, length: Any, *, log_axes: bool
) -> go.Figure:
    """Curves that fall on one line made visible: drawn as a stack of widths, widest first (each
    colour a band), and named below the chart ("on one line: …"), labels escaped."""
    groups = coinciding_curves(roc, length)
    if not groups:
        return fig
    # The report's figure draws one trace per score in this same order, the chance line last.
    labels = [
        str(curve["score_label"].iloc[0])
        for _score, curve in roc[roc["length"] == length].groupby("score", sort=False)
    ]
    for group in groups:
        for rank, label in enumerate(group):
            trace = fig.data[labels.index(label)]
            trace.line.width = STACK_WIDTHS[min(rank, len(STACK_WIDTHS) - 1)]
    lines = [
        f"On one line ({len(group)} curves, drawn widest first): "
        + ", ".join(escape_label(label) for label in group)
        for group in groups
    ]
    fig.add_annotation(
        text="<br>".join(lines),
        xref="paper",
        yref="paper",
        x=0,
        y=0,
        yshift=-48,  # below the axis title
        xanchor="left",
        yanchor="top",
        showarrow=False,
        align="left",
        font={"size": 11},
    )
    extra = 16 * len(lines) + 50
    fig.update_layout(height=fig.layout.height + extra, margin={"b": extra})
    if not log_axes:  # a perfect curve runs along the frame: a margin keeps its bands whole
        fig.update_xaxes(range=[-0.03, 1.03])
        fig.update_yaxes(range=[-0.03, 1.03])
    return fig
