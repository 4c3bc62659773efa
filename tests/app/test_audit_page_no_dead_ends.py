"""Audit page, "no dead ends" (issue 37): a finished audit says what it found and leads to its
report; dataset inference has a built-in demo split; the non-member checkbox says which domains
it drops; the job status line speaks plainly; the report's picker shows the run's true status."""

from __future__ import annotations

import os
import threading

import pytest
from streamlit.testing.v1 import AppTest

from memprobe_core.membership.verdict import inference_verdict, membership_verdict
from memprobe_core.report.build import report_for_run
from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, saved, texts
from ui_common.job_runner import MODEL_LOCK

PAGE = "pages/3_Audit.py"


def _finished(at: AppTest) -> bool:
    return "state: finished" in texts(at)


def _end_box(at: AppTest) -> str:
    (box,) = [s.value for s in at.success if "is saved" in s.value]
    return box.replace("\\", "")


def test_a_finished_labelled_audit_ends_with_its_figures_and_its_report() -> None:
    at = open_page(PAGE)
    assert not saved(at)
    at.checkbox(key="audit_nonmembers").check().run()
    at.number_input(key="audit_limit").set_value(2).run()
    at.multiselect(key="audit_methods").set_value(["ps_inst"])
    at.multiselect(key="audit_lengths").set_value([50])
    at.button(key="audit_start").click()
    run_until(at, saved, timeout=120)
    box = _end_box(at)
    assert box.startswith("Run 1 is saved (finished): 8 of 8 units done, 0 failed.")
    # The pooled Mem per method, as Table 1 has it, and the membership verdict's headline.
    report = report_for_run(Store(os.environ["MEMPROBE_STORE"]), 1)
    row = report.table1[report.table1["domain"] == "all"].iloc[0]
    assert f"Mem, all domains, length 50: P-S-Inst {row['mem']:.3f}" in box
    verdict = membership_verdict(report.membership, report.blind_baseline, report.random_split)
    assert verdict is not None and f"Membership: {verdict.headline}" in box
    # The way on: the HTML report here, the run on the Runs page.
    assert at.get("download_button")  # the Report tab's and the end box's
    assert any(b.proto.id.endswith("audit_end_html_1") for b in at.get("download_button"))
    links = [p.proto for p in at.get("page_link")]
    assert any(link.page.endswith("5_Runs.py") or "Runs" in link.label for link in links)


def test_dataset_inference_on_the_built_in_demo_split() -> None:
    at = open_page(PAGE)
    at.radio(key="infer_source").set_value("Built-in demo split").run()
    at.number_input(key="infer_limit").set_value(2).run()
    shown = texts(at)
    assert "Suspect: 4 built-in corpus texts; held out: 4 generated non-members" in shown
    at.multiselect(key="infer_lengths").set_value([50])
    at.button(key="infer_start").click()
    run_until(at, _finished, timeout=120)
    store = Store(os.environ["MEMPROBE_STORE"])
    (run,) = store.list_runs()
    inference = run["config"]["dataset"]["inference"]
    assert inference["suspect"] == "built-in corpus (legal, code)"
    assert inference["heldout"].startswith("generated non-members (seed ")
    samples = store.samples(run["id"])
    assert [s.label for s in samples] == ["member"] * 4 + ["nonmember"] * 4
    assert samples[0].id.startswith("suspect:legal:") and "nonmember-" in samples[-1].id
    # Its end box leads with the test's verdict.
    report = report_for_run(store, run["id"])
    (one,) = report.dataset_inference
    headline = inference_verdict(one, report.blind_baseline).headline
    assert f"Dataset inference, length 50: {headline}" in _end_box(at)


def test_the_non_member_checkbox_says_which_domains_it_drops() -> None:
    at = open_page(PAGE)
    assert "left out" not in texts(at)
    at.checkbox(key="audit_nonmembers").check().run()
    assert "The docs domain is left out: generated non-members exist for legal and code only" in (
        texts(at)
    )
    # Nothing dropped when docs was not chosen: no note.
    at.checkbox(key="audit_nonmembers").uncheck().run()
    at.multiselect(key="audit_domains").set_value(["legal", "code"]).run()
    at.checkbox(key="audit_nonmembers").check().run()
    assert "left out" not in texts(at)


def _sidebar_line(at: AppTest) -> str:
    (line,) = [c.value for c in at.sidebar.caption if "job" in c.value.lower()]
    return line.replace("\\", "")


def test_the_job_status_line_is_in_plain_words() -> None:
    at = open_page(PAGE)
    assert _sidebar_line(at) == "No job is running: a job you start runs at once."
    assert MODEL_LOCK.acquire("Probe run 99", timeout=1, session="someone-else")
    try:
        at.run()
        line = _sidebar_line(at)
        assert line.startswith("Busy: Probe run 99 started ") and line.endswith(
            " s ago in another tab; a new job waits for it."
        )
        assert "someone-else" not in texts(at) + line and "session" not in line
    finally:
        MODEL_LOCK.release()


def test_the_report_picker_shows_the_true_status_when_the_job_ends_mid_draw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job ends while the page builds the report: the picker read "running" before, so the
    page is drawn again rather than left saying "running" under "state: finished"."""
    from memprobe_core.report import build

    real = build.report_for_run
    waited = threading.Event()

    def slow_report(store, run_id, **kwargs):  # as a large audit's bootstrap takes seconds
        import streamlit as st

        job = st.session_state.get("audit_job")
        if job is not None and not waited.is_set():
            waited.set()
            job.join(60)  # the job ends meanwhile
        return real(store, run_id, **kwargs)

    monkeypatch.setattr(build, "report_for_run", slow_report)
    at = open_page(PAGE)
    at.number_input(key="audit_limit").set_value(1).run()
    at.multiselect(key="audit_methods").set_value(["ps_inst"])
    at.multiselect(key="audit_lengths").set_value([50])
    at.button(key="audit_start").click().run()
    assert not at.exception, at.exception
    assert waited.is_set() and _finished(at)
    (picker,) = [s for s in at.selectbox if s.key == "audit_report_pick"]
    assert picker.options == ["#1 · audit 3 snippets"]  # no status to go stale in the browser
    assert "Status: finished · 3 of 3 units done, 0 failed" in texts(at)
    assert "Status: running" not in texts(at)


def test_a_resumed_audit_ends_with_the_same_box() -> None:
    from memprobe_core.attacks.options import AttackOptions
    from memprobe_core.audit import ModelNames, start_audit
    from memprobe_core.snippets.corpus import demo_corpus

    store = Store(os.environ["MEMPROBE_STORE"])
    run_id = start_audit(  # on the fake models: a resume loads the models its run records
        store,
        demo_corpus(domains="legal", limit_per_domain=2),
        ["ps_inst"],
        [50],
        AttackOptions(),
        ModelNames(victim="fake", base="fake", attacker="fake"),
    )
    store.set_run_status(run_id, "interrupted")
    at = open_page(PAGE)
    (picker,) = [s for s in at.selectbox if s.key == "audit_resume_pick"]
    assert picker.options == [f"#{run_id} ·  · 0/2 done"]
    at.button(key="audit_resume").click()
    run_until(at, saved, timeout=120)
    assert _end_box(at).startswith(f"Run {run_id} is saved (finished): 2 of 2 units done")
