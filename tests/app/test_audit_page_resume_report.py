"""Audit page: a resumed audit runs on the models its run recorded (not the sidebar's), and the
Report tab opens the run started in this tab, not the newest in the store (issue 52)."""

from __future__ import annotations

import os

from memprobe_core.attacks.options import AttackOptions
from memprobe_core.audit import ModelNames, start_audit
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, saved, texts

PAGE = "pages/3_Audit.py"


def _audit(store: Store, victim: str = "fake:victim") -> int:
    return start_audit(
        store,
        demo_corpus(domains="legal", limit_per_domain=1),
        ["ps_inst"],
        [50],
        AttackOptions(),
        ModelNames(victim=victim, base=victim, attacker="fake"),
    )


def test_a_resumed_audit_runs_on_the_models_its_run_recorded_not_the_sidebars() -> None:
    store = Store(os.environ["MEMPROBE_STORE"])
    run_id = _audit(store, victim="fake:victim")
    store.set_run_status(run_id, "interrupted")
    at = open_page(PAGE)
    at.sidebar.text_input(key="model_victim_fake").set_value("fake:echo").run()
    shown = texts(at)
    assert "It resumes on the models this run recorded (victim fake:victim" in shown
    assert "The sidebar's victim fake:echo is not used." in shown
    at.button(key="audit_resume").click()
    run_until(at, saved, timeout=120)
    run = store.get_run(run_id)
    assert run["units_done"] == 1
    (session,) = run["manifest"]["sessions"]
    assert "fake:victim" in str(session["models"]["victim"])  # the recorded victim answered
    assert "fake:echo" not in str(run["manifest"])


def test_the_report_tab_opens_the_run_started_here_not_a_newer_one_in_the_store() -> None:
    store = Store(os.environ["MEMPROBE_STORE"])
    earlier = _audit(store)  # e.g. a CLI run: the newest when the page opens
    at = open_page(PAGE)
    assert at.selectbox(key="audit_report_pick").value == earlier
    at.number_input(key="audit_limit").set_value(1)
    at.multiselect(key="audit_methods").set_value(["ps_inst"])
    at.button(key="audit_start").click()
    run_until(at, saved, timeout=120)
    started = at.session_state["audit_run_id"]
    assert started != earlier
    assert at.selectbox(key="audit_report_pick").value == started
    later = _audit(store)  # a CLI run started meanwhile: newer, but not this tab's
    at.run()
    assert later > started and at.selectbox(key="audit_report_pick").value == started
    at.selectbox(key="audit_report_pick").set_value(later).run()  # a choice is kept
    at.run()
    assert at.selectbox(key="audit_report_pick").value == later
