"""Tables and plotly figures the dashboard draws (no Streamlit here, so they are unit-testable).

Plotly renders a subset of HTML in every label, title, legend entry and hover (``<a href>``,
``<b>``, ``<br>`` …), so a domain, model name, method label, snippet id or prompt from user data
could draw a link or reshape the chart. Every such string goes through :func:`escape_label`
(HTML entities, which plotly shows as the typed characters; defined with the report's figures in
:mod:`memprobe_core.report.figures`). Prompts and outputs themselves are never put in figures:
the pages show them in escaped widgets.

Charts of means mark cells with fewer than ``SMALL_N`` values with ``†`` and a note, as the report's
tables do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from memprobe_core.attacks.registry import method_order
from memprobe_core.attacks.result import EMPTY, Candidate
from memprobe_core.documents.map_report import log10_text

# The report's figures and label escaping live in the core (the HTML report draws them too);
# re-exported here for the pages.
# The report's ROC figure is the pages' too (curves on one line drawn as a stack, named below).
from memprobe_core.report.figures import (  # noqa: F401 - re-exported for the pages
    METRIC_LABELS,
    SMALL_N_MARK,
    STACK_WIDTHS,
    coinciding_curves,
    domain_bars,
    escape_label,
    roc_figure,
)
from memprobe_core.report.figures import escaped as _escaped
from memprobe_core.report.figures import escaped_method_label as _method_label
from memprobe_core.report.figures import note_small_n as _note_small_n
from memprobe_core.report.figures import small_n_marks as _small_n_marks

CANDIDATE_COLUMNS: list[str] = [
    "round",
    "index",
    "prompt",
    "output",
    "mem",
    "lcs_p",
    "objective",
    "flags",
    "is_round_best",
    "is_best",
]


def candidate_rows(candidates: Iterable[Candidate | Mapping[str, Any]]) -> pd.DataFrame:
    """Candidates (live ``Candidate`` objects or store rows) as one frame, in scoring order.

    Columns: :data:`CANDIDATE_COLUMNS`. ``is_best`` marks the best objective so far over the
    whole run (the first one on ties, as the methods pick), excluding candidates flagged
    ``empty`` (never sent to the victim, never chosen).
    """
    rows = []
    for cand in candidates:
        data = asdict(cand) if is_dataclass(cand) else dict(cand)
        flags = data.get("flags") or []
        if isinstance(flags, str):
            flags = [f for f in flags.split(",") if f]
        rows.append(
            {
                "round": int(data.get("round", 0)),
                "index": int(data.get("index", data.get("idx", 0))),
                "prompt": str(data.get("prompt", "")),
                "output": str(data.get("output", "")),
                "mem": _num(data.get("mem")),
                "lcs_p": _num(data.get("lcs_p")),
                "objective": _num(data.get("objective")),
                "flags": ",".join(flags),
                "is_round_best": bool(data.get("is_round_best", False)),
            }
        )
    frame = pd.DataFrame(rows, columns=CANDIDATE_COLUMNS[:-1])
    frame["is_best"] = False
    usable = frame[~frame["flags"].str.contains(EMPTY) & frame["objective"].notna()]
    if not usable.empty:
        frame.loc[usable["objective"].idxmax(), "is_best"] = True
    return frame


def _num(value: Any) -> float:
    return float("nan") if value is None else float(value)


def best_candidate(frame: pd.DataFrame) -> pd.Series | None:
    """The row flagged ``is_best`` (or ``None`` for an empty frame)."""
    best = frame[frame["is_best"]]
    return None if best.empty else best.iloc[0]


def best_by_round(frame: pd.DataFrame) -> pd.DataFrame:
    """Per round: the round's best objective and the best so far (columns round, best, best_so_far)."""
    if frame.empty:
        return pd.DataFrame(columns=["round", "best", "best_so_far"])
    usable = frame[~frame["flags"].str.contains(EMPTY)]
    per_round = usable.groupby("round", as_index=False)["objective"].max()
    per_round = per_round.rename(columns={"objective": "best"}).sort_values("round")
    per_round["best_so_far"] = per_round["best"].cummax()
    return per_round.reset_index(drop=True)


def mem_lcs_scatter(
    frame: pd.DataFrame,
    *,
    title: str = "Mem vs LCS_P per round",
    chance_level: float | None = None,
) -> go.Figure:
    """Scatter of every candidate: x = LCS_P (what the prompt gives away), y = Mem, colour = round.

    The best candidate gets a star marker. Hover shows round, index and scores only.
    """
    data = frame.assign(round_label=frame["round"].map(lambda r: f"round {r}"))
    fig = px.scatter(
        data,
        x="lcs_p",
        y="mem",
        color="round_label",
        hover_data={
            "round_label": False,
            "round": True,
            "index": True,
            "objective": ":.3f",
            "mem": ":.3f",
            "lcs_p": ":.3f",
        },
        labels={
            "lcs_p": "LCS_P: prompt's overlap with the suffix (0-1)",
            "mem": "Mem: output's recall of the suffix (0-1)",
            "round_label": "round",
        },
        title=escape_label(title),
    )
    best = data[data["is_best"]]
    if not best.empty:
        fig.add_trace(
            go.Scatter(
                x=best["lcs_p"],
                y=best["mem"],
                mode="markers",
                name="best",
                marker={
                    "symbol": "star",
                    "size": 16,
                    "color": "gold",
                    "line": {"width": 1, "color": "black"},
                },
                hoverinfo="skip",
            )
        )
    fig.update_xaxes(range=[-0.02, 1.02])
    fig.update_yaxes(range=[-0.02, 1.02])
    fig.update_layout(height=360, margin={"l": 10, "r": 10, "t": 40, "b": 10}, legend_title_text="")
    return add_chance_line(fig, chance_level, "the best output")


def best_by_round_figure(frame: pd.DataFrame) -> go.Figure:
    """Line chart of the best objective by round and the best so far."""
    per_round = best_by_round(frame)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=per_round["round"], y=per_round["best"], mode="lines+markers", name="round best"
        )
    )
    fig.add_trace(
        go.Scatter(
            x=per_round["round"],
            y=per_round["best_so_far"],
            mode="lines",
            name="best so far",
            line={"dash": "dot"},
        )
    )
    fig.update_layout(
        title="Best objective by round",
        xaxis_title="round (0 = initial prompt)",
        yaxis_title="objective O = α·Mem − (1−α)·LCS_P",
        height=360,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    fig.update_xaxes(dtick=1)
    return fig


def add_chance_line(fig: go.Figure, level: float | None, what: str) -> go.Figure:
    """A dashed horizontal line at Mem's chance level (``None``: nothing drawn), labelled."""
    if level is not None:
        fig.add_hline(
            y=level,
            line_dash="dash",
            line_color="#888",
            annotation_text=escape_label(f"chance level of Mem ({what}): {level:.3f}"),
            annotation_position="top left",
        )
    return fig


def method_bars(
    results: pd.DataFrame,
    metrics: Sequence[str] = ("mem", "lcs_p", "dis", "objective"),
    *,
    chance_level: float | None = None,
) -> go.Figure:
    """Grouped bars: one group per metric, one bar per method (from a results frame).

    ``results`` needs a ``method`` column and the metric columns (``store.results_frame``). With
    an ``n`` (or ``small_n``) column, bars of means over fewer than ``SMALL_N`` values get ``†``.
    """
    fig = go.Figure()
    for method in method_order(results["method"]):
        part = results[results["method"] == method].iloc[:1]
        row = part.iloc[0]
        values = [float(row[m]) if pd.notna(row.get(m)) else None for m in metrics]
        marks = _small_n_marks(part)
        fig.add_trace(
            go.Bar(
                name=_method_label(method),
                x=_escaped(METRIC_LABELS.get(m, m) for m in metrics),
                y=values,
                text=None if marks is None else marks * len(metrics),
                textposition="outside",
            )
        )
    fig.update_layout(
        barmode="group",
        title="Scores by method",
        xaxis_title="metric",
        yaxis_title="score (0-1; O can be negative)",
        height=380,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    _note_small_n(fig)
    # The highest of the methods' chance levels: a Mem bar below it is not told from chance.
    return add_chance_line(fig, chance_level, "highest over the methods' outputs")


# The cost chart's panels: title, the y axis's unit, and the (column, bar name) drawn in it.
COST_PANELS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("Time", "seconds", (("seconds", "time"),)),
    (
        "Queries",
        "queries",
        (("victim_queries", "victim queries"), ("attacker_queries", "attacker queries")),
    ),
    ("Generated tokens", "tokens", (("generated_tokens", "generated tokens"),)),
)


def cost_bars(results: pd.DataFrame) -> go.Figure:
    """What each method spent, one panel per unit: seconds, queries (victim and attacker), and
    generated tokens, each y axis titled with its unit (a panel whose columns the frame lacks is
    left out; a missing value draws no bar, not 0)."""
    order = method_order(results["method"])
    labels = [_method_label(m) for m in order]
    panels = [
        (title, unit, [(c, name) for c, name in series if c in results])
        for title, unit, series in COST_PANELS
    ]
    panels = [panel for panel in panels if panel[2]] or [(COST_PANELS[0][0], "seconds", [])]
    fig = make_subplots(
        rows=1,
        cols=len(panels),
        subplot_titles=[title for title, _, _ in panels],
        horizontal_spacing=0.12,
    )
    for col, (_, unit, series) in enumerate(panels, start=1):
        for column, name in series:
            values = [_first(results, m, column) for m in order]
            fig.add_trace(go.Bar(name=name, x=labels, y=values), row=1, col=col)
        fig.update_yaxes(title_text=unit, rangemode="tozero", row=1, col=col)
        fig.update_xaxes(title_text="method", row=1, col=col)
    fig.update_layout(
        barmode="group",
        title="Cost by method",
        height=380,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        legend={"orientation": "h", "y": -0.35},
    )
    return fig


def _first(results: pd.DataFrame, method: str, column: str) -> float | None:
    """``column`` of ``method``'s first row, ``None`` when missing (no bar, rather than 0)."""
    value = results[results["method"] == method][column].iloc[0]
    return None if value is None or pd.isna(value) else float(value)


# --- NER memorization -----------------------------------------------------------------------------


def ner_ranking_figure(
    prompt_table: pd.DataFrame, *, title: str = "Prompts ranked by M-MEM"
) -> go.Figure:
    """Bars of M-MEM per prompt, best first, coloured by prompt type (x = rank; no prompt text)."""
    table = prompt_table.sort_values(["rank", "prompt_id"]).reset_index(drop=True)
    # Prompt types and ids come from user files: they reach the legend and the hover.
    table = table.assign(
        position=range(1, len(table) + 1),
        pct=100 * table["m_mem"],
        type=_escaped(table["type"].fillna("unknown")),
        prompt_id=_escaped(table["prompt_id"]),
    )
    fig = px.bar(
        table,
        x="position",
        y="pct",
        color="type",
        hover_data={"prompt_id": True, "rank": True, "position": False, "pct": ":.1f"},
        labels={"position": "prompt, by rank (best → worst)", "pct": "M-MEM (%)"},
        title=escape_label(title),
    )
    fig.add_hline(y=50, line_dash="dot", annotation_text="50 % (no memorization)")
    fig.update_layout(height=360, bargap=0.05, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def ner_box_by(groups: pd.DataFrame, *, title: str = "M-MEM by prompt type") -> go.Figure:
    """Box plot of M-MEM per group (``property_groups`` frames, with a ``model`` column if several)."""
    # Group and model names (hub ids, user labels) reach the axis, legend and hover.
    data = groups.assign(pct=100 * groups["m_mem"], group=_escaped(groups["group"]))
    color = "model" if "model" in data and data["model"].nunique() > 1 else None
    if color:
        data["model"] = _escaped(data["model"])
    fig = px.box(
        data,
        x="group",
        y="pct",
        color=color,
        points="all",
        labels={"group": "prompt type", "pct": "M-MEM (%)"},
        title=escape_label(title),
    )
    # The whole 0-100 % scale with 50 % (no memorization) marked: an auto-scaled 95-100 % axis
    # made small differences look large. Each point is one prompt.
    fig.update_yaxes(range=[0, 101])
    fig.add_hline(
        y=50,
        line_dash="dot",
        line_color="#888",
        annotation_text="50 %: no memorization",
        annotation_position="bottom right",
    )
    fig.update_layout(height=360, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def importance_heatmap(data: dict[str, Any], *, title: str) -> go.Figure:
    """Token-importance heatmap (``ImportanceTrace.heatmap()``): steps × the prompt's tokens."""
    z = data["z"]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=_escaped(data["x"]),
            y=_escaped(data["y"]),
            colorscale="RdBu",
            zmid=0,
            text=[_escaped(row) for row in data["text"]],
            texttemplate="%{text}",
            hovertemplate="%{y}<br>%{x}: %{z:.2f}<extra></extra>",
            colorbar={"title": "importance<br>(normalised)"},
        )
    )
    fig.update_layout(
        title=escape_label(title),
        height=120 + 28 * max(1, len(data["y"])),
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis_title="token of the prompt (position:token)",
        yaxis_title="step: M-MEM after removing a token (%)",
    )
    fig.update_yaxes(autorange="reversed")
    return fig


# Special tokens take most of a BERT-style model's attention ("attention sinks"); drawn, they
# flatten every other column to one colour.
SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]", "<s>", "</s>", "<pad>"})


def attention_heatmap(data: dict[str, Any], *, title: str) -> go.Figure:
    """Attention of the name position to each token, in-train vs out-of-train (2 × tokens),
    averaged over every layer and head; the special tokens' columns are left out (their share
    is in the title) so the prompt's own tokens are told apart."""
    import numpy as np

    z = np.asarray(data["z"], dtype=float)
    keep = [i for i, x in enumerate(data["x"]) if str(x).split(":", 1)[-1] not in SPECIAL_TOKENS]
    special_share = float(z.sum(axis=1).mean() - z[:, keep].sum(axis=1).mean()) if z.size else 0
    title = f"{title} · mean of all layers and heads"
    if len(keep) < z.shape[1]:
        title += f" · special tokens ({special_share:.0%} of the weight) not drawn"
    fig = go.Figure(
        go.Heatmap(
            z=z[:, keep],
            x=_escaped([data["x"][i] for i in keep]),
            y=_escaped(data["y"]),
            colorscale="Viridis",
            hovertemplate="%{y}<br>%{x}: %{z:.3f}<extra></extra>",
            colorbar={"title": "attention<br>weight (0-1)"},
        )
    )
    fig.update_layout(
        title=escape_label(title),
        height=230,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis_title="token of the prompt (position:token)",
        yaxis_title="names",
    )
    return fig


def tau_heatmap(tau: pd.DataFrame, *, title: str = "Kendall τ of prompt rankings") -> go.Figure:
    """Kendall τ matrix between models (or dev/test), annotated with the values."""
    fig = go.Figure(
        go.Heatmap(
            z=tau.to_numpy(),
            x=_escaped(tau.columns),
            y=_escaped(tau.index),
            zmin=-1,
            zmax=1,
            colorscale="RdBu",
            text=tau.round(2).astype(str).to_numpy(),
            texttemplate="%{text}",
            colorbar={"title": "Kendall τ<br>(−1 to 1)"},
        )
    )
    fig.update_layout(
        title=escape_label(title),
        height=120 + 50 * len(tau),
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis_title="model",
        yaxis_title="model",
    )
    return fig


# --- run history ----------------------------------------------------------------------------------


def run_comparison_bars(
    summary: pd.DataFrame, *, title: str = "Mean Mem by method, run A vs run B"
) -> go.Figure:
    """Grouped bars of mean Mem per method, one colour per run (the Runs page's comparison).

    ``summary`` has ``run``, ``method`` (a display label) and ``mem`` columns; run names and
    method labels are escaped.
    """
    frame = summary.assign(method=_escaped(summary["method"]), run=_escaped(summary["run"]))
    fig = px.bar(
        frame,
        x="method",
        y="mem",
        color="run",
        barmode="group",
        title=escape_label(title),
        labels={"mem": "mean Mem (0-1)", "method": "method", "run": "run"},
    )
    fig.update_layout(height=360)
    return fig


def extraction_curve(verbatim: Mapping[str, Any], *, points: int = 200) -> go.Figure | None:
    """The (n, p) curve of probabilistic extraction: the chance that n samples under the
    measured scheme write the true suffix at least once, ``1 − (1 − p_z)^n``, on a log n axis
    reaching past ``n_at_p`` (docs/method.md §14). ``None`` when p_z was not measured or is 0
    (the chance is 0 for every n: the caption says so instead)."""
    import numpy as np

    from memprobe_core.measuring.sampler import extraction_chance

    log10_p_z = verbatim.get("log10_p_z")
    if log10_p_z is None:
        return None
    # From one sample to 100× the samples that give a 99 % chance, so the curve's rise shows.
    top = max(2.0, 2.0 - float(log10_p_z) + 1.0)
    log_n = np.linspace(0.0, top, points)
    chance = [extraction_chance(float(log10_p_z), 10.0**x) for x in log_n]
    fig = go.Figure(
        go.Scatter(
            x=10.0**log_n,
            y=chance,
            mode="lines",
            name="P(extracted within n samples)",
            hovertemplate="n = %{x:.3g}<br>chance %{y:.3f}<extra></extra>",
        )
    )
    p, n = verbatim.get("discover_p"), verbatim.get("n_at_p")
    if p is not None and n is not None:
        fig.add_trace(
            go.Scatter(
                x=[n],
                y=[extraction_chance(float(log10_p_z), float(n))],
                mode="markers",
                name=f"n at p = {p:g}",
                marker={"size": 10},
            )
        )
    fig.update_layout(
        title=escape_label(f"Probabilistic extraction under {verbatim.get('pz_scheme', '?')}"),
        xaxis={"type": "log", "title": "samples n (log scale)"},
        yaxis={"title": "chance the suffix comes out (0-1)", "range": [0, 1.02]},
        height=320,
        margin={"t": 50, "b": 40},
    )
    return fig


# The document map's grid: windows per row of the strip (a wrapped line of text, as on a page).
MAP_ROW_WINDOWS = 50


def document_map_figure(frame: pd.DataFrame, *, title: str) -> go.Figure:
    """The extraction map as a grid of squares in document order (``MAP_ROW_WINDOWS`` a row),
    each coloured by the share of its suffix greedy decoding writes back; a click selects one.

    ``frame``: :func:`memprobe_core.documents.map_report.map_frame`. Hover text holds numbers
    only; the title is escaped.
    """
    index = frame["window"].to_numpy()
    hover = [
        f"window {w} · tokens {s}–{s + n} · {m}/{n} written back"
        + ("" if pd.isna(p) else f" · log10 p_z {log10_text(p)}")
        for w, s, n, m, p in zip(
            frame["window"],
            frame["suffix_start_token"],
            frame["suffix_tokens"],
            frame["match_tokens"],
            frame["log10_p_z"],
        )
    ]
    fig = go.Figure(
        go.Scatter(
            x=index % MAP_ROW_WINDOWS,
            y=index // MAP_ROW_WINDOWS,
            mode="markers",
            marker={
                "symbol": "square",
                "size": 11,
                "color": frame["match_share"],
                "cmin": 0,
                "cmax": 1,
                "colorscale": [
                    [0, "#e8e8e8"],
                    [0.01, "#fbd3c4"],
                    [0.99, "#b2182b"],
                    [1, "#67001f"],
                ],
                "colorbar": {"title": {"text": "share written back"}, "tickformat": ".0%"},
            },
            customdata=index,
            hovertext=hover,
            hoverinfo="text",
            # A click marks its window larger; Plotly's default would dim every other one, and
            # a dimmed map reads as "less written back".
            selected={"marker": {"size": 15, "opacity": 1}},
            unselected={"marker": {"opacity": 1}},
        )
    )
    rows = int(index.max() // MAP_ROW_WINDOWS + 1) if len(index) else 1
    fig.update_layout(
        title=escape_label(title),
        # At least 260 px: a one-row map's colour bar was squeezed into 20 px.
        height=min(900, max(260, 120 + 16 * rows)),
        xaxis={"visible": False, "range": [-1, MAP_ROW_WINDOWS]},
        yaxis={
            # Rows top to bottom, each named by its first window (ticks at -1 meant nothing).
            "range": [rows - 0.5, -0.5],
            "tickvals": list(range(rows)),
            "ticktext": [f"{row * MAP_ROW_WINDOWS:,}" for row in range(rows)],
            "title": "first window of the row",
            "zeroline": False,
        },
        margin={"l": 60, "r": 20, "t": 50, "b": 20},
    )
    return fig
