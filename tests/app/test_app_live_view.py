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
