"""Compare: one snippet through every method the loaded models allow, side by side."""

from __future__ import annotations

import streamlit as st

import ui_common as ui
from memprobe_core.attacks import registry
from memprobe_core.config import DEFAULT_ALPHA
from memprobe_core.runs.roles import ModelNames
from ui_common import compare_view, presets
from ui_common import methods as methods_ui
from ui_common.models import role_users

JOB = "compare_job"

ui.page_setup("Compare")
st.title("Compare methods on one snippet")
st.caption(
    "Every method on the same snippet, scored against the same true suffix: "
    + "; ".join(f"{spec.label}: {spec.summary}" for spec in registry.specs() if spec.extracts)
    + "."
)

use_reverse = st.sidebar.checkbox(
    f"Use a reverse LM ({role_users('reverse')})",
    key=ui.keep("model_use_reverse", False),
    help="Needs a model trained on reversed token order, e.g. "
    "afterless/reverse-pythia-160m (local path when offline).",
)
roles = ("instruct", "base", "attacker") + (("reverse",) if use_reverse else ())
models = ui.model_sidebar(roles)
# The methods' "victim" is this page's instruct model (P-S-Inst and Ours audit the instruction-
# tuned model, P-S-Base and GCG its base); the init model is the attacker, as in the paper.
SLOT_OF_ROLE = {"victim": "instruct"}
ROLE_OF_SLOT = {slot: role for role, slot in SLOT_OF_ROLE.items()}
victim_choice = models["instruct"]
st.caption(
    ui.md(
        f"{ui.role_label('instruct')}: {victim_choice.label or '(not set)'} · "
        f"{ui.role_label('base')}: {models['base'].label or '(not set)'} · change them in the "
        "sidebar (Models)."
    )
)
store = ui.get_store()

snippet = ui.snippet_picker("compare")
presets.preset_widget("cmp")
length = ui.length_widget("cmp")
offered = methods_ui.offered_methods(models, SLOT_OF_ROLE, extracting_only=True)
note = methods_ui.unoffered_note(offered)
if note:
    st.caption(note)
default = registry.default_compare_methods()
methods = methods_ui.method_picker("cmp_methods", offered, default=default)
widgets = methods_ui.method_option_widgets("cmp", methods)
alpha = DEFAULT_ALPHA  # until a snippet picks the paper's α for its domain and length
if snippet is not None:
    alpha = ui.alpha_widget(
        "cmp", domain=snippet.domain, length=length, model_name=victim_choice.name
    )


def start() -> None:
    """Load the models the chosen methods need, split, record the run, start the worker."""

    if store is None or snippet is None:
        return
    options = methods_ui.build_options(alpha, widgets)
    model_set = methods_ui.load_model_set(models, methods, SLOT_OF_ROLE)
    if options is None or model_set is None:
        return
    # Keyed by method role (victim = the instruct model), as probe and audit runs are.
    names = ModelNames(
        victim=models["instruct"].label,
        base=models["base"].label,
        attacker=models["attacker"].label,
        reverse=models["reverse"].label if "reverse" in models else None,
        dtypes=ui.asked_dtypes({ROLE_OF_SLOT.get(slot, slot): c for slot, c in models.items()}),
    )
    view = methods_ui.start_recorded_run(
        JOB,
        store,
        snippet,
        methods,
        length,
        model_set,
        options,
        kind="compare",
        model_names=names.resolved().to_dict(),
    )
    if view is not None:
        st.session_state["cmp_split"] = view


presets.estimate_caption(
    store, presets.planned_candidates(methods, widgets), models["instruct"].label, length
)
running = ui.job_running(JOB)
if st.button(
    "Run comparison",
    type="primary",
    key="cmp_run",
    disabled=running or snippet is None or not methods,
):
    start()

snap = ui.show_job(JOB, compare_view.render)
if snap is not None and snap.is_final:
    run_id = (st.session_state.get("cmp_split") or {}).get("run_id")
    if run_id is not None:
        st.success(f"Run {run_id} is saved; the Runs page reopens it and exports it as CSV.")
elif snap is None:
    st.info("Choose a snippet, the models and the methods, then press Run comparison.")
