"""Audit: a dataset × methods × lengths, with progress and ETA, a Table-1 report, and resume."""

from __future__ import annotations

from typing import get_args

import streamlit as st

import ui_common as ui
from memprobe_core.attacks import registry
from memprobe_core.audit import ModelNames, start_audit, start_inference
from memprobe_core.config import DEFAULT_ALPHA, DEFAULT_LENGTH
from memprobe_core.membership.inference import DEFAULT_SIGNIFICANCE
from memprobe_core.runs.unit import SplitTokenizer
from ui_common import audit_summary, audit_view, presets
from ui_common import methods as methods_ui
from ui_common.snippets import LENGTH_CHOICES, PAPER_LENGTHS

JOB = "audit_job"

ui.page_setup("Audit")
st.title("Audit a dataset")
st.caption(
    "Every snippet × length × method is one unit; each is stored when it ends, so a "
    "stopped audit resumes where it was."
)

use_reverse = st.sidebar.checkbox(
    "Use a reverse LM (Reverse-LM method)", key=ui.keep("model_use_reverse", False)
)
roles = ("victim", "base", "attacker") + (("reverse",) if use_reverse else ())
models = ui.model_sidebar(roles)
store = ui.get_store()
if store is None:
    st.stop()

# The job's state before anything below reads its run from the store (see show_job).
seen = ui.job_snapshot(JOB)
tab_run, tab_infer, tab_report = st.tabs(["New audit / resume", "Dataset inference", "Report"])

with tab_run:
    presets.audit_size_widget()
    snippets, record = audit_view.dataset()
    offered = methods_ui.offered_methods(models, {})
    c1, c2 = st.columns(2)
    with c1:
        methods = methods_ui.method_picker(
            "audit_methods", offered, default=registry.default_audit_methods()
        )
    lengths = c2.multiselect(
        "Lengths (tokens)",
        list(LENGTH_CHOICES),
        key=ui.keep("audit_lengths", list(presets.audit_size().lengths)),
        help=f"paper: {PAPER_LENGTHS}",
    )
    note = methods_ui.unoffered_note(offered)
    if note:
        st.caption(note)
    with st.expander("Method options"):
        widgets = methods_ui.method_option_widgets("audit", methods, expander=False)
        fixed_alpha = st.checkbox(
            "One α for every snippet (else the paper's table per domain and length)",
            key="audit_fix_alpha",
        )
        alpha = (
            st.slider("α", 0.0, 1.0, DEFAULT_ALPHA, 0.05, key="audit_alpha")
            if fixed_alpha
            else None
        )
        labelled = any(s.label is not None for s in snippets)
        widgets |= methods_ui.measure_widgets("audit", labelled=labelled)
        split_tok = st.radio(
            "Split by",
            list(get_args(SplitTokenizer)),
            horizontal=True,
            key="audit_split",
            help="the victim's tokens (paper) or words",
        )
    executor = audit_view.executor_choice()
    busy = ui.job_running(JOB) or executor is None
    ready = bool(snippets and methods and lengths)
    if ready:  # before Start: the time it should take here (every snippet × length × method)
        presets.estimate_caption(
            store,
            presets.planned_candidates(methods, widgets),
            models["victim"].label,
            lengths[0],
            snippets=len(snippets),
            lengths=lengths,
        )
    if (
        st.button("Start audit", type="primary", disabled=busy or not ready, key="audit_start")
        and executor is not None
    ):
        # On Ray the workers load the models by name; this process needs none.
        on_ray = executor.name == "ray"
        model_set = None if on_ray else methods_ui.load_model_set(models, methods, {})
        options = methods_ui.build_options(alpha, widgets)
        if options is not None and (model_set is not None or on_ray):
            try:
                names = ModelNames(
                    victim=models["victim"].label,
                    base=models["base"].label,
                    attacker=models["attacker"].label,
                    reverse=models["reverse"].label if use_reverse else None,
                    dtypes=ui.asked_dtypes(models),
                )
                run_id = start_audit(
                    store,
                    snippets,
                    methods,
                    lengths,
                    options,
                    names,
                    title=f"audit {len(snippets)} snippets",
                    split_tokenizer=split_tok,
                    dataset=record,
                )
            except ValueError as exc:
                st.error(ui.md(str(exc)))
            else:
                st.session_state["audit_run_id"] = run_id
                ui.start_job(
                    JOB,
                    audit_view.audit_job(store, run_id, model_set, resume=False, executor=executor),
                    f"Audit run {run_id}",
                    run_id=run_id,
                )

    audit_view.resume_section(store, models, executor, busy=busy, job=JOB)

with tab_infer:
    st.caption(
        "Was this set of texts, as a whole, used to train the victim? The membership signals "
        "of a suspect set and of a held-out set from the same distribution, a weighting learnt "
        "on half of each, a one-sided Welch t-test on the other half (Maini et al. 2024). "
        "Signals only: no extraction runs. The report appears in the Report tab."
    )
    suspect, heldout, infer_sources = audit_view.inference_inputs()
    i1, i2 = st.columns(2)
    infer_lengths = i1.multiselect(
        "Lengths (tokens scored per text)",
        list(LENGTH_CHOICES),
        default=[DEFAULT_LENGTH],
        key="infer_lengths",
    )
    significance = i2.number_input(
        "Significance level", 0.001, 0.5, DEFAULT_SIGNIFICANCE, 0.01, key="infer_level"
    )
    executor_i = audit_view.executor_choice(key="infer")
    busy_i = ui.job_running(JOB) or executor_i is None
    if (
        st.button(
            "Start dataset inference",
            type="primary",
            disabled=busy_i or not (suspect and heldout and infer_lengths),
            key="infer_start",
        )
        and executor_i is not None
    ):
        on_ray = executor_i.name == "ray"
        model_set = None if on_ray else methods_ui.load_model_set(models, ["signals"], {})
        if model_set is not None or on_ray:
            try:
                run_id = start_inference(
                    store,
                    suspect,
                    heldout,
                    infer_lengths,
                    models=ModelNames(
                        victim=models["victim"].label, dtypes=ui.asked_dtypes(models)
                    ),
                    significance=float(significance),
                    sources=(infer_sources["suspect"], infer_sources["heldout"]),
                )
            except ValueError as exc:
                st.error(ui.md(str(exc)))
            else:
                st.session_state["audit_run_id"] = run_id
                ui.start_job(
                    JOB,
                    audit_view.audit_job(
                        store, run_id, model_set, resume=False, executor=executor_i
                    ),
                    f"Dataset inference run {run_id}",
                    run_id=run_id,
                )

with tab_report:
    audit_view.report_tab(store)

# Below the tabs: an audit's or an inference's progress shows whichever tab is open, and once
# its job has ended, what it found and the way to its report.
snap = ui.show_job(JOB, audit_view.render_live, seen=seen)
audit_summary.after_job(store, ui.current_job(JOB), snap)
