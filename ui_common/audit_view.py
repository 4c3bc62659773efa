"""The Audit page's views: the dataset chooser, where units run, the live job and the report.

The audit itself (recording, running, resuming, the report's statistics) is the core's
(:mod:`memprobe_core.audit`, :mod:`memprobe_core.report`); these helpers read widgets into its
arguments and draw what it returns.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from memprobe_core.attacks import registry
from memprobe_core.attacks.events import CandidateScored
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.audit import resume_audit, run_audit
from memprobe_core.audit.inference import short_numbers
from memprobe_core.config import SELECTIONS
from memprobe_core.errors import UsageError
from memprobe_core.executors import Executor, make_executor
from memprobe_core.machine_load import cpu_cores
from memprobe_core.membership.blind import (
    RANDOM_SPLIT_METHOD,
    RANDOM_SPLIT_OK,
    RANDOM_SPLIT_TOO_FEW,
    blind_method,
    random_split_warning,
)
from memprobe_core.membership.evaluate import FPR_TARGETS
from memprobe_core.membership.inference import ASSUMPTION as INFERENCE_ASSUMPTION
from memprobe_core.membership.inference import METHOD as INFERENCE_METHOD
from memprobe_core.membership.verdict import (
    EVIDENCE,
    INCONCLUSIVE,
    Verdict,
    inference_verdict,
    membership_verdict,
    with_voided_by,
)
from memprobe_core.report.build import Report
from memprobe_core.report.formatting import SMALL_N_MARK, p_text
from memprobe_core.report.pam_cells import with_pam_cell
from memprobe_core.report.stats import DEFAULT_RESAMPLES
from memprobe_core.runs.eta import EtaModel
from memprobe_core.snippets.corpus import DOMAINS, demo_corpus, demo_split, nonmember_summary
from memprobe_core.snippets.loaders import LoadSpec
from memprobe_core.snippets.nonmembers import NONMEMBER_DOMAINS
from memprobe_core.snippets.split import DataError, Snippet
from memprobe_core.stats import CONFIDENCE, SMALL_N
from memprobe_core.store import Store
from ui_common import charts, presets, tables
from ui_common.audit_summary import cached_report
from ui_common.job_runner import JobFunction, Progress, ProgressSnapshot, live_run_ids
from ui_common.jobs import start_job
from ui_common.models import ModelChoice
from ui_common.page import keep, md
from ui_common.render import csv_download, html_report_download, prompt_code
from ui_common.snippets import read_upload

# Where the dataset-inference tab takes its two sets from.
INFER_UPLOAD, INFER_DEMO = "Upload two files", "Built-in demo split"
# The domains chosen while "add generated non-members" was unticked (kept past that widget).
_PLAIN_DOMAINS = "_audit_domains_plain"

EXECUTOR_LABELS = {
    "local": "This process (one unit at a time)",
    "ray": "Ray cluster (units in parallel on worker actors)",
}


def dataset() -> tuple[list[Snippet], dict[str, Any]]:
    """The snippets to audit and a record of where they came from (empty: none chosen yet)."""
    source = st.radio("Dataset", ["Built-in corpus", "Upload"], horizontal=True, key="audit_source")
    if source == "Built-in corpus":
        return _builtin_dataset()
    return _uploaded_dataset()


def _builtin_dataset() -> tuple[list[Snippet], dict[str, Any]]:
    labelled = st.checkbox(
        "add generated non-members (labelled audit)",
        key="audit_nonmembers",
        help="Label the corpus snippets 'member' and add as many texts generated on this "
        "machine (that no model can have seen) per domain, labelled 'non-member'; the "
        "report then gives AUROC and TPR at low FPR. Legal and code domains only.",
    )
    dropped = nonmember_dropped(labelled)
    if dropped:
        st.caption(md(dropped))
    offered = list(NONMEMBER_DOMAINS if labelled else DOMAINS)
    c1, c2 = st.columns(2)
    # One widget per choice: each keeps its own selection. Unlabelled, the run size (Quick or
    # Paper sizes, ui_common.presets) gives the first domains and snippets per domain.
    size = presets.audit_size()
    if labelled:
        domains = c1.multiselect("Domains", offered, default=offered, key="audit_domains_labelled")
    else:
        kept = [d for d in st.session_state.get("audit_domains", size.domains) if d in offered]
        st.session_state["audit_domains"] = kept
        domains = c1.multiselect("Domains", offered, key="audit_domains")
    if not labelled:  # what ticking the box would change (the widget's state goes with it)
        st.session_state[_PLAIN_DOMAINS] = list(domains)
    limit = int(
        c2.number_input("Snippets per domain", 1, 10_000, key=keep("audit_limit", size.per_domain))
    )
    if not domains:
        st.info("Pick at least one domain.")
        return [], {}
    try:  # a damaged non-member file: say how to rebuild it, do not crash the page
        snippets = demo_corpus(domains=domains, limit_per_domain=limit, nonmembers=labelled)
        made = nonmember_summary() if labelled else None
    except DataError as exc:
        st.error(str(exc))
        return [], {}
    info: dict[str, Any] = {"source": "built-in corpus", "domains": domains, "limit": limit}
    if made is not None:
        info["nonmembers"] = made
        st.caption(
            f"{len(snippets)} snippets: {len(snippets) // 2} members from the built-in corpus, "
            f"as many generated non-members (seed {short_numbers(str(made['seed']))})."
        )
    else:
        st.caption(f"{len(snippets)} snippets from the built-in corpus.")
    return snippets, info


def nonmember_dropped(labelled: bool) -> str:
    """With "add generated non-members" ticked: which chosen domains it drops and why (empty
    when it drops none)."""
    if not labelled:
        return ""
    chosen = st.session_state.get(_PLAIN_DOMAINS, list(DOMAINS))
    dropped = [d for d in chosen if d not in NONMEMBER_DOMAINS]
    if not dropped:
        return ""
    names = " and ".join(dropped)
    have = " and ".join(NONMEMBER_DOMAINS)
    return (
        f"The {names} domain{'s are' if len(dropped) > 1 else ' is'} left out: generated "
        f"non-members exist for {have} only, and a labelled audit needs non-members in every "
        "domain it audits. Untick the box to audit every domain without labels."
    )


def _uploaded_dataset() -> tuple[list[Snippet], dict[str, Any]]:
    upload = st.file_uploader(
        "A .txt, .jsonl, .csv or .parquet file",
        type=["txt", "jsonl", "ndjson", "csv", "parquet"],
        key="upload_audit",
    )
    c1, c2, c3, c4 = st.columns(4)
    text_column = c1.text_input("Text column", "text", key="audit_textcol")
    id_column = c2.text_input("Id column (optional)", "", key="audit_idcol")
    domain_column = c3.text_input("Domain column (optional)", "", key="audit_domcol")
    domain = c4.text_input("Domain of rows without one", "unknown", key="audit_domain")
    txt_blocks = st.checkbox(".txt: one snippet per blank-line-separated block", key="audit_blocks")
    if upload is None:
        st.info("Upload a file, or use the built-in corpus.")
        return [], {}
    spec = LoadSpec(
        text_column=text_column or "text",
        id_column=id_column or None,
        domain_column=domain_column or None,
        domain=domain or None,
        txt_mode="blocks" if txt_blocks else "file",
    )
    result = read_upload(upload, spec)
    if result is None:
        return [], {}
    rejected = [{"row": r.row, "reason": r.reason} for r in result.rejected]
    return result.snippets, {"source": result.source, "rejected": rejected[:200]}


def executor_choice(key: str = "audit") -> Executor | None:
    """The executor picked in "Where units run" (``None`` and an error shown if it is unusable);
    ``key`` prefixes its widgets' keys (one set per tab)."""
    with st.expander("Where units run"):
        kind = st.radio(
            "Executor",
            list(EXECUTOR_LABELS),
            horizontal=True,
            key=f"{key}_executor",
            format_func=EXECUTOR_LABELS.__getitem__,
            help="Ray: each worker loads the models by name and runs whole units; "
            "this page writes the results.",
        )
        if kind == "local":
            return make_executor("local")
        r1, r2, r3 = st.columns(3)
        address = r1.text_input(
            "Ray address",
            "",
            key=f"{key}_ray_address",
            help="auto, HOST:PORT of the head, or empty: a local Ray on 127.0.0.1",
        )
        workers = int(
            r2.number_input("Workers (0: as many as fit)", 0, 1024, 0, key=f"{key}_ray_workers")
        )
        gpus = float(r3.number_input("GPUs per worker", 0.0, 8.0, 0.0, 0.25, key=f"{key}_ray_gpus"))
    try:
        return make_executor(
            "ray", address=address.strip() or None, workers=workers or None, gpus_per_worker=gpus
        )
    except UsageError as exc:
        st.error(md(str(exc)))
        return None


def audit_job(
    store: Store,
    run_id: int,
    model_set: ModelSet | None,
    *,
    resume: bool,
    executor: Executor | None = None,
) -> JobFunction:
    """The worker: run (or resume) the audit, feeding progress, ETA and workers to the page."""

    def job(progress: Progress, cancel: threading.Event) -> object:
        # One unit at a time here (the local executor): the ETA model of Probe and Compare, a
        # unit a batch, so its 2x bound holds for audits too. Ray runs units side by side and
        # keeps the core's rate.
        feed = eta_feed(progress, store, run_id) if executor is None else None

        def on_progress(p: Any) -> None:
            current = f"running {p.current}" if p.current is not None else "between units"
            progress.set(
                done=p.done,
                total=p.total,
                rate=p.rate or None,
                eta=p.eta_s,
                message=f"{p.done}/{p.total} units, {p.errors} failed · {current}",
            )
            if feed is not None:
                feed(p)
            _report_workers(progress, executor)

        def on_event(event: object) -> None:
            if isinstance(event, CandidateScored):
                progress.update_data(last_prompt=event.candidate.prompt)

        run = resume_audit if resume else run_audit
        summary = run(
            store,
            run_id,
            models=model_set,
            on_progress=on_progress,
            on_event=on_event,
            cancel=cancel,
            executor=executor,
        )
        _report_workers(progress, executor)
        return summary

    return job


def eta_feed(progress: Progress, store: Store, run_id: int) -> Callable[[Any], None]:
    """An audit's progress (``AuditProgress``, one unit at a time) fed to an ETA model
    (:class:`~memprobe_core.runs.eta.EtaModel`): the units left are the plan, by method; a unit
    starting is a batch of one of its method, a unit ending (done or failed) its one step.

    Why not the core's rate (units done ÷ elapsed × units left): methods differ by orders of
    magnitude, and a rate measured in a slow stretch (a busy machine) held for the rest of the
    run could read several times the time left once the load dropped."""
    left = Counter(u["method"] for u in store.units(run_id) if u["status"] != "done")
    progress.eta_model = EtaModel(dict(left), cores=cpu_cores()) if left else None
    running: list[str] = []  # the method of the unit in flight
    ended = [0]

    def feed(p: Any) -> None:
        if p.done > ended[0] and running:
            method = running.pop()
            progress.track(lambda eta, now: eta.step(method, now, p.done - ended[0]))
        ended[0] = max(ended[0], p.done)
        if p.current is not None and not running:
            method = p.current.method
            running.append(method)
            progress.track(lambda eta, now: eta.round_started(method, now, 1))

    return feed


def _report_workers(progress: Progress, executor: Executor | None) -> None:
    """Ray: one row per worker actor in the live data (other executors have none)."""
    worker_states = getattr(executor, "worker_states", None)
    if worker_states is not None:
        progress.update_data(workers=worker_states())


def render_live(snap: ProgressSnapshot) -> None:
    """Below the progress bar: the Ray workers and the last prompt scored."""
    if snap.data.get("workers"):
        st.caption("Ray workers (units ended and units per minute since each started):")
        tables.show(pd.DataFrame(snap.data["workers"]))
    if snap.data.get("last_prompt"):
        st.caption("Last prompt scored:")
        prompt_code(str(snap.data["last_prompt"])[:500])


def resume_section(
    store: Store,
    models: dict[str, ModelChoice],
    executor: Executor | None,
    *,
    busy: bool,
    job: str,
) -> None:
    """The "Resume an interrupted audit" section: audits with units left that no job here
    runs, and a button that resumes the one picked as the page's job ``job``."""
    resumable = store.resumable_audits(exclude=live_run_ids())
    if not resumable:
        return
    st.subheader("Resume an interrupted audit")
    labels = {
        r["id"]: f"#{r['id']} · {r['title']} · {r['units_done']}/{r['units_total']} done"
        for r in resumable
    }
    pick = st.selectbox(
        "Audit", list(labels), key="audit_resume_pick", format_func=labels.__getitem__
    )
    run = store.get_run(pick)
    recorded = run["config"].get("models") or {}
    methods_of = run["config"].get("methods", [])
    st.caption(md(resume_models_text(recorded, methods_of, models)))
    if st.button("Resume", disabled=busy, key="audit_resume") and executor is not None:
        # No model set from the sidebar: the audit loads the models its run records, by name
        # (memprobe_core.audit.run_audit's models_factory), as `memprobe resume RUN` does, so a
        # run never finishes on another victim than it started with.
        st.session_state["audit_run_id"] = pick
        start_job(
            job,
            audit_job(store, pick, None, resume=True, executor=executor),
            f"Audit run {pick}",
            run_id=pick,
        )


def resume_models_text(
    recorded: Mapping[str, Any], methods: Sequence[str], chosen: Mapping[str, ModelChoice]
) -> str:
    """What the resume section says about models: the run's own (by role, those its methods
    use), and which of the sidebar's differ and are therefore not used."""
    roles = [r for r in registry.roles_needed(methods) if recorded.get(r)]
    named = ", ".join(f"{r} {recorded[r]}" for r in roles) or "its models"
    text = (
        f"It resumes on the models this run recorded ({named}), loaded by name whatever the "
        "sidebar shows, so every unit of the run answers from the same victim."
    )
    other = [
        f"{r} {chosen[r].label}"
        for r in roles
        if r in chosen and chosen[r].label and chosen[r].label != recorded[r]
    ]
    if other:
        text += f" The sidebar's {', '.join(other)} {'is' if len(other) == 1 else 'are'} not used."
    return text


def report_tab(store: Store) -> None:
    """The audit chooser (the one just started first) and its report."""
    audits = store.list_runs(kind="audit")
    if not audits:
        st.info("No audit in the store yet: start one in the first tab.")
        return
    ids = [r["id"] for r in audits]
    # No status in the labels: the browser keeps the label it was given for the chosen option,
    # so a status in it could go stale; the status line below is read on every draw.
    labels = {r["id"]: f"#{r['id']} · {r['title']}" for r in audits}
    # The run started (or resumed) in this tab, once, even when the picker already shows
    # another: a newer run in the store (a CLI run) is not the one this tab just started.
    started = st.session_state.get("audit_run_id")
    state = st.session_state
    if started in ids and state.get("audit_report_followed") != started:
        state["audit_report_pick"] = state["audit_report_followed"] = started
    elif state.get("audit_report_pick") not in ids:
        state["audit_report_pick"] = started if started in ids else ids[0]
    chosen = st.selectbox("Audit", ids, key="audit_report_pick", format_func=labels.__getitem__)
    st.caption(md(run_status_line(next(r for r in audits if r["id"] == chosen))))
    report_view(store, chosen)


def run_status_line(run: Mapping[str, Any]) -> str:
    """A run's status as the store has it now, with its units: "Status: finished · 8 of 8
    units done, 0 failed"."""
    return (
        f"Status: {run['status']} · {run['units_done']} of {run['units_total']} units done, "
        f"{run['units_error']} failed"
    )


def report_view(store: Store, run_id: int) -> None:
    """Table 1 with its downloads, Mem and LCS_P by domain, membership, paired gains, costs."""
    select = st.radio(
        "Mem shown",
        SELECTIONS,
        horizontal=True,
        key="audit_select",
        help="objective: Mem of p* = argmax O (Algorithm 1, default); max_mem: the "
        "highest Mem in the trace (an upper bound); reference: the reference "
        "code's best_rougeL",
    )
    report = cached_report(store, run_id, select)  # the end box below reads the same one
    inference_view(report)
    if report.table1.empty:
        if report.costs.empty:
            st.info("No finished unit in this audit yet: the report fills in as units finish.")
            return
        st.caption("Signals only: no extraction method ran, so there is no Table 1.")
        html_report_download(store, run_id, report, key=f"audit_html_{run_id}")
        _membership_and_rest(report)
        return
    st.caption(md(f"Mem = {report.meta['selection_label']}"))
    resamples = int(report.meta.get("resamples", DEFAULT_RESAMPLES))
    st.caption(
        f"Means with {CONFIDENCE:.0%} BCa bootstrap intervals ({resamples:,} resamples, seeded); "
        f"'all' pools domains. {SMALL_N_MARK} marks n < {SMALL_N}: intervals and tests there are "
        "rough. Paired gains carry "
        "a Wilcoxon signed-rank (or exact sign) test, Holm-adjusted across the report."
    )
    tables.show(with_pam_cell(report.table1), key=f"audit_table1_{run_id}")
    unranked = extraction_cost_note(report.table1)
    if unranked:
        st.caption(unranked)
    csv_download(
        "Table 1 CSV", report.table1, f"memprobe-audit{run_id}-table1.csv", key=f"audit_dl_{run_id}"
    )
    html_report_download(store, run_id, report, key=f"audit_html_{run_id}")
    _domain_charts(report)
    _membership_and_rest(report)


def _membership_and_rest(report: Report) -> None:
    """Membership, validity controls, paired gains, PII, costs and failed units."""
    membership_view(report)
    validity_view(report)
    for title, frame in (
        ("Paired improvement over the prefix-suffix baselines", report.paired),
        ("PII copied and invented", report.pii),
        ("Cost per method", report.costs),
        ("Failed units", report.errors),
    ):
        if isinstance(frame, pd.DataFrame) and not frame.empty:
            st.subheader(title)
            tables.show(frame)


def extraction_cost_note(table1: pd.DataFrame) -> str | None:
    """Why Table 1's extraction cost is a dash in rows whose p_z was measured: no unit of theirs
    had ranks, which only a black-box victim's server withholds (docs/method.md §21); ``None``
    when every such row has b (or the run is from before b)."""
    if "extraction_bits_units" not in table1 or "pz_zero" not in table1:
        return None
    units = pd.to_numeric(table1["extraction_bits_units"], errors="coerce").fillna(0)
    with_pz = pd.to_numeric(table1["pz_zero"], errors="coerce").notna()
    missing = int(((units == 0) & with_pz).sum())
    if not missing:
        return None
    return (
        f"Extraction cost (bits): – in {missing} of {int(with_pz.sum())} rows with p_z: not "
        "measured, because the victim's server returns each token's log-prob, not its rank (a "
        "black-box victim); load the victim's weights to measure it."
    )


def _domain_charts(report: Report) -> None:
    """Mem and LCS_P by domain, one row of two charts per length."""
    per_domain = report.table1[report.table1["domain"] != "all"]
    for length in sorted(per_domain["length"].unique()):
        part = per_domain[per_domain["length"] == length]
        left, right = st.columns(2)
        with left:
            fig = charts.domain_bars(part, "mem")
            fig.update_layout(title=f"Mem by domain, length {length}")
            st.plotly_chart(fig, width="stretch")
        with right:
            fig = charts.domain_bars(part, "lcs_p")
            fig.update_layout(title=f"LCS_P by domain, length {length}")
            st.plotly_chart(fig, width="stretch")


def verdict_box(verdict: Verdict, lead: str = "") -> None:
    """A verdict as one box: its headline, then its reasons as a list. Evidence and an
    inconclusive result (a control voids the figures) call for attention; no evidence does not."""
    text = md(f"{lead}{verdict.headline}")
    if verdict.reasons:
        text += "\n\n" + "\n".join(f"- {md(reason)}" for reason in verdict.reasons)
    if verdict.conclusion in (EVIDENCE, INCONCLUSIVE):
        st.warning(text)
    else:
        st.info(text)


def membership_view(report: Report) -> None:
    """Labelled runs: the verdict first (the validity controls folded in), then AUROC / TPR at
    low FPR per signal and method, each row a control voids badged, and the ROC curves."""
    if report.membership.empty:
        return
    blind, control = report.blind_baseline, report.random_split
    table = with_voided_by(report.membership, blind, control)
    verdict = membership_verdict(table, blind, control)
    st.subheader("Membership: members vs non-members")
    if verdict is not None:
        verdict_box(verdict)
    st.caption(
        "AUROC and TPR at 1 % / 0.1 % FPR of each membership signal and of each method's Mem "
        f"(higher = more member-like), with {CONFIDENCE:.0%} bootstrap intervals; AUROC 0.5 is "
        "chance. voided_by: the control that voids a row's figures."
    )
    tables.show(table)
    for length in sorted(report.roc["length"].unique()):
        fig = charts.roc_figure(report.roc, length, membership=report.membership)
        st.plotly_chart(fig, width="stretch", key=f"audit_roc_{length}")


def validity_view(report: Report) -> None:
    """Labelled runs: the blind baseline (no model) and the random-split control, with warnings."""
    blind = report.blind_baseline
    if blind is None:
        return
    st.subheader("Validity controls")
    st.caption(
        "Can this split be told apart without the model (Das et al. 2024, blind baselines)? "
        "And does the evaluation give chance when the labels mean nothing?"
    )
    if blind.warning:
        st.warning(md(f"Blind baseline: {blind.warning}"))
    if blind.note:
        st.info(md(f"Blind baseline not run: {blind.note}"))
    else:
        names = ["auroc", *FPR_TARGETS]
        row = {"control": "blind baseline (no model)", "members": blind.n_members}
        row |= {"non-members": blind.n_nonmembers, "folds": blind.folds}
        for name in names:
            for end in ("", "_lo", "_hi"):
                row[name + end] = blind.figure(name + end)
        tables.show(pd.DataFrame([row]))
    st.caption(md(blind_method(blind)))
    control = report.random_split
    warning = random_split_warning(control)
    if warning:
        st.warning(md(f"Random-split control: {warning}"))
    st.caption(md(f"Random-split control: {RANDOM_SPLIT_METHOD}"))
    if control is None or control.empty:
        st.caption(md(RANDOM_SPLIT_TOO_FEW))
        return
    tables.show(control)
    if not warning:
        st.caption(md(RANDOM_SPLIT_OK))


def inference_inputs() -> tuple[list[Snippet], list[Snippet], dict[str, Any]]:
    """The two sets of a dataset inference (suspect, held-out) and where they came from: two
    uploads (empty lists until both are given) or the built-in demo split."""
    source = st.radio(
        "Sets",
        [INFER_UPLOAD, INFER_DEMO],
        horizontal=True,
        key="infer_source",
        help="The demo split: built-in corpus texts (licences, standard-library code) that real "
        "models have seen, against texts generated on this machine that no model can have seen.",
    )
    if source == INFER_DEMO:
        return demo_inference_sets()
    c1, c2 = st.columns(2)
    sets: list[list[Snippet]] = []
    names: dict[str, Any] = {}
    for column, which, label in (
        (c1, "suspect", "Suspect set (texts the model may have been trained on)"),
        (c2, "heldout", "Held-out set (same distribution, surely unseen)"),
    ):
        with column:
            upload = st.file_uploader(
                label, type=["txt", "jsonl", "ndjson", "csv", "parquet"], key=f"infer_{which}"
            )
            if upload is None:
                sets.append([])
                continue
            # A .txt file holds many texts, one per blank-line-separated block.
            blocks = upload.name.lower().endswith(".txt")
            loaded = read_upload(upload, LoadSpec(txt_mode="blocks" if blocks else "file"))
            sets.append(loaded.snippets if loaded is not None else [])
            names[which] = upload.name
            if loaded is not None:
                st.caption(f"{len(loaded.snippets)} texts ({len(loaded.rejected)} rows skipped)")
    if not all(sets):
        st.info("Upload both sets (a `text` column, or a .txt file of blank-line-separated texts).")
    return sets[0], sets[1], names


def demo_inference_sets() -> tuple[list[Snippet], list[Snippet], dict[str, Any]]:
    """The built-in demo split: corpus members as the suspect set, as many generated
    non-members per domain as the held-out set (``memprobe corpus members|nonmembers``)."""
    c1, c2 = st.columns(2)
    domains = c1.multiselect(
        "Domains", list(NONMEMBER_DOMAINS), default=list(NONMEMBER_DOMAINS), key="infer_domains"
    )
    limit = int(c2.number_input("Texts per domain and set", 2, 10_000, 10, key="infer_limit"))
    if not domains:
        st.info("Pick at least one domain (generated non-members exist for legal and code).")
        return [], [], {}
    try:  # a damaged non-member file: say how to rebuild it, do not crash the page
        members, nonmembers = demo_split(domains=domains, limit_per_domain=limit)
        made = nonmember_summary()
    except DataError as exc:
        st.error(md(str(exc)))
        return [], [], {}
    # A 20-digit seed reads as noise in a caption; the whole one is in the run's manifest.
    seed = short_numbers(str(made["seed"])) if made else "?"
    names = {
        "suspect": f"built-in corpus ({', '.join(domains)})",
        "heldout": f"generated non-members (seed {seed})",
    }
    st.caption(
        md(
            f"Suspect: {len(members)} built-in corpus texts; held out: {len(nonmembers)} "
            f"generated non-members (seed {seed}). A demonstration: generated text differs in "
            "style from real text, so the blind baseline may tell the sets apart without the "
            "model, and the verdict then says so. `memprobe corpus members --export FILE` and "
            "`memprobe corpus nonmembers --export FILE` write the two sets for `memprobe infer`."
        )
    )
    return members, nonmembers, names


def inference_view(report: Report) -> None:
    """A dataset-inference run: the test per length, its control, weights and assumption."""
    if not report.dataset_inference:
        return
    st.subheader("Dataset inference: was the suspect set used in training?")
    st.caption(md(f"{INFERENCE_METHOD}. Assumption: {INFERENCE_ASSUMPTION}."))
    for one in report.dataset_inference:
        # The verdict leads; its reasons carry the controls and the notes on the test.
        verdict_box(inference_verdict(one, report.blind_baseline), f"Length {one.length}: ")
        if one.test is None:
            continue
        st.caption(
            md(f"{one.n_suspect} suspect / {one.n_heldout} held-out texts; {one.test_result}")
        )
        rows = [
            {
                "test": name,
                "p-value": p_text(outcome.p_value),  # 1.6e-07 is not 0.000
                "rejected": outcome.rejected,
                "Welch t": outcome.t,
                "df": outcome.df,
                "tested (suspect/held-out)": f"{outcome.n_b[0]}/{outcome.n_b[1]}",
            }
            for name, outcome in (
                ("suspect vs held-out", one.test),
                ("control: two halves of the suspect set", one.control),
            )
            if outcome is not None
        ]
        tables.show(pd.DataFrame(rows))
        weights = pd.DataFrame(
            {
                "signal": [tables.column_label(name) for name in one.weights],
                "weight": list(one.weights.values()),
            }
        )
        st.caption("Fitted weights (standardised, member-oriented signals):")
        tables.show(weights)
    st.caption(
        "The tables below read the suspect set as members and the held-out set as non-members: "
        "the blind baseline says whether their texts alone can be told apart."
    )
