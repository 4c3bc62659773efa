"""The Runs page's "Compare two models" tab: ``memprobe diff`` on two runs picked by the user.

The figures are the core's (:func:`memprobe_core.release.diff.diff_runs`); this module picks the
runs, draws the table, the units whose Mem changed most (each output beside the true suffix, the
shared text highlighted, everything escaped) and offers the CSV and HTML downloads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from memprobe_core.attacks.registry import method_label
from memprobe_core.errors import UsageError
from memprobe_core.release.diff import RunDiff, diff_runs
from memprobe_core.release.render import DIFF_SHOWN, diff_html, diff_shown, voided_notes
from memprobe_core.store import Store
from ui_common import tables
from ui_common.page import md
from ui_common.render import csv_download, overlap_view

_SHOWN_UNITS = 5


def compare_models(store: Store, by_id: Mapping[int, Mapping[str, Any]]) -> None:
    """Two runs of the same units on two models: the paired diff, its table and its units."""
    if len(by_id) < 2:
        st.info(
            "Comparing two models needs two audit runs in the store (document runs are "
            "compared on the Document page, beside their map)."
        )
        return
    st.caption(
        "Two audits of the same snippets, methods and lengths on two models (e.g. the shipped "
        "model and a candidate), compared unit by unit: `memprobe diff A B` (docs/ci.md)."
    )
    ids = list(by_id)
    left, right = st.columns(2)
    label = {i: f"#{i} {by_id[i].get('title') or by_id[i].get('kind', '')}" for i in ids}
    run_a = left.selectbox(
        "Baseline (A)", ids, index=1, format_func=label.__getitem__, key="runs_diff_a"
    )
    run_b = right.selectbox(
        "Candidate (B)", ids, index=0, format_func=label.__getitem__, key="runs_diff_b"
    )
    try:
        diff = _diff(store, run_a, run_b, (by_id[run_a]["updated"], by_id[run_b]["updated"]))
    except UsageError as exc:  # the same run twice, no unit in common: the message says what
        st.warning(md(str(exc)))
        return
    _summary(diff)
    # The HTML diff's table, labelled the same way (memprobe_core.release.render.diff_shown).
    tables.show(diff_shown(diff), tips=DIFF_SHOWN, keep=tuple(DIFF_SHOWN))
    a, b = st.columns(2)
    with a:
        csv_download(
            "Download the table (CSV)", diff.table, f"diff-{run_a}-{run_b}.csv", key="runs_diff_csv"
        )
    with b:
        st.download_button(
            "Download the diff (HTML)",
            data=diff_html(diff).encode("utf-8"),
            file_name=f"diff-{run_a}-{run_b}.html",
            mime="text/html",
            key="runs_diff_html",
        )
    _changed_units(diff)


@st.cache_data(show_spinner="Comparing the two runs…", max_entries=8)
def _diff_cached(path: str, run_a: int, run_b: int, stamps: tuple[float, float]) -> RunDiff:
    return diff_runs(Store(path), run_a, run_b)


def _diff(store: Store, run_a: int, run_b: int, stamps: tuple[float, float]) -> RunDiff:
    """The diff, kept while neither run changes (``stamps``: their ``updated`` times)."""
    return _diff_cached(str(store.path), run_a, run_b, stamps)


def _summary(diff: RunDiff) -> None:
    runs = diff.runs
    significant = diff.significant()
    rising = significant[significant["change"] > 0]
    count = len(diff.voided())
    voided = f"; {count} voided by a validity control" if count else ""
    st.markdown(
        f"**{md(runs.victim_b)}** (run {runs.run_b}) against **{md(runs.victim_a)}** (run "
        f"{runs.run_a}): {runs.units} paired units; {len(significant)} of {len(diff.table)} "
        f"changes significant, {len(rising)} of them increases{voided}."
    )
    if runs.note():
        st.info(md(runs.note()))
    notes = voided_notes(diff)
    if notes:  # the report's controls void these figures: say so before the table shows them
        st.warning("\n".join(f"- {md(line)}" for line in notes))


def _changed_units(diff: RunDiff) -> None:
    if diff.changed.empty:
        return
    st.subheader("Units whose Mem changed most")
    for row in diff.changed.head(_SHOWN_UNITS).itertuples(index=False):
        st.markdown(
            md(
                f"{row.snippet_id} / {method_label(str(row.method))} @ {row.length}: Mem "
                f"{row.mem_a:.3f} → "
                f"{row.mem_b:.3f}"
            )
        )
        for side, output in (("A", row.output_a), ("B", row.output_b)):
            overlap_view(str(output or ""), str(row.suffix or ""), title=f"{side}: output")
