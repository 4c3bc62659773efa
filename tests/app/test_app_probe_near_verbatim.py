"""Probe page (fake backend): the near-verbatim lower bound's options (More options; docs/method.md
§22) reach the run as the CLI's flags do: on by default with its budget and beam, off when
unticked."""

from __future__ import annotations

from memprobe_core.measuring.near_verbatim import DEFAULT_BEAM_WIDTH, DEFAULT_EDITS
from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, saved

PAGE = "pages/1_Probe.py"


def _probe(at) -> None:  # type: ignore[no-untyped-def]
    at.number_input(key="probe_length").set_value(36)
    at.number_input(key="probe_rounds").set_value(1)
    at.number_input(key="probe_n").set_value(2)


def _measure(store) -> dict:  # type: ignore[no-untyped-def]
    (run,) = Store(store).list_runs()
    return run["config"]["options"]["measure"]


def test_the_bound_is_on_by_default_with_its_budget_and_beam(fake_ui) -> None:
    at = open_page(PAGE)
    _probe(at)
    at.button(key="probe_run").click()
    run_until(at, saved)
    measure = _measure(fake_ui)
    assert measure["near_verbatim"] is True
    assert (measure["near_verbatim_edits"], measure["near_verbatim_beams"]) == (
        DEFAULT_EDITS,
        DEFAULT_BEAM_WIDTH,
    )


def test_the_page_sets_the_budget_and_the_beam_or_turns_the_bound_off(fake_ui) -> None:
    at = open_page(PAGE)
    _probe(at)
    at.number_input(key="probe_near_verbatim_edits").set_value(3.0)
    at.number_input(key="probe_near_verbatim_beams").set_value(5)
    at.checkbox(key="probe_near_verbatim").uncheck()
    at.button(key="probe_run").click()
    run_until(at, saved)
    measure = _measure(fake_ui)
    assert measure["near_verbatim"] is False
    assert (measure["near_verbatim_edits"], measure["near_verbatim_beams"]) == (3.0, 5)
