"""The ETA follows the load (memprobe_core.runs.eta, "Load"): a run whose first batches were
measured on a busy machine is not estimated at that slow rate once the machine is free again.

A synthetic run of ten batches of 30 work seconds each: the first three while other processes
keep 1.5 of 2 cores busy (each batch 120 s of wall time), the rest on an idle machine (30 s).
The page polls every 0.5 s and reads the load the way ``ui_common.job_runner.Progress`` does.
"""

from __future__ import annotations

import pytest

from memprobe_core.runs.eta import EtaModel

CORES = 2
WORK_S = 30.0
BATCHES = 10
SLOW_BATCHES = 3
BUSY = 1.5  # cores other processes keep busy during the slow batches (speed 0.25)
POLL = 0.5


def busy_at(t: float, drop_at: float) -> float:
    return BUSY if t < drop_at else 0.0


def replay(model: EtaModel, *, follow_load: bool) -> list[tuple[float, float | None, float]]:
    """(wall time, seconds shown, seconds really left) at every poll after the load dropped."""
    ends, t = [], 0.0
    for batch in range(BATCHES):
        t += WORK_S / (0.25 if batch < SLOW_BATCHES else 1.0)
        ends.append(t)
    drop_at = ends[SLOW_BATCHES - 1]
    model.start("m", 0.0)
    model.round_started("m", 0.0, 1)
    readings, now, done = [], 0.0, 0
    while done < BATCHES:
        now = round(now + POLL, 6)
        if follow_load:
            model.observe_load(now, busy_at(now - POLL / 2, drop_at))
        while done < BATCHES and ends[done] <= now:
            model.step("m", ends[done])
            done += 1
            if done < BATCHES:
                model.round_started("m", ends[done - 1], 1)
        if now > drop_at and done < BATCHES:
            readings.append((now, model.reading(now).seconds, ends[-1] - now))
    return readings


def worst_after(readings, seconds_after_drop: float, drop_at: float) -> float:  # type: ignore[no-untyped-def]
    return max(
        shown / left
        for now, shown, left in readings
        if shown is not None and now >= drop_at + seconds_after_drop
    )


DROP_AT = SLOW_BATCHES * WORK_S / 0.25


def test_without_the_load_a_slow_start_is_extrapolated_to_an_idle_machine():
    readings = replay(EtaModel({"m": BATCHES}), follow_load=False)
    # The claim the load-following model fixes: over 2× the time left, 10 s after the drop.
    assert worst_after(readings, 10.0, DROP_AT) > 2.0


def test_following_the_load_the_estimate_comes_down_within_seconds_of_the_drop():
    readings = replay(EtaModel({"m": BATCHES}, cores=CORES), follow_load=True)
    assert worst_after(readings, 10.0, DROP_AT) <= 1.25
    assert worst_after(readings, 0.0, DROP_AT) <= 4.0  # the drop itself cannot be foreseen


def test_a_load_rise_never_raises_the_figure_silently():
    model = EtaModel({"m": 4}, cores=CORES)
    model.observe_load(0.0, 0.0)
    model.start("m", 0.0)
    model.round_started("m", 0.0, 1)
    model.observe_load(10.0, 0.0)
    model.step("m", 10.0)  # one batch of 10 s on an idle machine: 30 s left
    model.round_started("m", 10.0, 1)
    assert model.reading(10.0).seconds == pytest.approx(30.0)
    shown = []
    for k in range(1, 41):
        now = 10.0 + k
        model.observe_load(now, 1.5)  # others now keep 1.5 of 2 cores busy
        reading = model.reading(now)
        shown.append((reading.seconds, reading.overrun))
    figures = [s for s, _ in shown if s is not None]
    assert figures == sorted(figures, reverse=True)  # counted down, never up
    assert figures[0] == pytest.approx(29.0, abs=0.01)
    # ... until it runs out: then "taking longer than estimated", and the next step revises.
    assert any(overrun for _, overrun in shown)


def test_under_a_steady_load_the_figure_is_in_wall_seconds():
    """Costs are kept in work seconds; shown, they are over the speed now (a quarter here)."""
    model = EtaModel({"m": 4}, cores=CORES)
    model.observe_load(0.0, BUSY)
    model.start("m", 0.0)
    model.round_started("m", 0.0, 1)
    for k in range(1, 241):  # the first batch: 30 work seconds at a quarter speed
        model.observe_load(k * POLL, BUSY)
    model.step("m", 120.0)
    model.round_started("m", 120.0, 1)
    for k in range(241, 261):
        model.observe_load(k * POLL, BUSY)
    assert model.reading(130.0).seconds == pytest.approx(3 * 120.0 - 10.0, rel=0.01)


def test_without_cores_load_readings_change_nothing():
    plain, fed = EtaModel({"m": 3}), EtaModel({"m": 3})
    for model in (plain, fed):
        model.start("m", 0.0)
        model.round_started("m", 0.0, 1)
    fed.observe_load(5.0, 1.9)
    for model in (plain, fed):
        model.step("m", 10.0)
    assert fed.reading(12.0) == plain.reading(12.0)
