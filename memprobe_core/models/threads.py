"""Torch's intra-op threads chosen from the cores actually free, re-chosen between batches.

On a machine shared with other work (a browser beside the dashboard, a second job, a CI
neighbour) a torch thread whose core is taken waits, and every matrix product waits for it: a
probe beside one busy core took 84 s with two threads and 38 s with one (issue 52, 2 cores).
:func:`adapt`, called at batch boundaries by the code that runs a local torch model
(``Generator.generate`` for backends that run torch in this process, GCG's steps, the membership
scoring pass), measures the cores other processes kept busy since its previous call
(:class:`memprobe_core.machine_load.LoadSampler`: two counters, no sleeping) and sets
``torch.set_num_threads(n)``, n = the free cores rounded down, at least 1, at most
:func:`memprobe_core.machine_load.cpu_cores`.

Hysteresis, so it does not flap: fewer threads as soon as one measurement has less than
``n - DOWN_TOLERANCE`` cores free (a thread waiting for a taken core costs far more than an idle
core); more threads only after ``UP_PATIENCE`` measurements in a row each with at least
``n + 1 - UP_TOLERANCE`` cores free. Measurements over less than ``MIN_INTERVAL_S`` of wall time
are skipped (too noisy). The first call, having no previous reading, measures for
``FIRST_WINDOW_S``.

The user's explicit choice wins (``MEMPROBE_THREADS``, docs/options.md):

- ``MEMPROBE_THREADS=auto`` (the default): adaptive, as above.
- ``MEMPROBE_THREADS=<n>`` (a whole number ≥ 1): fixed at n threads, never changed.
- ``MEMPROBE_THREADS`` unset and ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` set: torch is left
  alone. Those variables are how torch's own documentation tells a user to fix its threads;
  someone who set them (a cluster scheduler, a benchmark, a CI runner sharing a machine on
  purpose) has decided, and overriding them would silently undo that decision.

Torch's thread count is per calling thread (OpenMP keeps it per thread): ``adapt`` applies the
chosen count in the thread that calls it, which is the thread that runs the model.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from memprobe_core.errors import UsageError
from memprobe_core.machine_load import LoadSampler, cpu_cores

ENV = "MEMPROBE_THREADS"
USER_THREAD_ENVS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")

# The costs are lopsided (issue 52, 2 cores): a second thread gains 1.12× on an idle machine,
# and loses 1.31× beside a process using 20 % of one core, 2.2× beside a busy core. So one
# thread fewer as soon as others take more than DOWN_TOLERANCE of a core (the counters tick in
# 10 ms steps: over MIN_INTERVAL_S the reading is good to about ±0.04 cores, and an idle
# machine's daemons use a few hundredths), one more only when at most UP_TOLERANCE is taken.
DOWN_TOLERANCE = 0.1
UP_TOLERANCE = 0.05
UP_PATIENCE = 2
MIN_INTERVAL_S = 1.0
FIRST_WINDOW_S = 0.3


class ThreadsSettingError(UsageError):
    """``MEMPROBE_THREADS`` holds a value memprobe does not accept (CLI exit 2)."""


@dataclass(frozen=True)
class ThreadMode:
    """What the environment asks for: ``auto`` (adaptive), ``fixed`` at ``threads``, or
    ``user`` (OMP_NUM_THREADS / MKL_NUM_THREADS set: leave torch alone)."""

    kind: Literal["auto", "fixed", "user"]
    threads: int | None = None
    source: str = ENV


def thread_mode(environ: Mapping[str, str] | None = None) -> ThreadMode:
    """Read ``MEMPROBE_THREADS`` (and torch's own variables) from ``environ`` (default
    ``os.environ``).

    Raises:
        ThreadsSettingError: ``MEMPROBE_THREADS`` is neither ``auto`` nor a whole number ≥ 1.
    """
    env = os.environ if environ is None else environ
    raw = env.get(ENV)
    value = None if raw is None else raw.strip()
    if not value:  # unset or empty (``MEMPROBE_THREADS=`` in a script): the default
        for name in USER_THREAD_ENVS:
            if env.get(name, "").strip():
                return ThreadMode("user", source=name)
        return ThreadMode("auto")
    if value.lower() == "auto":
        return ThreadMode("auto")
    try:
        threads = int(value)
    except ValueError:
        threads = None
    if threads is None or threads < 1:
        raise ThreadsSettingError(
            f"{ENV}={raw!r}: give 'auto' (threads chosen from the free cores) or a whole number "
            f"of torch threads of at least 1 (e.g. {ENV}=1), or unset it"
        )
    return ThreadMode("fixed", threads)


def target_threads(free: float, current: int, cores: int) -> tuple[int, bool]:
    """The thread count for ``free`` cores when running ``current`` threads, and whether it is
    a step up (which waits for ``UP_PATIENCE`` measurements) — see the module's docstring."""
    if free < current - DOWN_TOLERANCE:
        return max(1, min(cores, math.floor(free + DOWN_TOLERANCE))), False
    up = max(1, min(cores, math.floor(free + UP_TOLERANCE)))
    if up > current:
        return up, True
    return current, False


class ThreadAdapter:
    """Chooses and applies torch's threads; one per process (:func:`adapt`), injectable parts
    for tests (``sampler``, ``clock``, ``sleep``, ``cores``, ``get_threads``/``set_threads``)."""

    def __init__(
        self,
        *,
        sampler: LoadSampler | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        cores: Callable[[], int] = cpu_cores,
        get_threads: Callable[[], int] | None = None,
        set_threads: Callable[[int], None] | None = None,
    ) -> None:
        self._sampler = sampler if sampler is not None else LoadSampler(clock=clock)
        self._clock = clock
        self._sleep = sleep
        self._cores = cores
        self._get = get_threads
        self._set = set_threads
        self._lock = threading.Lock()
        self._chosen: int | None = None
        self._last_at: float | None = None
        self._up_votes = 0
        self.changes = 0  # how many times the adaptive count changed (benchmarks report it)

    def _get_threads(self) -> int:
        if self._get is not None:
            return self._get()
        import torch

        return int(torch.get_num_threads())

    def _set_threads(self, n: int) -> None:
        if self._set is not None:
            self._set(n)
            return
        import torch

        torch.set_num_threads(n)

    def _apply(self, n: int) -> None:
        if self._get_threads() != n:  # per calling thread: set where it differs
            self._set_threads(n)

    def adapt(self, mode: ThreadMode) -> int | None:
        """Choose and apply the thread count for ``mode``; the count, or ``None`` when torch is
        left alone (``mode.kind == "user"``)."""
        if mode.kind == "user":
            return None
        if mode.kind == "fixed":
            assert mode.threads is not None
            self._apply(mode.threads)
            return mode.threads
        with self._lock:
            n = self._choose()
        self._apply(n)
        return n

    def _choose(self) -> int:
        cores = self._cores()
        if self._chosen is None:  # first call: a short measurement, then decide at once
            self._sampler.sample()
            self._sleep(FIRST_WINDOW_S)
            busy = self._sampler.sample()
            self._last_at = self._clock()
            current = min(cores, max(1, self._get_threads()))
            free = cores - (busy or 0.0)
            target, _ = target_threads(free, current, cores)
            self._chosen = target
            return target
        now = self._clock()
        if self._last_at is not None and now - self._last_at < MIN_INTERVAL_S:
            return self._chosen  # too short an interval to measure: keep counting from before
        busy = self._sampler.sample()
        self._last_at = now
        if busy is None:
            return self._chosen
        target, is_up = target_threads(cores - busy, self._chosen, cores)
        if not is_up:
            self._up_votes = 0
            if target != self._chosen:
                self._chosen = target
                self.changes += 1
            return self._chosen
        self._up_votes += 1
        if self._up_votes >= UP_PATIENCE:
            self._up_votes = 0
            self._chosen = target
            self.changes += 1
        return self._chosen


_adapter: ThreadAdapter | None = None
_adapter_lock = threading.Lock()


def adapter() -> ThreadAdapter:
    """The process's one :class:`ThreadAdapter`."""
    global _adapter
    with _adapter_lock:
        if _adapter is None:
            _adapter = ThreadAdapter()
        return _adapter


def adapt() -> int | None:
    """Call at a batch boundary of work that runs torch in this process: sets torch's threads
    (in the calling thread) from ``MEMPROBE_THREADS`` and the cores free; returns the count, or
    ``None`` when the user's OMP_NUM_THREADS / MKL_NUM_THREADS leave torch alone.

    Raises:
        ThreadsSettingError: a bad ``MEMPROBE_THREADS``.
    """
    return adapter().adapt(thread_mode())
