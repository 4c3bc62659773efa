"""The Document page: a stored map opened (figures, a window's texts, markup shown as text), a
continuation run as a live job on the fake victim, a map refused for a victim without weights,
and a bad upload refused; the Runs page opens document runs the same way."""

from __future__ import annotations

import html
import os
import re
import shlex
import threading
import time

from memprobe_core.cli import main as cli_main
from memprobe_core.documents import map_run
from memprobe_core.documents.map_report import written_back
from memprobe_core.documents.windows import MapOptions
from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, texts
from tests.helpers.tiny_models import tiny_hf_generator
from ui_common.job_runner import Job

MARKUP = "<img src=x onerror=alert(1)> **bold** [link](http://evil.example) "
DOCUMENT = MARKUP + " ".join(["the licence of this work is granted to any person"] * 12)


def stored_map(
    name: str = "<b>book</b>.md", victim_name: str = "tiny <i>victim</i>", text: str = DOCUMENT
) -> int:
    victim = tiny_hf_generator(seed=7, adds_bos=True)
    store = Store(os.environ["MEMPROBE_STORE"])
    run_id = map_run.start_map(
        store,
        text,
        victim,
        name=name,
        victim_name=victim_name,
        options=MapOptions(8, 8, 8, 8),
    )
    map_run.run_map(store, run_id, victim)
    return run_id


def test_a_stored_map_opens_with_its_figures_and_a_windows_texts() -> None:
    run_id = stored_map()
    at = open_page("pages/6_Document.py")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.selectbox(key="doc_open").value == run_id
    page = texts(at)
    assert "extraction map of <b>book</b>.md on tiny <i>victim</i>" in page  # as text
    stored = map_run.read_map(Store(os.environ["MEMPROBE_STORE"]), run_id)
    metrics = {m.label: m.value for m in at.metric}
    deltas = {m.label: m.proto.delta for m in at.metric}
    over = sum(1 for s in stored.scores if s.pz.get("log10_p_z") is not None)
    assert deltas["Median log10 p_z"] == (
        f"over {over} of {stored.summary.windows} (p_z > 0)"
        if over != 1
        else "1 window's (p_z > 0)"
    )  # a median over one window is not the map's
    # Whole and partly written windows are counted apart, in the grid's words.
    w = written_back(stored)
    assert metrics["Written back whole"] == f"{w.whole} / {w.windows}"
    assert deltas["Written back whole"] == "all 8 suffix tokens"  # what "whole" means
    assert metrics["Written back in part"] == f"{w.part} / {w.windows}"
    assert deltas["Document written back"] == f"+ {w.share(w.part_tokens):.1%} in part"
    assert f"{w.part} written back greedily (the window's suffix only in part)" in page
    windows = at.selectbox(key="doc_open_window")
    assert windows.options and windows.value is not None
    last = int(windows.options[-1].split()[-1])  # options are the shown labels, "window N"
    windows.set_value(last).run()
    assert not at.exception
    assert f"Window {last}:" in texts(at)
    # Texts go through escaped HTML or plain-text widgets: no raw markup reaches the page.
    for block in at.get("html"):
        assert "<img" not in block.proto.body and "<b>book" not in block.proto.body
    assert {b.label for b in at.get("download_button")} >= {"HTML report"}
    # The Document text tab colours the document itself, every character escaped.
    tabs = {t.label: t for t in at.tabs}
    assert {"Windows", "Document text"} <= set(tabs)
    views = [b.proto.body for b in tabs["Document text"].get("html")]
    (view,) = [body for body in views if "window 0: " in body]
    shown = html.unescape(re.sub(r"<[^>]+>", "", view))  # the characters, tags dropped
    assert shown == DOCUMENT and "<img" not in view and "&lt;img" in view
    # Alone in the store, the map says what it lacks: a control.
    assert "No other victim in this store has mapped this document" in texts(at)


def test_a_map_is_shown_beside_the_same_documents_maps_on_other_victims() -> None:
    control = stored_map(victim_name="base model")
    other_document = stored_map(victim_name="base model", text=DOCUMENT + " and more words")
    repeat = stored_map(victim_name="canary copy")  # the same victim again: no control
    opened = stored_map(victim_name="canary copy")
    at = open_page("pages/6_Document.py")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.selectbox(key="doc_open").value == opened
    assert "The same document on other victims" in [h.value for h in at.subheader]
    (table,) = [t.value for t in at.dataframe if "victim" in t.value.columns]
    assert table["run"].tolist() == [opened, control]  # not the other document's map
    assert table["victim"].tolist() == ["canary copy (opened)", "base model"]
    assert other_document not in table["run"].tolist() and repeat not in table["run"].tolist()
    # The columns read as the metrics above the map (one place for both).
    metrics = {m.label: m.value for m in at.metric}
    assert table.loc[0, "Document written back"] == metrics["Document written back"]
    # A table wider than the page is drawn in parts (ui_common.tables): the median in one.
    assert "Median log10 p_z" in {c for t in at.dataframe for c in t.value.columns}
    # A control's row is read once, then kept while its run is unchanged: a change shows.
    Store(os.environ["MEMPROBE_STORE"]).set_run_status(control, "interrupted")
    at.run()
    (table,) = [t.value for t in at.dataframe if "victim" in t.value.columns]
    assert table["status"].tolist() == ["finished", "interrupted"]


def test_a_run_another_tabs_job_works_on_is_followed_not_offered_for_resume() -> None:
    # A job belongs to the tab that started it; a reloaded or second tab follows it.
    run_id = stored_map(victim_name="canary copy")
    store = Store(os.environ["MEMPROBE_STORE"])
    store.set_run_status(run_id, "running")
    release = threading.Event()

    def work(progress, cancel):
        progress.set(done=3, total=9, message="3/9 windows")
        return release.wait(30)

    job = Job(
        work,
        name=f"Document run {run_id}",
        lock=None,
        run_id=run_id,
        session="another tab",
    ).start()
    try:
        deadline = time.monotonic() + 10
        while job.progress.snapshot().done != 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        at = open_page("pages/6_Document.py")
        assert not at.exception
        page = texts(at)
        assert f"Document run {run_id} is being worked on by a job started in another tab" in page
        assert "A job of this dashboard is working on this run" in page
        assert "--resume" not in page
        assert [p.proto.text for p in at.get("progress")] == ["3 / 9 · 3/9 windows"]  # followed
    finally:
        release.set()
        job.join(5)
    store.set_run_status(run_id, "interrupted")  # the job stopped: now it can be resumed
    at.run()
    assert not at.exception
    resume = f"memprobe --store {shlex.quote(os.environ['MEMPROBE_STORE'])} document --resume"
    assert f"{resume} {run_id}" in [c.value for c in at.code]
    assert "A job of this dashboard" not in texts(at)


def test_every_option_of_both_modes_has_a_label_for_people() -> None:
    at = open_page("pages/6_Document.py")
    raw = re.compile(r"[a-z0-9]+(_[a-z0-9]+)+")  # a field name such as batch_windows
    for mode in ("map", "continue"):
        at.radio(key="doc_mode").set_value(mode).run()
        widgets = [*at.number_input, *at.text_input, *at.radio, *at.selectbox]
        assert len(widgets) > 5
        assert [w.label for w in widgets if raw.fullmatch(w.label)] == [], mode


def test_a_map_on_a_victim_without_weights_is_refused_in_words() -> None:
    at = open_page("pages/6_Document.py")
    at.button(key="doc_run").click().run()
    assert not at.exception
    assert at.error and "an extraction map needs the victim's weights" in texts(at)
    assert Store(os.environ["MEMPROBE_STORE"]).list_runs() == []


def test_a_continuation_runs_as_a_job_and_is_stored() -> None:
    at = open_page("pages/6_Document.py")
    at.radio(key="doc_mode").set_value("continue").run()
    at.number_input(key="doc_max_turns").set_value(2).run()
    at.button(key="doc_run").click().run()
    store = Store(os.environ["MEMPROBE_STORE"])

    def ended(_):
        runs = store.list_runs(kind="document")
        return bool(runs) and runs[0]["status"] != "running"

    at = run_until(at, ended, timeout=120)
    (run,) = store.list_runs(kind="document")
    assert run["config"]["mode"] == "continue" and run["status"] == "finished"
    assert run["units_done"] >= 1
    assert any(m.label == "nv-recall" for m in at.metric)
    # The run records where its victim is served and how to load it: the resume command the
    # page shows loads that victim (a fresh load, the same endpoint), not the CLI's defaults.
    assert run["config"]["endpoint"]["backend"] == run["config"]["models"]["backend"] == "fake"
    resumed = ["--store", os.environ["MEMPROBE_STORE"], "document", "--resume", str(run["id"])]
    assert cli_main(resumed) == 0


def test_the_runs_page_opens_a_document_run_as_the_document_page_does() -> None:
    first = stored_map(name="first.md")
    run_id = stored_map(name="plain.md")
    at = open_page("pages/5_Runs.py")
    at.selectbox(key="runs_open").select(run_id).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "extraction map of plain.md" in texts(at)
    run = Store(os.environ["MEMPROBE_STORE"]).get_run(run_id)
    units = {m.label: m.value for m in at.metric}["Units done"]
    assert units == f"{run['units_done']}/{run['units_total']}"  # a map: done of all windows
    # No compare tab offers the two maps: a map has no methods' scores to compare.
    assert first != run_id
    assert "Comparing two models needs two audit runs in the store" in texts(at)
    assert "Compare needs two audit or probe runs in the store; document runs" in texts(at)
