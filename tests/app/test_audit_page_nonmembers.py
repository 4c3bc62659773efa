"""Audit page: the "add generated non-members (labelled audit)" checkbox."""

from __future__ import annotations

import os

from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, texts


def test_labelled_audit_from_the_checkbox() -> None:
    at = open_page("pages/3_Audit.py")
    assert at.multiselect(key="audit_domains").options == ["legal", "code", "docs"]
    at.checkbox(key="audit_nonmembers").check().run()
    assert at.multiselect(key="audit_domains_labelled").options == ["legal", "code"]
    at.number_input(key="audit_limit").set_value(1).run()
    assert "4 snippets: 2 members from the built-in corpus" in texts(at)
    at.multiselect(key="audit_methods").set_value(["ps_inst"])
    at.multiselect(key="audit_lengths").set_value([50])
    at.button(key="audit_start").click()
    run_until(at, lambda a: "state: finished" in texts(a), timeout=120)
    store = Store(os.environ["MEMPROBE_STORE"])
    (run,) = store.list_runs()
    labels = [(s.domain, s.label) for s in store.samples(run["id"])]
    assert labels == [
        ("legal", "member"),
        ("legal", "nonmember"),
        ("code", "member"),
        ("code", "nonmember"),
    ]
    seed = str(run["config"]["dataset"]["nonmembers"]["seed"])  # whole in the manifest
    shown = seed if len(seed) < 10 else seed[:6] + "…"  # a long seed is cut short on the page
    assert f"seed {shown}" in texts(at)


def test_damaged_nonmember_file_is_an_error_not_a_crash() -> None:
    from memprobe_core.snippets import nonmembers

    nonmembers.default_path().write_text("{broken", "utf-8")
    at = open_page("pages/3_Audit.py")
    at.checkbox(key="audit_nonmembers").check().run()
    assert not at.exception
    assert any("memprobe corpus nonmembers --build" in e.value for e in at.error)


def test_opt_in_signals_from_the_method_options_reach_the_run() -> None:
    at = open_page("pages/3_Audit.py")
    assert not at.number_input(key="audit_samia_samples").value  # off by default
    assert [n for n in at.number_input if n.key == "audit_recall_shots"] == []  # unlabelled
    at.checkbox(key="audit_nonmembers").check().run()
    at.number_input(key="audit_limit").set_value(2).run()
    at.number_input(key="audit_recall_shots").set_value(1)
    at.number_input(key="audit_samia_samples").set_value(2)
    at.number_input(key="audit_pz_top_k").set_value(0)
    at.number_input(key="audit_discover_p").set_value(0.9)
    at.multiselect(key="audit_methods").set_value(["ps_inst"])
    at.multiselect(key="audit_lengths").set_value([50])
    at.button(key="audit_start").click()
    run_until(at, lambda a: "state: finished" in texts(a), timeout=120)
    (run,) = Store(os.environ["MEMPROBE_STORE"]).list_runs()
    measure = run["config"]["options"]["measure"]
    assert (measure["recall_shots"], measure["samia_samples"]) == (1, 2)
    assert (measure["pz_top_k"], measure["discover_p"], measure["pz_temperature"]) == (0, 0.9, 1.0)
    assert len(measure["recall_prefix_ids"]) == 2  # one member and one non-member picked
