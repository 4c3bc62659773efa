"""Audit: a dataset × methods × lengths, with progress and ETA, a Table-1 report, and resume."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ui_common as ui
from memprobe_core.attacks import registry
from memprobe_core.attacks.events import CandidateScored
from memprobe_core.audit import ModelNames, resume_audit, run_audit, start_audit
from memprobe_core.config import SELECTIONS
from memprobe_core.errors import UsageError
from memprobe_core.executors import make_executor
from memprobe_core.report.build import report_for_run
from memprobe_core.snippets.corpus import DOMAINS, demo_corpus, nonmember_summary
from memprobe_core.snippets.nonmembers import NONMEMBER_DOMAINS
from memprobe_core.snippets.split import DataError
from ui_common import charts
from ui_common import methods as methods_ui
from ui_common.job_runner import Progress, ProgressSnapshot, live_run_ids

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


def dataset() -> tuple[list, dict]:
    """The snippets to audit and a record of where they came from."""

    source = st.radio("Dataset", ["Built-in corpus", "Upload"], horizontal=True, key="audit_source")
    if source == "Built-in corpus":
        labelled = st.checkbox(
            "add generated non-members (labelled audit)",
            key="audit_nonmembers",
            help="Label the corpus snippets 'member' and add as many texts generated on this "
            "machine (that no model can have seen) per domain, labelled 'non-member'; the "
            "report then gives AUROC and TPR at low FPR. Legal and code domains only.",
        )
        offered = list(NONMEMBER_DOMAINS if labelled else DOMAINS)
        c1, c2 = st.columns(2)
        domains = c1.multiselect(  # one widget per choice: each keeps its own selection
            "Domains",
            offered,
            default=offered,
            key="audit_domains_labelled" if labelled else "audit_domains",
        )
        limit = int(c2.number_input("Snippets per domain", 1, 10_000, 2, key="audit_limit"))
        if not domains:
            st.info("Pick at least one domain.")
            return [], {}
        try:  # a damaged non-member file: say how to rebuild it, do not crash the page
            snippets = demo_corpus(domains=domains, limit_per_domain=limit, nonmembers=labelled)
            made = nonmember_summary() if labelled else None
        except DataError as exc:
            st.error(str(exc))
            return [], {}
        info = {"source": "built-in corpus", "domains": domains, "limit": limit}
        if made is not None:
            info["nonmembers"] = made
            st.caption(
                f"{len(snippets)} snippets: {len(snippets) // 2} members from the built-in corpus, "
                f"as many generated non-members (seed {made['seed']})."
            )
        else:
            st.caption(f"{len(snippets)} snippets from the built-in corpus.")
        return snippets, info
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
    result = ui.read_upload(
        upload,
        text_column=text_column or "text",
        id_column=id_column or None,
        domain_column=domain_column or None,
        domain=domain or None,
        txt_mode="blocks" if txt_blocks else "file",
    )
    if result is None:
        return [], {}
    rejected = [{"row": r.row, "reason": r.reason} for r in result.rejected]
    return result.snippets, {"source": result.source, "rejected": rejected[:200]}


def executor_choice():
    """The executor picked in "Where units run" (``None`` and an error shown if it is unusable)."""

    with st.expander("Where units run"):
        kind = st.radio(
            "Executor",
            ["local", "ray"],
            horizontal=True,
            key="audit_executor",
            format_func={
                "local": "This process (one unit at a time)",
                "ray": "Ray cluster (units in parallel on worker actors)",
            }.get,
            help="Ray: each worker loads the models by name and runs whole units; "
            "this page writes the results.",
        )
        if kind == "local":
            return make_executor("local")
        r1, r2, r3 = st.columns(3)
        address = r1.text_input(
            "Ray address",
            "",
            key="audit_ray_address",
            help="auto, HOST:PORT of the head, or empty: a local Ray on 127.0.0.1",
        )
        workers = int(
            r2.number_input("Workers (0: as many as fit)", 0, 1024, 0, key="audit_ray_workers")
        )
        gpus = float(r3.number_input("GPUs per worker", 0.0, 8.0, 0.0, 0.25, key="audit_ray_gpus"))
    try:
        return make_executor(
            "ray", address=address.strip() or None, workers=workers or None, gpus_per_worker=gpus
        )
    except UsageError as exc:
        st.error(ui.md(str(exc)))
        return None


def audit_job(run_id: int, model_set, *, resume: bool, executor=None):
    """The worker: run (or resume) the audit, feeding progress, ETA and workers to the page."""

    def job(progress: Progress, cancel) -> object:
        def on_progress(p) -> None:
            current = f"running {p.current}" if p.current is not None else "between units"
            progress.set(
                done=p.done,
                total=p.total,
                rate=p.rate or None,
                eta=p.eta_s,
                message=f"{p.done}/{p.total} units, {p.errors} failed · {current}",
            )
            if hasattr(executor, "worker_states"):  # Ray: one row per worker actor
                progress.update_data(workers=executor.worker_states())

        def on_event(event) -> None:
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
        if hasattr(executor, "worker_states"):
            progress.update_data(workers=executor.worker_states())
        return summary

    return job


def render_live(snap: ProgressSnapshot) -> None:
    if snap.data.get("workers"):
        st.caption("Ray workers (units ended and units per minute since each started):")
        st.dataframe(pd.DataFrame(snap.data["workers"]), hide_index=True)
    if snap.data.get("last_prompt"):
        st.caption("Last prompt scored:")
        st.text(str(snap.data["last_prompt"])[:500])


tab_run, tab_report = st.tabs(["New audit / resume", "Report"])

with tab_run:
    snippets, record = dataset()
    offered = methods_ui.offered_methods(models, {})
    c1, c2 = st.columns(2)
    with c1:
        methods = methods_ui.method_picker(
            "audit_methods", offered, default=registry.default_audit_methods()
        )
    lengths = c2.multiselect(
        "Lengths (tokens)",
        [50, 100, 200, 300, 500],
        default=[200],
        key="audit_lengths",
        help="paper: 200, 300, 500",
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
        alpha = st.slider("α", 0.0, 1.0, 0.5, 0.05, key="audit_alpha") if fixed_alpha else None
        split_tok = st.radio(
            "Split by",
            ["model", "whitespace"],
            horizontal=True,
            key="audit_split",
            help="the victim's tokens (paper) or words",
        )
    executor = executor_choice()
    busy = ui.job_running(JOB) or executor is None
    ready = bool(snippets and methods and lengths)
    if st.button("Start audit", type="primary", disabled=busy or not ready, key="audit_start"):
        # On Ray the workers load the models by name; this process needs none.
        on_ray = executor.name == "ray"
        model_set = None if on_ray else methods_ui.load_model_set(models, methods, {})
        options = methods_ui.build_options(alpha, widgets)
        if options is not None and (model_set is not None or on_ray):
            try:
                names = ModelNames(
                    **{r: models[r].label for r in ("victim", "base", "attacker")},
                    reverse=models["reverse"].label if use_reverse else None,
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
                    audit_job(run_id, model_set, resume=False, executor=executor),
                    f"Audit run {run_id}",
                    run_id=run_id,
                )

    live = live_run_ids()
    resumable = [
        r
        for r in store.list_runs(kind="audit")
        if r["status"] in ("interrupted", "running")
        and r["id"] not in live
        and r.get("units_pending", 0) + r.get("units_running", 0) > 0
    ]
    if resumable:
        st.subheader("Resume an interrupted audit")
        pick = st.selectbox(
            "Audit",
            [r["id"] for r in resumable],
            key="audit_resume_pick",
            format_func=lambda i: next(
                f"#{r['id']} · {r['title']} · {r['units_done']}/{r['units_total']} done"
                for r in resumable
                if r["id"] == i
            ),
        )
        st.caption(
            "It resumes with the models chosen in the sidebar (on Ray: the models the run "
            "recorded, loaded by each worker); the run records both."
        )
        if st.button("Resume", disabled=busy, key="audit_resume"):
            methods_of = store.get_run(pick)["config"].get("methods", [])
            on_ray = executor.name == "ray"  # the workers load the run's models by name
            model_set = None if on_ray else methods_ui.load_model_set(models, methods_of, {})
            if model_set is not None or on_ray:
                st.session_state["audit_run_id"] = pick
                ui.start_job(
                    JOB,
                    audit_job(pick, model_set, resume=True, executor=executor),
                    f"Audit run {pick}",
                    run_id=pick,
                )
    ui.show_job(JOB, render_live)


def report_view(run_id: int) -> None:

    select = st.radio(
        "Mem shown",
        SELECTIONS,
        horizontal=True,
        key="audit_select",
        help="objective: Mem of p* = argmax O (Algorithm 1, default); max_mem: the "
        "highest Mem in the trace (an upper bound); reference: the reference "
        "code's best_rougeL",
    )
    report = report_for_run(store, run_id, select=select)
    st.caption(ui.md(f"Mem = {report.meta['selection_label']}"))
    if report.table1.empty:
        st.info("No finished unit in this audit yet: the report fills in as units finish.")
        return
    st.caption(
        "Means with 95 % BCa bootstrap intervals (5,000 resamples, seeded); 'all' pools "
        "domains. † marks n < 10: intervals and tests there are rough. Paired gains carry "
        "a Wilcoxon signed-rank (or exact sign) test, Holm-adjusted across the report."
    )
    t1 = report.table1.drop(columns=["method"]).rename(columns={"method_label": "method"})
    st.dataframe(
        t1,
        hide_index=True,
        width="stretch",
        column_config={
            c: st.column_config.NumberColumn(format="%.3f")
            for c in t1.columns
            if c.startswith(("mem", "lcs_p", "dis", "objective"))
        },
    )
    ui.csv_download(
        "Table 1 CSV", report.table1, f"memprobe-audit{run_id}-table1.csv", key=f"audit_dl_{run_id}"
    )
    ui.html_report_download(store, run_id, report, key=f"audit_html_{run_id}")
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
    membership_view(report)
    for title, frame in (
        ("Paired improvement over the prefix-suffix baselines", report.paired),
        ("PII copied and invented", report.pii),
        ("Cost per method", report.costs),
        ("Failed units", report.errors),
    ):
        if isinstance(frame, pd.DataFrame) and not frame.empty:
            st.subheader(title)
            st.dataframe(frame, hide_index=True, width="stretch")


def membership_view(report) -> None:
    """Labelled runs: AUROC / TPR at low FPR per signal and method, and the ROC curves."""
    if report.membership.empty:
        return
    st.subheader("Membership: members vs non-members")
    st.caption(
        "AUROC and TPR at 1 % / 0.1 % FPR of each membership signal and of each method's Mem "
        "(higher = more member-like), with 95 % bootstrap intervals; AUROC 0.5 is chance."
    )
    st.dataframe(report.membership.drop(columns=["score"]), hide_index=True, width="stretch")
    for length in sorted(report.roc["length"].unique()):
        fig = charts.roc_figure(report.roc, length, membership=report.membership)
        st.plotly_chart(fig, width="stretch", key=f"audit_roc_{length}")


with tab_report:
    audits = store.list_runs(kind="audit")
    if not audits:
        st.info("No audit in the store yet: start one in the first tab.")
    else:
        ids = [r["id"] for r in audits]
        default = st.session_state.get("audit_run_id")
        chosen = st.selectbox(
            "Audit",
            ids,
            index=ids.index(default) if default in ids else 0,
            key="audit_report_pick",
            format_func=lambda i: next(
                f"#{r['id']} · {r['title']} · {r['status']}" for r in audits if r["id"] == i
            ),
        )
        report_view(chosen)
