"""The Compare page's live view: scores, signals, charts, prompts and outputs of each method.

The table of scores is the run's results frame as the store holds it
(:func:`memprobe_core.store.frames.results_table`, the Runs page's too), so every column a method
registers shows here as in the report; the signals, prompts and outputs come from the finished
methods' results; the split the page recorded gives the true suffix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from memprobe_core.attacks import registry
from memprobe_core.attacks.registry import method_label
from memprobe_core.chance import ChanceLevel
from memprobe_core.store.frames import SHOWN_COST_COLUMNS, results_table
from ui_common import charts, tables
from ui_common.job_runner import ProgressSnapshot
from ui_common.page import get_store, md
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
    stored_unit_chance,
    verbatim_caption,
)
from ui_common.runs_view import shown_results


def render(snap: ProgressSnapshot) -> None:
    """Live: the scores of the methods done so far and the candidates of the one in flight."""
    split_caption(st.session_state.get("cmp_split") or {})
    cut_owner_caption(st.session_state.get("cmp_split") or {})
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
    table = stored_table(split_info.get("run_id"))
    if table.empty:
        return
    # Once per finished method, not on every redraw for the candidates of the one in flight.
    chances = cached_figure(
        "cmp_chances",
        (split_info.get("run_id"), tuple(results)),
        lambda: method_chances(results, split_info, get_store()),
    )
    table["chance level"] = table["method"].map(lambda m: _level(chances.get(m)))
    table["above chance"] = table["method"].map(lambda m: _beats(chances.get(m)))
    st.subheader("Scores")
    # Two tables that fit the page rather than one too wide for it: scores, then costs.
    # One snippet and length: said above the table, not in every row.
    shown = shown_results(table, drop=("snippet_id", "length"))
    tables.show(shown.drop(columns=SHOWN_COST_COLUMNS))
    tables.show(shown[["method", *SHOWN_COST_COLUMNS]])
    # One snippet and length: its signals are the same under every method; show them once.
    st.subheader("Membership signals of the snippet")
    signals_view(next(iter(results.values())).membership)
    # p_z is of the true suffix given the prefix: the snippet's, the same under every method.
    st.subheader("Probabilistic extraction of the suffix")
    verbatim = next(iter(results.values())).verbatim
    pz_view(verbatim, key="cmp_pz")  # with the bracket around p_z in words
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
    # The output with the highest Mem is open: the one a reader looks at first.
    best = max(results, key=lambda m: results[m].mem or 0.0)
    for method in registry.method_order(results):
        r = results[method]
        with st.expander(
            f"{method_label(method)}: Mem {r.mem:.3f}, LCS_P {r.lcs_p:.3f}",
            expanded=method == best,
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


def cut_owner_caption(split_info: dict[str, object]) -> None:
    """Whose tokenizer made the prefix|suffix cut shown above, and that every method is scored
    on it: P-S-Base sends the same prefix to the base model, whose own tokenizer may cut the
    snippet elsewhere."""
    text = cut_owner_text(split_info)
    if text:
        st.caption(md(text))


def cut_owner_text(split_info: dict[str, object]) -> str | None:
    """The words of :func:`cut_owner_caption` (``None`` before a run has a cut)."""
    name = split_info.get("tokenizer_name")
    if not name or split_info.get("prefix") is None:
        return None
    whose = (
        "on whitespace words (the victim, the instruct model, has no tokenizer here)"
        if name == "whitespace"
        else f"by the victim's tokenizer ({name}, the instruct model's)"
    )
    return (
        f"This cut is made {whose}, and every method is scored on it: P-S-Base sends this "
        "prefix text to the base model and its output is scored against this suffix, not "
        "against a cut by the base model's own tokenizer."
    )


def stored_table(run_id: int | None) -> pd.DataFrame:
    """The comparison's rows as the store holds them (:func:`results_table` of the run's results
    frame, the partial bests of cancelled methods included); empty before the first is stored."""
    store = get_store()
    if store is None or run_id is None:
        return results_table(pd.DataFrame())
    return results_table(store.results_frame(run_id, cancelled=True))


def _level(chance: ChanceLevel | None) -> float | None:
    return None if chance is None else chance.level


def _beats(chance: ChanceLevel | None) -> str:
    """``yes`` / ``no`` / ``undefined`` (never a bare None in the table)."""
    if chance is None or chance.beats is None:
        return "undefined"
    return "yes" if chance.beats else "no"


def method_chances(
    results: Mapping[str, Any], split_info: dict[str, Any], store: Any = None
) -> dict[str, Any]:
    """Each method's chance control of its output: its stored unit's (the fields the run's
    report reads, so the page and the report give one verdict), else reckoned here by the same
    rule (not stored yet, or cancelled); the words its own prompt handed the victim are not
    credited (the prompt goes along, as on the Probe page)."""
    run_id = split_info.get("run_id")
    return {
        m: stored_unit_chance(store, run_id, r)
        or output_chance(r.output, r.mem, split_info, r.prompt)
        for m, r in results.items()
    }
