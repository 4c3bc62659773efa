"""The live view in a real Streamlit script run: a poll reruns the page only when the job changed.

The script below stands in for a page: a full run draws the job through ``show_job`` (which
counts the ``render`` calls); a run with ``mode = "poll"`` runs only what the status fragment
runs on each tick (``jobs._job_status``), so the test can drive ticks one by one. A poll that
asks for a rerun makes AppTest run the script again, in full mode: one more ``render``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from ui_common import jobs
from ui_common.job_runner import Job


def _page() -> None:
    import streamlit as st

    from ui_common import jobs

    def render(snap) -> None:  # type: ignore[no-untyped-def]
        st.session_state["renders"] += 1
        st.text(f"rows: {len(snap.items)}")

    if st.session_state.pop("mode", "full") == "poll":
        jobs._job_status("job")
    else:
        jobs.show_job("job", render)


@pytest.fixture
def held_job() -> Iterator[Job]:
    """A running job that scores nothing until the test adds rows itself."""
    release = threading.Event()
    job = Job(lambda progress, cancel: release.wait(30), name="live-view test", lock=None).start()
    job.progress.set(total=10)
    yield job
    release.set()
    job.join(5)


def _app(job: Job, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setattr(jobs, "MIN_REDRAW_S", 0.0)  # no floor between redraws in this test
    at = AppTest.from_function(_page, default_timeout=30)
    at.session_state["job"] = job
    at.session_state["renders"] = 0
    at.run()
    assert not at.exception, at.exception
    return at


def _poll(at: AppTest) -> AppTest:
    at.session_state["mode"] = "poll"
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_poll_without_change_does_not_redraw_the_page(held_job, monkeypatch) -> None:
    at = _app(held_job, monkeypatch)
    assert at.session_state["renders"] == 1
    held_job.progress.set(message="still generating…")  # shown by the status line only
    _poll(at)
    assert at.session_state["renders"] == 1
    assert "still generating" in " ".join(p.proto.text for p in at.get("progress"))


def test_a_new_row_redraws_the_page_once(held_job, monkeypatch) -> None:
    at = _app(held_job, monkeypatch)
    held_job.progress.add_item({"round": 0, "index": 0})
    held_job.progress.advance()
    _poll(at)
    assert at.session_state["renders"] == 2
    assert at.text[0].value == "rows: 1"
    _poll(at)  # nothing new since that redraw
    assert at.session_state["renders"] == 2


def test_a_quiet_job_slows_the_poll_down_with_one_rerun(held_job, monkeypatch) -> None:
    at = _app(held_job, monkeypatch)
    view = at.session_state["job__live_view"]
    assert view.interval == jobs.FAST_POLL_S
    for _ in range(jobs.QUIET_POLLS + 1):  # the full run's own poll counts once
        _poll(at)
    view = at.session_state["job__live_view"]
    assert view.interval == jobs.SLOW_POLL_S
    assert at.session_state["renders"] == 2  # the one rerun that declares the slower poll
    for _ in range(3 * jobs.QUIET_POLLS):
        _poll(at)
    assert at.session_state["renders"] == 2


def test_the_end_of_the_job_redraws_the_final_page(held_job, monkeypatch) -> None:
    at = _app(held_job, monkeypatch)
    held_job.progress.finish("result")
    _poll(at)
    assert at.session_state["renders"] == 2
    assert any("state: finished" in c.value for c in at.caption)


def test_a_queued_job_is_polled_slowly_and_fast_again_once_it_starts(held_job, monkeypatch):
    held_job.progress.set(state="waiting", message="waiting for another job to finish")
    at = _app(held_job, monkeypatch)
    assert at.session_state["job__live_view"].interval == jobs.WAITING_POLL_S
    for _ in range(3 * jobs.QUIET_POLLS):  # no rerun while it waits
        _poll(at)
    assert at.session_state["renders"] == 1
    held_job.progress.set(state="running")
    _poll(at)
    assert at.session_state["renders"] == 2
    assert at.session_state["job__live_view"].interval == jobs.FAST_POLL_S


def _publish(job: Job, texts: list[str], *, labels: list[str] | None = None, closed=False):
    """Publish a victim batch of ``texts`` on the job's tap, as its decode loop would."""
    from memprobe_core.models.live import LiveBatch, LiveRow

    rows = tuple(
        LiveRow((labels or [""] * len(texts))[i], text, len(text.split()), closed)
        for i, text in enumerate(texts)
    )
    batch = LiveBatch("victim", rows, 60, 0.0, 1.0, 0, closed=closed)
    job.progress.live.publish(batch)


def test_rows_being_written_are_drawn_by_the_poll_alone(held_job, monkeypatch) -> None:
    at = _app(held_job, monkeypatch)
    _publish(held_job, ["The quick", XSS_TEXT], labels=["first prompt", "second prompt"])
    _poll(at)
    assert at.session_state["renders"] == 1  # the page was not redrawn for the rows
    table = at.dataframe[0].value
    assert list(table["written so far"]) == ["The quick", XSS_TEXT]  # a cell: text, not HTML
    assert list(table["prompt"]) == ["first prompt", "second prompt"]
    assert any("Victim writing 2 answers" in c.value for c in at.caption)
    _publish(held_job, ["The quick brown fox", XSS_TEXT + " more"])
    _poll(at)
    assert at.dataframe[0].value["written so far"][0] == "The quick brown fox"
    assert at.session_state["renders"] == 1


def test_polls_stay_fast_while_a_batch_is_written_and_stop_showing_it_when_it_ends(
    held_job, monkeypatch
) -> None:
    at = _app(held_job, monkeypatch)
    for _ in range(jobs.QUIET_POLLS + 1):  # quiet: the poll slows down
        _poll(at)
    assert at.session_state["job__live_view"].interval == jobs.SLOW_POLL_S
    _publish(held_job, ["Once upon"])
    _poll(at)  # a batch is being written: fast again (one rerun declares it)
    assert at.session_state["job__live_view"].interval == jobs.FAST_POLL_S
    renders = at.session_state["renders"]
    for _ in range(3 * jobs.QUIET_POLLS):
        _publish(held_job, ["Once upon a time"])
        _poll(at)
    assert at.session_state["job__live_view"].interval == jobs.FAST_POLL_S
    assert at.session_state["renders"] == renders
    _publish(held_job, ["Once upon a time there"], closed=True)
    _poll(at)
    assert not at.dataframe  # the batch ended: its candidates' scores come as rows of the page


XSS_TEXT = "<img src=x onerror=alert(1)>"


def test_a_search_shows_its_loss_per_step_without_redrawing_the_page(held_job, monkeypatch):
    at = _app(held_job, monkeypatch)
    held_job.progress.update_data(search_losses=((1, 3.0, 3.0), (2, 2.5, 2.7)))
    _poll(at)
    assert at.session_state["renders"] == 1
    shown = [c.value.replace("\\", "") for c in at.caption]  # md() escapes markdown
    assert "Search: step 2, best loss 2.500" in shown, shown
    assert at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")
