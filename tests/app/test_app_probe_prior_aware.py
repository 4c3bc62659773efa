"""Probe page (fake backend): the "Prior-aware check" option (More options) reaches the run, and
the page says the check's outcome in words under the chance level (docs/method.md §24): the fake
victim has no weights, so it says why the check was not measured."""

from __future__ import annotations

from memprobe_core.membership.prior_aware import BLACK_BOX
from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, saved, texts

PAGE = "pages/1_Probe.py"


def test_the_prior_aware_check_is_asked_for_on_the_page_and_shown_in_words(fake_ui) -> None:
    at = open_page(PAGE)
    at.number_input(key="probe_length").set_value(36)
    at.number_input(key="probe_rounds").set_value(1)
    at.number_input(key="probe_n").set_value(2)
    at.checkbox(key="probe_pam").check()
    at.number_input(key="probe_pam_prefixes").set_value(7)
    at.button(key="probe_run").click()
    run_until(at, saved)
    (run,) = Store(fake_ui).list_runs()
    measure = run["config"]["options"]["measure"]
    assert (measure["pam"], measure["pam_prefixes"]) == (True, 7)
    assert f"Prior-aware check: not measured: {BLACK_BOX}" in texts(at)
