"""Compare: one snippet through P-S-Base, P-S-Inst, Reverse-LM, GCG and Ours, side by side."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ui_common as ui
from memprobe_core.attacks.common import AttackOptions, GCGOptions, InteractiveOptions, ModelSet
from memprobe_core.attacks.result import METHOD_LABELS
from memprobe_core.audit import roles_needed
from memprobe_core.audit.runs import comparison_table, start_probe
from memprobe_core.audit.unit import SplitSpec
from memprobe_core.data import DataError, split
from ui_common import charts
from ui_common.job_runner import ProgressSnapshot, recorded_methods_job
from ui_common.render import cached_figure

JOB = "compare_job"

ui.page_setup("Compare")
st.title("Compare methods on one snippet")
st.caption(
    "Prefix–suffix on the base model (P-S-Base) and on the instruct model (P-S-Inst), a reverse "
    "LM writing a prefix (Reverse-LM), token-gradient search on the base model (GCG, white box "
    "only) and the attacker loop against the instruct model (Ours), all scored against the same "
    "true suffix."
)

use_reverse = st.sidebar.checkbox(
    "Use a reverse LM (Reverse-LM method)",
    key=ui.keep("model_use_reverse", False),
    help="Needs a model trained on reversed token order, e.g. "
    "afterless/reverse-pythia-160m (local path when offline).",
)
roles = ("instruct", "base", "attacker") + (("reverse",) if use_reverse else ())
models = ui.model_sidebar(roles)
# The methods' "victim" is this page's instruct model (P-S-Inst and Ours audit the instruction-
# tuned model, P-S-Base and GCG its base); the init model is the attacker, as in the paper.
SLOT_OF_ROLE = {"victim": "instruct", "init": "attacker"}
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
c1, c2, c3, c4 = st.columns(4)
length = int(
    c1.number_input(
        "Length (tokens)",
        4,
        4000,
        200,
        step=10,
        key="cmp_length",
        help="prefix + suffix, split 33/67 (paper: 200, 300, 500)",
    )
)
rounds = int(c2.number_input("Ours: rounds T", 0, 20, 3, key="cmp_rounds"))
n_cand = int(c3.number_input("Ours: candidates n", 1, 64, 8, key="cmp_n", help="paper: 24"))
gcg_steps = int(
    c4.number_input(
        "GCG steps",
        1,
        500,
        10,
        key="cmp_gcg_steps",
        help="paper: 30; each step is a forward and backward pass of the base model, slow on a CPU",
    )
)

# GCG needs weights and gradients: endpoints never have them; local models do.
base_white_box = models["base"].kind in ("embedded", "hub", "fake")
available = ["ps_base", "ps_inst"] + (["reverse_lm"] if use_reverse else [])
available += (["gcg"] if base_white_box else []) + ["interactive"]
if not use_reverse:
    st.caption("Reverse-LM is offered once a reverse model is set in the sidebar.")
if not base_white_box:
    st.caption("GCG is offered only when the base model is local (white box); an endpoint is not.")
methods = st.multiselect(
    "Methods",
    available,
    default=[m for m in available if m != "gcg"],
    format_func=lambda m: METHOD_LABELS[m],
    key="cmp_methods",
)
alpha = 0.5
if snippet is not None:
    alpha = ui.alpha_widget(
        "cmp", domain=snippet.domain, length=length, model_name=victim_choice.name
    )
with st.expander("More options"):
    scoring = ui.scoring_widgets("cmp_scoring")
    seed = int(st.number_input("Seed", 0, 2**31 - 1, 0, key="cmp_seed"))


def start() -> None:
    """Load the models the chosen methods need, split, record the run, start the worker."""

    if store is None or snippet is None:
        return
    needed = roles_needed(methods)
    loaded = {}
    for role in needed:
        slot = SLOT_OF_ROLE.get(role, role)
        loaded[role] = ui.load_model(models[slot], slot)
        if loaded[role] is None:
            return
    chosen = list(methods)
    if "gcg" in chosen and not getattr(loaded.get("base"), "white_box", False):
        st.warning("GCG skipped: the base model does not expose weights and gradients.")
        chosen.remove("gcg")
    tokenizer = ui.split_tokenizer(loaded["victim"])
    try:
        piece = split(snippet, tokenizer, length)
        options = AttackOptions(
            alpha=alpha,
            scoring=scoring,
            seed=seed,
            interactive=InteractiveOptions(rounds=rounds, n_candidates=n_cand),
            gcg=GCGOptions(steps=gcg_steps),
        )
    except (DataError, ValueError) as exc:
        st.error(ui.md(str(exc)))
        return
    model_set = ModelSet(
        victim=loaded["victim"],
        base=loaded.get("base"),
        attacker=loaded.get("attacker"),
        init=loaded.get("attacker"),
        reverse=loaded.get("reverse"),
    )
    ordered = charts.method_order(chosen)
    run_id = start_probe(
        store,
        snippet,
        ordered,
        length,
        model_set,
        options,
        kind="compare",
        # Keyed by method role (victim = the instruct model), as probe and audit runs are.
        model_names={
            role: models[slot].label
            for role, slot in (
                (r, SLOT_OF_ROLE.get(r, r)) for r in ("victim", "base", "attacker", "reverse")
            )
            if slot in models
        },
        split_spec=SplitSpec("whitespace" if tokenizer == "whitespace" else "model"),
        title=f"compare {snippet.id} · {length} tokens",
    )
    st.session_state["cmp_split"] = {
        "suffix": piece.suffix,
        "suffix_tokens": piece.suffix_tokens,
        "scoring": scoring,
        "tokenizer": None if tokenizer == "whitespace" else tokenizer,
        "run_id": run_id,
        "prefix": piece.prefix,
    }
    job_fn = recorded_methods_job(store, run_id, model_set)
    job = ui.start_job(
        JOB,
        job_fn,
        f"Compare run {run_id}",
        run_id=run_id,
        on_cancel_before_start=lambda: store.set_run_status(run_id, "cancelled"),
    )
    job.progress.set(total=len(ordered))


def render(snap: ProgressSnapshot) -> None:
    """Live: the scores of the methods done so far and the candidates of the one in flight."""
    results = snap.data.get("results", {})
    errors = snap.data.get("errors", {})
    for method, message in errors.items():
        st.error(ui.md(f"{METHOD_LABELS.get(method, method)} failed: {message}"))
    if not results:
        items = pd.DataFrame(snap.items)
        if not items.empty:
            ui.candidates_table(
                charts.candidate_rows(snap.items).assign(method=items["method"]), height=240
            )
        return
    split_info = st.session_state.get("cmp_split") or {}
    table = comparison_table(results)
    st.subheader("Scores")
    st.dataframe(
        table.drop(columns=["method"]).rename(columns={"label": "method"}),
        hide_index=True,
        width="stretch",
        column_config={
            c: st.column_config.NumberColumn(format="%.3f")
            for c in ("mem", "lcs_p", "dis", "objective")
        },
    )
    # One snippet and length: its signals are the same under every method; show them once.
    st.subheader("Membership signals of the snippet")
    ui.signals_view(next(iter(results.values())).membership)
    # Built once per finished method: the page is redrawn for every candidate of the one in flight.
    version = (split_info.get("run_id"), tuple(results))
    left, right = st.columns(2)
    with left:
        st.plotly_chart(
            cached_figure("cmp_methods", version, lambda: charts.method_bars(table)),
            width="stretch",
        )
    with right:
        st.plotly_chart(
            cached_figure("cmp_costs", version, lambda: charts.cost_bars(table)), width="stretch"
        )
    st.subheader("Prompts")
    cols = st.columns(len(results))
    for col, method in zip(cols, charts.method_order(results)):
        with col:
            st.markdown(f"**{METHOD_LABELS.get(method, method)}**")
            st.code(results[method].prompt, language=None, wrap_lines=True)
    st.subheader("Outputs against the true suffix")
    for method in charts.method_order(results):
        r = results[method]
        with st.expander(
            f"{METHOD_LABELS.get(method, method)}: Mem {r.mem:.3f}, LCS_P {r.lcs_p:.3f}",
            expanded=method == "interactive",
        ):
            if split_info.get("suffix") is not None:
                ui.overlap_view(
                    r.output,
                    split_info["suffix"],
                    split_info.get("scoring"),
                    suffix_tokens=split_info.get("suffix_tokens"),
                    tokenizer=split_info.get("tokenizer"),
                )
            st.markdown("PII in this output (copied from the suffix / invented):")
            ui.pii_view(r.pii)
            st.markdown(ui.verbatim_caption(r.verbatim))


running = ui.job_running(JOB)
if st.button(
    "Run comparison",
    type="primary",
    key="cmp_run",
    disabled=running or snippet is None or not methods,
):
    start()

snap = ui.show_job(JOB, render)
if snap is not None and snap.is_final:
    run_id = (st.session_state.get("cmp_split") or {}).get("run_id")
    if run_id is not None:
        st.success(f"Run {run_id} is saved; the Runs page reopens it and exports it as CSV.")
elif snap is None:
    st.info("Choose a snippet, the models and the methods, then press Run comparison.")
