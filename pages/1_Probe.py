"""Probe: one snippet, the attacker loop (Algorithm 1) run live, every candidate stored as scored."""

from __future__ import annotations

import streamlit as st

import ui_common as ui
from memprobe_core.attacks.interactive import METHOD  # this page is the attacker loop, live
from memprobe_core.config import DEFAULT_ALPHA
from memprobe_core.runs.roles import ModelNames
from ui_common import charts, presets
from ui_common import methods as methods_ui
from ui_common.job_runner import ProgressSnapshot
from ui_common.render import stored_unit_chance

JOB = "probe_job"

ui.page_setup("Probe")
st.title("Probe one snippet")
st.caption(
    "The attacker model writes a prompt asking for the snippet, then refines it round by round; "
    "the victim answers each candidate and the objective O = α·Mem − (1−α)·LCS_P picks the best."
)

# The attacker loop uses no base model: the sidebar offers only the two it runs.
models = ui.model_sidebar(("victim", "attacker"))
st.caption(
    ui.md(
        f"Victim (answers every candidate; Mem is its output): {models['victim'].label or '(not set)'}"
        f" · attacker (writes and refines the prompts): {models['attacker'].label or '(not set)'}. "
        "Compare's P-S-Inst and Ours attack its instruct model instead: a snippet's Mem on the "
        "two pages measures different models."
    )
)
store = ui.get_store()

snippet = ui.snippet_picker("probe")
presets.preset_widget("probe")
length = ui.length_widget("probe")
widgets = methods_ui.method_option_widgets("probe", [METHOD], advanced=True)
alpha = DEFAULT_ALPHA  # until a snippet picks the paper's α for its domain and length
if snippet is not None:
    alpha = ui.alpha_widget(
        "probe", domain=snippet.domain, length=length, model_name=models["victim"].name
    )


def render(snap: ProgressSnapshot) -> None:
    """Candidate table, charts, the best prompt and its overlap with the suffix."""
    split_info = st.session_state.get("probe_split") or {}
    ui.split_caption(split_info)
    frame = charts.candidate_rows(snap.items)
    # Live: the charts show the finished rounds (rebuilt per round, the table per candidate).
    before = None if snap.is_final else snap.data.get("round")
    result = snap.data.get("results", {}).get(METHOD)
    # Finished: the chance verdict its report gives (the stored unit's), not a second reckoning.
    stored = stored_unit_chance(store, split_info.get("run_id"), result) if snap.is_final else None
    ui.probe_view(frame, split_info, result, charts_before_round=before, stored_chance=stored)


def start() -> None:
    """Load models, split the snippet, record the run and start the worker thread."""

    if store is None or snippet is None:
        return
    options = methods_ui.build_options(alpha, widgets)
    model_set = methods_ui.load_model_set(models, [METHOD], {})
    if options is None or model_set is None:
        return
    names = ModelNames(
        victim=models["victim"].label,
        attacker=models["attacker"].label,
        dtypes=ui.asked_dtypes(models),
    )
    view = methods_ui.start_recorded_run(
        JOB,
        store,
        snippet,
        [METHOD],
        length,
        model_set,
        options,
        kind="probe",
        model_names=names.resolved().to_dict(),
        count="candidates",
    )
    if view is not None:
        st.session_state["probe_split"] = view


presets.estimate_caption(
    store, presets.planned_candidates([METHOD], widgets), models["victim"].label, length
)
running = ui.job_running(JOB)
if st.button("Run probe", type="primary", disabled=running or snippet is None, key="probe_run"):
    start()

snap = ui.show_job(JOB, render)
if snap is not None and snap.is_final:
    run_id = (st.session_state.get("probe_split") or {}).get("run_id")
    if run_id is not None:
        st.success(
            f"Run {run_id} is saved: every candidate is in the store. "
            "Open it again on the Runs page."
        )
        st.page_link("pages/5_Runs.py", label="Runs", icon=":material/history:")
elif snap is None:
    st.info(
        "Choose a snippet and the models, then press Run probe. While a round runs you watch "
        "the attacker write its prompts and the victim write every answer, token by token, "
        "with a running Mem; the victim answers a round's candidates as one batch (much faster "
        "than one by one), so their final scores land together when the batch ends."
    )
