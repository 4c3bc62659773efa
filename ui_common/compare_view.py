"""The Compare page's live view: scores, signals, charts, prompts and outputs of each method.

Everything drawn comes from the finished methods' results (:func:`memprobe_core.runs.probe.
comparison_table` orders and labels them); the split the page recorded gives the true suffix.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from memprobe_core.attacks import registry
from memprobe_core.attacks.interactive import METHOD as ATTACKER_LOOP
from memprobe_core.attacks.registry import method_label
from memprobe_core.chance import ChanceLevel
from memprobe_core.runs.probe import comparison_table
from ui_common import charts, tables
from ui_common.job_runner import ProgressSnapshot
from ui_common.page import md
from ui_common.render import (
    cached_figure,
    candidates_table,
    chance_caption,
    method_measures_view,
    output_chance,
    overlap_view,
    pii_view,
    prompt_code,
    pz_view,
    signals_view,
    split_caption,
    verbatim_caption,
)


def render(snap: ProgressSnapshot) -> None:
    """Live: the scores of the methods done so far and the candidates of the one in flight."""
    split_caption(st.session_state.get("cmp_split") or {})
    results = snap.data.get("results", {})
    errors = snap.data.get("errors", {})
    for method, message in errors.items():
        st.error(md(f"{method_label(method)} failed: {message}"))
    if not results:
        items = pd.DataFrame(snap.items)
        if not items.empty:
            candidates_table(
                charts.candidate_rows(snap.items).assign(method=items["method"]), height=240
            )
        return
    split_info = st.session_state.get("cmp_split") or {}
    table = comparison_table(results)
    # Once per finished method, not on every redraw for the candidates of the one in flight.
    chances = cached_figure(
        "cmp_chances",
        (split_info.get("run_id"), tuple(results)),
        lambda: {m: output_chance(r.output, r.mem, split_info) for m, r in results.items()},
    )
    table["chance level"] = table["method"].map(lambda m: _level(chances.get(m)))
    table["above chance"] = table["method"].map(lambda m: _beats(chances.get(m)))
    st.subheader("Scores")
    # Two tables that fit the page rather than one too wide for it: scores, then costs.
    shown = table.drop(columns=["method"]).rename(columns={"label": "method"})
    tables.show(shown.drop(columns=[c for c in COST_COLUMNS if c in shown]))
    tables.show(shown[["method", *(c for c in COST_COLUMNS if c in shown)]])
    # One snippet and length: its signals are the same under every method; show them once.
    st.subheader("Membership signals of the snippet")
    signals_view(next(iter(results.values())).membership)
    # p_z is of the true suffix given the prefix: the snippet's, the same under every method.
    st.subheader("Probabilistic extraction of the suffix")
    pz_view(next(iter(results.values())).verbatim, key="cmp_pz")
    # Built once per finished method: the page is redrawn for every candidate of the one in flight.
    version = (split_info.get("run_id"), tuple(results))
    left, right = st.columns(2)
    with left:
        st.plotly_chart(
            cached_figure(
                "cmp_methods",
                version,
                lambda: charts.method_bars(table, chance_level=table["chance level"].max()),
            ),
            width="stretch",
        )
    with right:
        st.plotly_chart(
            cached_figure("cmp_costs", version, lambda: charts.cost_bars(table)), width="stretch"
        )
    st.subheader("Prompts")
    cols = st.columns(len(results))
    for col, method in zip(cols, registry.method_order(results)):
        with col:
            st.markdown(f"**{method_label(method)}**")
            prompt_code(results[method].prompt)
    st.subheader("Outputs against the true suffix")
    for method in registry.method_order(results):
        r = results[method]
        with st.expander(
            f"{method_label(method)}: Mem {r.mem:.3f}, LCS_P {r.lcs_p:.3f}",
            expanded=method == ATTACKER_LOOP,
        ):
            if split_info.get("suffix") is not None:
                overlap_view(
                    r.output,
                    split_info["suffix"],
                    split_info.get("scoring"),
                    suffix_tokens=split_info.get("suffix_tokens"),
                    tokenizer=split_info.get("tokenizer"),
                )
            chance_caption(chances.get(method), split_info)
            st.markdown("PII in this output (copied from the suffix / invented):")
            pii_view(r.pii)
            st.markdown(verbatim_caption(r.verbatim))
            method_measures_view(r.verbatim)


# The comparison's cost columns (the second table and the cost chart).
COST_COLUMNS = ("seconds", "victim_queries", "attacker_queries", "generated_tokens")


def _level(chance: ChanceLevel | None) -> float | None:
    return None if chance is None else chance.level


def _beats(chance: ChanceLevel | None) -> str:
    """``yes`` / ``no`` / ``undefined`` (never a bare None in the table)."""
    if chance is None or chance.beats is None:
        return "undefined"
    return "yes" if chance.beats else "no"
