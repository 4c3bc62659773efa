"""Probe page (fake backend): widgets, a live run to completion, the store, escaping, lock, uploads."""

from __future__ import annotations

import html

import pytest

from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, saved, texts
from ui_common.job_runner import MODEL_LOCK

PAGE = "pages/1_Probe.py"
XSS = "<img src=x onerror=alert(1)>"


def _small(at, *, rounds: int = 2, n: int = 3, length: int = 40):
    at.number_input(key="probe_length").set_value(length)
    at.number_input(key="probe_rounds").set_value(rounds)
    at.number_input(key="probe_n").set_value(n)
    return at


def test_home_page_links_every_page_and_handles_an_empty_store() -> None:
    at = open_page()
    links = {link.proto.page for link in at.get("page_link")}
    assert {"Probe", "Compare", "Audit", "NER", "Runs"} <= links
    assert "No run yet" in texts(at)
    assert "Compute:" in texts(at)


def test_probe_widgets_reach_the_recorded_run(fake_ui) -> None:
    at = _small(open_page(PAGE), rounds=1, n=2, length=36)
    at.number_input(key="probe_seed").set_value(7)
    at.button(key="probe_run").click()
    run_until(at, saved)
    (run,) = Store(fake_ui).list_runs()
    options = run["config"]["options"]
    interactive = options["interactive"]
    assert (interactive["rounds"], interactive["n_candidates"], options["seed"]) == (1, 2, 7)
    assert run["config"]["lengths"] == [36]
    assert len(Store(fake_ui).candidates(run["id"])) == 1 + 1 * 2


def test_probe_runs_to_completion_and_every_candidate_is_stored(fake_ui) -> None:
    at = _small(open_page(PAGE))
    at.button(key="probe_run").click()
    run_until(at, saved)
    table = at.dataframe[0].value
    assert len(table) == 1 + 2 * 3
    marked = table["best"] == "★ best"  # a mark, not a checkbox
    assert marked.sum() == 1
    best = table[marked].iloc[0]
    assert best["objective O"] == table["objective O"].max()
    # The overlap view: escaped HTML with the common subsequence marked.
    assert any("<mark" in h.proto.body for h in at.html)
    assert len(at.get("plotly_chart")) == 2
    # The fake victim has no weights and its "server" scores no text: p_z says why it is absent.
    assert any("Probabilistic extraction" in str(m.value) for m in [*at.markdown, *at.text])
    store = Store(fake_ui)
    (run,) = store.list_runs()
    assert run["kind"] == "probe" and run["status"] == "finished"
    assert len(store.candidates_frame(run["id"])) == 1 + 2 * 3
    (unit,) = store.units(run["id"])
    assert unit["manifest"]["split"]["suffix"]  # kept so the Runs page can replay the overlap


def test_probe_names_the_victim_and_shows_where_the_cut_falls(fake_ui) -> None:
    at = _small(open_page(PAGE))
    assert "Victim (answers every candidate" in texts(at)
    at.button(key="probe_run").click()
    run_until(at, saved)
    shown = texts(at)
    assert "Cut: prefix " in shown and "suffix " in shown
    cut = [c.value for c in at.code if " ‖ " in c.value]
    assert len(cut) == 1 and cut[0].startswith("… ")
    # Mem's chance level of the best output: a caption and the scatter's line.
    assert "Chance level of Mem" in shown
    scatter = [c for c in at.get("plotly_chart") if "Mem vs LCS_P" in str(c.proto.spec)]
    assert scatter and "chance level of Mem (the best output)" in str(scatter[0].proto.spec)


def test_probe_shows_markup_in_a_snippet_as_text() -> None:
    at = open_page(PAGE)
    at.radio(key="snip_probe_source").set_value("Paste").run()
    text = " ".join([XSS] * 30 + ["plain words to make the snippet long enough"] * 5)
    at.text_area(key="snip_probe_text").set_value(text)
    at.text_input(key="snip_probe_pid").set_value(XSS)
    _small(at, rounds=1, n=2).run()
    at.button(key="probe_run").click()
    run_until(at, saved)
    assert any(XSS in t.value for t in at.text)  # the snippet preview, shown as plain text
    bodies = [h.proto.body for h in at.html]
    assert bodies and all("<img" not in b for b in bodies)
    assert any(html.escape(XSS) in b for b in bodies)
    for element in list(at.markdown) + list(at.caption) + list(at.success):
        assert "<img" not in element.value


def test_second_job_waits_for_the_model_lock() -> None:
    assert MODEL_LOCK.acquire("Probe run 99", timeout=1, session="other")
    try:
        at = _small(open_page(PAGE), rounds=1, n=2)
        at.button(key="probe_run").click()
        run_until(at, lambda a: "waiting for another job" in texts(a), timeout=10)
        assert "Probe run 99 started " in texts(at) and " ago in another tab" in texts(at)
    finally:
        MODEL_LOCK.release()
    run_until(at, saved)


def test_cancel_while_waiting_for_the_model_marks_the_run_cancelled(fake_ui) -> None:
    at = _small(open_page(PAGE), rounds=3, n=4)
    assert MODEL_LOCK.acquire("holder", timeout=1)  # hold the job before it scores anything
    try:
        at.button(key="probe_run").click()
        run_until(at, lambda a: "waiting" in texts(a), timeout=10)
        at.button(key="probe_job_cancel").click()
        at.run()
    finally:
        MODEL_LOCK.release()
    run_until(at, lambda a: "state: cancelled" in texts(a))
    (run,) = Store(fake_ui).list_runs()
    assert run["status"] == "cancelled"  # not left "running" forever
    assert Store(fake_ui).candidates(run["id"]) == []


def test_cancel_keeps_what_was_scored(fake_ui, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancel after the first round was scored: its candidates stay, the unit is cancelled."""
    import threading

    from memprobe_core.models.fake import FakeGenerator

    gate, calls = threading.Event(), []
    original = FakeGenerator._generate

    def held_after_round_0(self, requests, *args, **kwargs):  # the victim's 2nd call waits
        calls.append(len(requests))
        if len(calls) > 3:
            gate.wait(30)
        return original(self, requests, *args, **kwargs)

    monkeypatch.setattr(FakeGenerator, "_generate", held_after_round_0)
    store = Store(fake_ui)
    at = _small(open_page(PAGE), rounds=3, n=4)
    at.button(key="probe_run").click()
    try:
        run_until(at, lambda a: len(store.candidates(store.list_runs()[0]["id"])) >= 1)
        at.button(key="probe_job_cancel").click()
        at.run()
    finally:
        gate.set()
    run_until(at, lambda a: "state: cancelled" in texts(a))
    (run,) = store.list_runs()
    (unit,) = store.units(run["id"])
    kept = store.candidates(run["id"])
    assert run["status"] == "cancelled" and unit["status"] == "cancelled"
    assert 1 <= len(kept) < 1 + 3 * 4
    assert store.results_frame(run["id"]).empty  # a cancelled unit is never counted


def test_upload_over_the_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import memprobe_core.snippets.loaders as loaders

    monkeypatch.setattr(loaders, "MAX_FILE_BYTES", 1000)
    at = open_page(PAGE)
    at.radio(key="snip_probe_source").set_value("Upload").run()
    at.file_uploader(key="upload_probe").set_value(("big.txt", b"word " * 400, "text/plain")).run()
    assert not at.exception
    message = " ".join(e.value for e in at.error)
    assert "big" in message and "capped" in message
    assert at.button(key="probe_run").disabled


def test_upload_gives_snippets_to_choose() -> None:
    at = open_page(PAGE)
    at.radio(key="snip_probe_source").set_value("Upload").run()
    data = b'{"id": "a", "text": "one two three"}\n{"id": "b", "text": "four five six"}\n{"text": ""}\n'
    at.file_uploader(key="upload_probe").set_value(("set.jsonl", data, "application/json")).run()
    assert not at.exception
    assert "2 snippets" in texts(at) and "1 rejected" in texts(at)
    assert at.selectbox(key="snip_probe_up_pick").options == ["set:1 (3 words)", "set:2 (3 words)"]


def test_missing_model_says_what_to_do() -> None:
    at = open_page(PAGE)
    at.selectbox(key="model_victim_kind").set_value("hub").run()
    at.text_input(key="model_victim_hub").set_value("/no/such/model/folder").run()
    at.button(key="probe_run").click().run()
    assert not at.exception
    assert any("Could not load the victim model" in e.value for e in at.error)
    assert any("Fake" in i.value for i in at.info)


def test_too_short_snippet_is_an_error_not_a_crash() -> None:
    at = open_page(PAGE)
    at.radio(key="snip_probe_source").set_value("Paste").run()
    at.text_area(key="snip_probe_text").set_value("only five words in here").run()
    at.button(key="probe_run").click().run()
    assert not at.exception
    assert any("needs at least" in e.value for e in at.error)


def test_reference_conventions_toggle_reaches_the_run(fake_ui) -> None:
    at = _small(open_page(PAGE), rounds=1, n=2)
    at.radio(key="probe_compat").set_value("reference")
    at.button(key="probe_run").click()
    run_until(at, saved)
    (run,) = Store(fake_ui).list_runs()
    options = run["config"]["options"]
    assert options["compat"] == "reference"
    assert options["scoring"]["output_window"] == "last"
