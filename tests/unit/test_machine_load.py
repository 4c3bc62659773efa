"""machine_load: the cores this process may use and the cores OTHER processes keep busy, on
synthetic counters (a fake clock, fake system and own CPU times: no real load, no timing)."""

from __future__ import annotations

import os

import pytest

from memprobe_core import machine_load
from memprobe_core.machine_load import LoadSampler, cpu_cores


class Counters:
    """A fake machine: wall clock, system busy seconds, this process's CPU seconds."""

    def __init__(self) -> None:
        self.wall = 100.0
        self.system = 5000.0
        self.own = 10.0

    def advance(self, wall: float, others: float, own: float) -> None:
        """``wall`` seconds pass; other processes keep ``others`` cores busy, we ``own``."""
        self.wall += wall
        self.own += own * wall
        self.system += (others + own) * wall

    def sampler(self, cores: int = 2) -> LoadSampler:
        return LoadSampler(
            clock=lambda: self.wall,
            system_busy=lambda: self.system,
            own_cpu=lambda: self.own,
            cores=lambda: cores,
        )


def test_first_sample_is_none_then_others_load_excludes_our_own_cpu() -> None:
    c = Counters()
    s = c.sampler()
    assert s.sample() is None
    c.advance(wall=2.0, others=1.0, own=1.0)  # a busy neighbour on one core, we on the other
    assert s.sample() == pytest.approx(1.0)
    c.advance(wall=4.0, others=0.25, own=1.75)
    assert s.sample() == pytest.approx(0.25)  # measured since the previous call only


def test_sample_is_clamped_to_the_cores_and_at_zero() -> None:
    c = Counters()
    s = c.sampler(cores=2)
    s.sample()
    c.wall += 1.0
    c.system += 5.0  # counters from more cores than ours (affinity): at most our cores
    assert s.sample() == 2.0
    c.wall += 1.0
    c.own += 1.0  # own time counted before the system's (sampling skew): never negative
    assert s.sample() == 0.0


def test_no_wall_time_between_calls_gives_none_and_keeps_the_older_reading() -> None:
    c = Counters()
    s = c.sampler()
    s.sample()
    c.advance(wall=1.0, others=1.0, own=0.0)
    s.sample()
    assert s.sample() is None  # same instant
    c.advance(wall=1.0, others=0.5, own=0.0)
    assert s.sample() == pytest.approx(0.5)


def test_cpu_cores_follows_the_affinity_else_cpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert cpu_cores() == 1
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert cpu_cores() == 16
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert cpu_cores() == 1


def test_others_busy_and_free_cores_from_one_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    c = Counters()
    load = {"others": 1.5}
    slept: list[float] = []

    class FakeTime:
        @staticmethod
        def monotonic() -> float:
            return c.wall

        @staticmethod
        def sleep(s: float) -> None:
            slept.append(s)
            c.advance(wall=s, others=load["others"], own=0.1)

    monkeypatch.setattr(machine_load, "time", FakeTime)
    monkeypatch.setattr(machine_load, "system_busy_seconds", lambda: c.system)
    monkeypatch.setattr(machine_load, "own_cpu_seconds", lambda: c.own)
    monkeypatch.setattr(machine_load, "cpu_cores", lambda: 2)
    assert machine_load.others_busy_cores(0.5) == pytest.approx(1.5)
    assert slept == [0.5]
    assert machine_load.free_cores() == pytest.approx(0.5)
    assert slept == [0.5, 0.2]  # the default window
    load["others"] = 3.0
    assert machine_load.free_cores() == 0.0  # never negative
    with pytest.raises(ValueError, match="measuring window of 0"):
        machine_load.others_busy_cores(0)


def test_real_counters_read() -> None:
    """The psutil readings exist and move forward (values not asserted: real machine)."""
    assert machine_load.system_busy_seconds() > 0
    assert machine_load.own_cpu_seconds() >= 0
    assert 0.0 <= machine_load.others_busy_cores(0.01) <= cpu_cores()
