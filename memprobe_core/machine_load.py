"""How busy the machine is with OTHER work: the cores this process may use and how many of them
other processes keep busy.

Used to choose torch's intra-op threads from the cores actually free
(:mod:`memprobe_core.models.threads`): on a 2-core machine shared with a browser or another job,
a second torch thread that waits for a descheduled core makes every matrix product slower.

The measurement is the system's busy CPU time minus this process's own CPU time, over the wall
time between two readings (psutil, so it works wherever psutil does, not only on Linux):

    others_busy = (Δ system busy − Δ own CPU) / Δ wall

It is a rate in cores (1.0: one core kept busy by other processes), clamped to
``[0, cpu_cores()]``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import psutil


def cpu_cores() -> int:
    """The cores this process may run on: its CPU affinity where the OS has one (a container or
    ``taskset`` may allow fewer than the machine has), else ``os.cpu_count()``; at least 1."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is not None:
        try:
            return max(1, len(getaffinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)


def system_busy_seconds() -> float:
    """CPU seconds all cores of the machine have spent busy since boot (user, nice, system,
    interrupts). Idle, I/O wait and steal (time the hypervisor gave another machine) are not
    work of processes here; guest time is already inside user and nice on Linux."""
    t = psutil.cpu_times()
    busy = t.user + t.system
    for name in ("nice", "irq", "softirq"):
        busy += getattr(t, name, 0.0)
    return float(busy)


def own_cpu_seconds() -> float:
    """CPU seconds this process (all its threads) has used, user and system."""
    t = psutil.Process().cpu_times()
    return float(t.user + t.system)


class LoadSampler:
    """Measures, between two calls of :meth:`sample`, the cores other processes kept busy.

    Cheap: each call reads two counters and a clock, no sleeping. The sources are injectable
    (``clock``, ``system_busy``, ``own_cpu``) so a test can feed synthetic load.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        system_busy: Callable[[], float] = system_busy_seconds,
        own_cpu: Callable[[], float] = own_cpu_seconds,
        cores: Callable[[], int] = cpu_cores,
    ) -> None:
        self._clock = clock
        self._system_busy = system_busy
        self._own_cpu = own_cpu
        self._cores = cores
        self._last: tuple[float, float, float] | None = None

    def _read(self) -> tuple[float, float, float]:
        return (self._clock(), self._system_busy(), self._own_cpu())

    def sample(self) -> float | None:
        """Cores kept busy by other processes since the previous call (``None`` on the first
        call, or when no wall time has passed since the previous one)."""
        now = self._read()
        last, self._last = self._last, now
        if last is None:
            return None
        wall = now[0] - last[0]
        if wall <= 0:
            self._last = last  # keep the older reading: the next call measures a real interval
            return None
        others = ((now[1] - last[1]) - (now[2] - last[2])) / wall
        return min(float(self._cores()), max(0.0, others))


def others_busy_cores(window_s: float = 0.2) -> float:
    """A fresh measurement of the cores other processes keep busy, over ``window_s`` seconds
    (blocks that long)."""
    if window_s <= 0:
        # Only code calls this (no option reaches it): a programming error, not a user's.
        raise ValueError(f"a measuring window of {window_s} s is not positive")
    sampler = LoadSampler(
        clock=time.monotonic,
        system_busy=system_busy_seconds,
        own_cpu=own_cpu_seconds,
        cores=cpu_cores,
    )
    sampler.sample()
    time.sleep(window_s)
    busy = sampler.sample()
    return 0.0 if busy is None else busy


def free_cores() -> float:
    """``cpu_cores()`` minus the cores other processes keep busy (a 0.2 s measurement), ≥ 0."""
    return max(0.0, cpu_cores() - others_busy_cores())
