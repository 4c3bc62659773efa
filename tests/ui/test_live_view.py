"""The live view's policy: redraw the page only when a job's snapshot changed, poll slower when quiet."""

from __future__ import annotations

import pytest

from ui_common.job_runner import Progress
from ui_common.jobs import (
    FAST_POLL_S,
    MIN_REDRAW_S,
    QUIET_POLLS,
    SLOW_POLL_S,
    WAITING_POLL_S,
    LiveView,
    snapshot_version,
)


def _version(progress: Progress) -> tuple:
    return snapshot_version(progress.snapshot())


def test_version_ignores_what_the_status_line_shows_on_every_poll() -> None:
    progress = Progress()
    progress.set(state="running", total=5)
    before = _version(progress)
    progress.set(message="waiting for another job (running for 3 s)", rate=0.5, eta=12.0)
    assert _version(progress) == before
    # drawn by the status fragment itself: a search's losses, the batch being written
    progress.update_data(search_losses=((1, 2.5, 2.5),))
    from memprobe_core.models.live import LiveBatch

    progress.live.publish(LiveBatch("victim", (), 10, 0.0, 0.0, 0))
    assert _version(progress) == before


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p.add_item({"mem": 0.5}),
        lambda p: p.advance(),
        lambda p: p.set(state="finished"),
        lambda p: p.set(total=9),
        lambda p: p.update_data(round=1),
        lambda p: p.update_data(results={"interactive": object()}),
        lambda p: p.fail("RuntimeError: boom"),
    ],
)
def test_version_changes_with_what_a_page_draws(change) -> None:  # type: ignore[no-untyped-def]
    progress = Progress()
    progress.set(state="running", total=5)
    progress.update_data(results={})
    before = _version(progress)
    change(progress)
    assert _version(progress) != before


def test_a_replaced_data_value_of_the_same_size_is_a_change() -> None:
    progress = Progress()
    progress.update_data(results={"ps_base": 1})
    before = _version(progress)
    progress.update_data(results={"ps_base": 2})  # jobs replace values, never mutate them
    assert _version(progress) != before


def test_no_change_polls_fast_then_slows_down_once() -> None:
    view = LiveView()
    view.drew(("v", 1), now=0.0)
    actions = [view.poll(("v", 1), final=False, now=1.0 + i) for i in range(QUIET_POLLS)]
    assert actions == ["none"] * (QUIET_POLLS - 1) + ["slow_down"]
    assert view.interval == SLOW_POLL_S
    later = [view.poll(("v", 1), final=False, now=10.0 + i) for i in range(3 * QUIET_POLLS)]
    assert later == ["none"] * (3 * QUIET_POLLS)  # already slow: no more reruns
    assert view.interval == SLOW_POLL_S


def test_a_change_redraws_and_polls_fast_again() -> None:
    view = LiveView(interval=SLOW_POLL_S)
    view.drew(("v", 1), now=0.0)
    assert view.poll(("v", 2), final=False, now=MIN_REDRAW_S + 0.1) == "redraw"
    assert view.interval == FAST_POLL_S


def test_changes_closer_than_the_redraw_floor_wait_but_the_end_does_not() -> None:
    view = LiveView()
    view.drew(("v", 1), now=100.0)
    assert view.poll(("v", 2), final=False, now=100.2) == "none"
    assert view.poll(("v", 3), final=False, now=100.0 + MIN_REDRAW_S) == "redraw"
    view.drew(("v", 3), now=101.0)
    assert view.poll(("v", "end"), final=True, now=101.1) == "redraw"


def test_a_new_draw_restarts_the_quiet_count() -> None:
    view = LiveView()
    view.drew(("v", 1), now=0.0)
    for i in range(QUIET_POLLS - 1):
        assert view.poll(("v", 1), final=False, now=1.0 + i) == "none"
    view.drew(("v", 1), now=5.0)  # e.g. the user changed a widget: a full run
    assert view.poll(("v", 1), final=False, now=6.0) == "none"


def test_a_queued_job_is_polled_slowly_until_it_starts() -> None:
    view = LiveView()
    view.drew(("waiting", 0), now=0.0, waiting=True)
    assert view.interval == WAITING_POLL_S > SLOW_POLL_S
    quiet = [
        view.poll(("waiting", 0), final=False, now=5.0 * (i + 1)) for i in range(3 * QUIET_POLLS)
    ]
    assert quiet == ["none"] * (3 * QUIET_POLLS)  # no rerun while it waits, never faster
    assert view.interval == WAITING_POLL_S
    assert view.poll(("running", 0), final=False, now=100.0) == "redraw"
    assert view.interval == FAST_POLL_S
    view.drew(("running", 0), now=100.5)  # the redraw of a running job keeps the fast poll
    assert view.interval == FAST_POLL_S


def test_a_batch_being_written_keeps_the_poll_fast_without_redrawing() -> None:
    view = LiveView()
    view.drew(("v",), now=0.0)
    for tick in range(1, 3 * QUIET_POLLS):
        assert view.poll(("v",), final=False, now=float(tick), streaming=True) == "none"
    assert view.interval == FAST_POLL_S


def test_a_batch_starting_after_a_quiet_spell_speeds_the_poll_up_once() -> None:
    view = LiveView()
    view.drew(("v",), now=0.0)
    for tick in range(1, QUIET_POLLS + 1):
        view.poll(("v",), final=False, now=float(tick))
    assert view.interval > FAST_POLL_S
    assert view.poll(("v",), final=False, now=10.0, streaming=True) == "speed_up"
    assert view.interval == FAST_POLL_S
    assert view.poll(("v",), final=False, now=10.5, streaming=True) == "none"
