"""Probe: one snippet, the attacker loop (Algorithm 1) run live, every candidate stored as scored."""

from __future__ import annotations

import dataclasses

import streamlit as st

import ui_common as ui
from memprobe_core.attacks.common import AttackOptions, InteractiveOptions, ModelSet
from memprobe_core.audit.runs import start_probe
from memprobe_core.audit.unit import SplitSpec
from memprobe_core.data import DataError, split
from ui_common import charts
from ui_common.job_runner import ProgressSnapshot, recorded_methods_job

JOB = "probe_job"

ui.page_setup("Probe")
st.title("Probe one snippet")
st.caption(
    "The attacker model writes a prompt asking for the snippet, then refines it round by round; "
    "the victim answers each candidate and the objective O = α·Mem − (1−α)·LCS_P picks the best."
)

models = ui.model_sidebar(("victim", "base", "attacker"))
store = ui.get_store()

snippet = ui.snippet_picker("probe")
c1, c2, c3, c4 = st.columns(4)
length = int(
    c1.number_input(
        "Length (tokens)",
        4,
        4000,
        200,
        step=10,
        key="probe_length",
        help="prefix + suffix, split 33/67 (paper: 200, 300, 500)",
    )
)
rounds = int(c2.number_input("Rounds T", 0, 20, 3, key="probe_rounds", help="paper: 3"))
n_cand = int(
    c3.number_input(
        "Candidates per round n",
        1,
        64,
        8,
        key="probe_n",
        help="paper: 24; fewer run faster on a CPU",
    )
)
seed = int(c4.number_input("Seed", 0, 2**31 - 1, 0, key="probe_seed"))
alpha = 0.5
if snippet is not None:
    alpha = ui.alpha_widget(
        "probe", domain=snippet.domain, length=length, model_name=models["victim"].name
    )
with st.expander("More options"):
    scoring = ui.scoring_widgets("probe_scoring")
    o1, o2, o3 = st.columns(3)
    access = o1.radio(
        "Attacker sees",
        ["full", "partial"],
        horizontal=True,
        key="probe_access",
        help="partial: the prefix only (paper §5.3); Mem is still against the suffix",
    )
    compat = o2.radio(
        "Conventions",
        ["paper", "reference"],
        horizontal=True,
        key="probe_compat",
        help="reference: the paper's reference code (victim writes the whole "
        "length, the last len(suffix) tokens scored; its meta-prompts; "
        "best_rougeL; BOS in the prefix). See README, --compat.",
    )
    max_prompt_tokens = (
        int(
            o3.number_input(
                "Max prompt tokens",
                0,
                8192,
                0,
                key="probe_mpt",
                help="tokens the attacker writes per prompt; 0: the conventions' default (256, reference "
                "500)",
            )
        )
        or None
    )


def render(snap: ProgressSnapshot) -> None:
    """Candidate table, charts, the best prompt and its overlap with the suffix."""
    split_info = st.session_state.get("probe_split") or {}
    frame = charts.candidate_rows(snap.items)
    # Live: the charts show the finished rounds (rebuilt per round, the table per candidate).
    before = None if snap.is_final else snap.data.get("round")
    ui.probe_view(
        frame,
        split_info,
        snap.data.get("results", {}).get("interactive"),
        charts_before_round=before,
    )


def start() -> None:
    """Load models, split the snippet, record the run and start the worker thread."""

    victim = ui.load_model(models["victim"], "victim")
    attacker = ui.load_model(models["attacker"], "attacker")
    if victim is None or attacker is None or store is None or snippet is None:
        return
    tokenizer = ui.split_tokenizer(victim)
    try:
        piece = split(snippet, tokenizer, length)  # checked now, so a bad length shows here
        # The reference code scores the last len(suffix) tokens of what the victim wrote.
        scored = (
            dataclasses.replace(scoring, output_window="last") if compat == "reference" else scoring
        )
        options = AttackOptions(
            alpha=alpha,
            scoring=scored,
            seed=seed,
            compat=compat,
            interactive=InteractiveOptions(
                rounds=rounds,
                n_candidates=n_cand,
                access=access,
                max_prompt_tokens=max_prompt_tokens,
            ),
        )
    except (DataError, ValueError) as exc:
        st.error(ui.md(str(exc)))
        return
    model_set = ModelSet(victim=victim, attacker=attacker, init=attacker)
    run_id = start_probe(
        store,
        snippet,
        ["interactive"],
        length,
        model_set,
        options,
        model_names={role: models[role].label for role in ("victim", "attacker")},
        split_spec=SplitSpec("whitespace" if tokenizer == "whitespace" else "model"),
        title=f"probe {snippet.id} · {length} tokens",
    )
    st.session_state["probe_split"] = {
        "suffix": piece.suffix,
        "suffix_tokens": piece.suffix_tokens,
        "scoring": scored,
        "tokenizer": None if tokenizer == "whitespace" else tokenizer,
        "run_id": run_id,
    }
    job_fn = recorded_methods_job(store, run_id, model_set, count="candidates")
    job = ui.start_job(
        JOB,
        job_fn,
        f"Probe run {run_id}",
        run_id=run_id,
        on_cancel_before_start=lambda: store.set_run_status(run_id, "cancelled"),
    )
    job.progress.set(total=1 + rounds * n_cand)


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
        "Choose a snippet and the models, then press Run probe. Candidates appear here as "
        "the victim answers them."
    )
