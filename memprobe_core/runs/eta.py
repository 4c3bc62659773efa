"""Time left for a probe or a comparison, from a model of the work still to do.

Why not ``elapsed / done × left`` over the whole run: candidates land a round's batch at a time
and methods differ by orders of magnitude in cost. Between two batches that rate only falls, so
the estimate grew (a probe's ETA went from 9 to 33 minutes during a round that ended 8 s later),
and a comparison extrapolated the fast prefix-suffix units to GCG and the attacker loop ("50 s
left" with 7 minutes to go).

The model here:

- **Work per method**: each method plans a number of steps (candidates to score, or search steps
  for a white-box search once it says how many). A method's cost per step is measured on the
  method itself (seconds since it started ÷ steps it finished); a method not yet started borrows
  the highest cost per step measured so far and the estimate says it is rough. The highest, not
  the mean: the methods that finish first are the cheap ones (prefix-suffix before GCG and the
  attacker loop), and an estimate that runs out early helps nobody.
- **A countdown between completions**: the estimate is made when a step finishes and then counts
  down with the clock; at the next completion the new estimate is taken only if it is lower. So
  while work completes the time left never rises. When the countdown reaches 0 with work left,
  the estimate was too low: :attr:`EtaReading.overrun` says so, and the next completion starts a
  fresh estimate counted in :attr:`EtaReading.revisions`, which the page shows: a higher figure
  only ever comes as a stated revision, never as a silent jump up.

Pure: the caller passes the clock, so tests drive it with made-up times.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EtaReading:
    """What the page shows.

    Attributes:
        seconds: estimated seconds left; ``None`` when unknown (nothing measured yet, or overrun).
        rough: some method's cost is borrowed from the others (it has not run a step yet).
        overrun: the last estimate ran out with work still to do ("taking longer than
            estimated"); a fresh estimate comes with the next finished step.
        revisions: how many times an estimate ran out and was made afresh; within one value
            of it, ``seconds`` never rises.
    """

    seconds: float | None
    rough: bool = False
    overrun: bool = False
    revisions: int = 0


@dataclass
class _Method:
    planned: int
    done: int = 0
    started: float | None = None
    finished: float | None = None

    def cost_per_step(self, now: float) -> float | None:
        if self.started is None or self.done == 0:
            return None
        return ((self.finished or now) - self.started) / self.done

    @property
    def left(self) -> int:
        return 0 if self.finished is not None else max(0, self.planned - self.done)


@dataclass
class EtaModel:
    """Remaining work of a run of several methods, each with planned steps (see module doc).

    Call :meth:`start` when a method begins, :meth:`step` when it finishes a step (a candidate
    scored, a search step), :meth:`finish` when it ends (its remaining steps drop out, e.g. an
    early stop), and :meth:`reading` to show the time left.
    """

    plan: Mapping[str, int]
    _methods: dict[str, _Method] = field(init=False)
    _shown: float | None = field(default=None, init=False)  # estimate at _shown_at
    _shown_at: float = field(default=0.0, init=False)
    _rough: bool = field(default=False, init=False)
    _revisions: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._methods = {m: _Method(max(1, int(n))) for m, n in self.plan.items()}

    def start(self, method: str, now: float) -> None:
        state = self._methods.setdefault(method, _Method(1))
        if state.started is None:
            state.started = now

    def replan(self, method: str, steps: int) -> None:
        """``method`` now knows how many steps it will take (a search announces its steps)."""
        state = self._methods.setdefault(method, _Method(1))
        state.planned = max(state.done, int(steps))

    def step(self, method: str, now: float, n: int = 1) -> None:
        state = self._methods.setdefault(method, _Method(1))
        if state.started is None:
            state.started = now
        state.done += n
        state.planned = max(state.planned, state.done)
        self._estimate(now)

    def finish(self, method: str, now: float) -> None:
        state = self._methods.setdefault(method, _Method(1))
        if state.started is None:
            state.started = now
        state.finished = now
        self._estimate(now)

    def reading(self, now: float) -> EtaReading:
        if self._shown is None:
            return EtaReading(None, rough=self._rough, revisions=self._revisions)
        left = self._shown - (now - self._shown_at)
        if left <= 0 and self._work_left():
            return EtaReading(None, rough=self._rough, overrun=True, revisions=self._revisions)
        return EtaReading(max(0.0, left), rough=self._rough, revisions=self._revisions)

    # --- the estimate ------------------------------------------------------------------------

    def _work_left(self) -> bool:
        return any(state.left for state in self._methods.values())

    def _estimate(self, now: float) -> None:
        fresh = self._model(now)
        if fresh is None:
            return
        seconds, rough = fresh
        counting = self.reading(now)
        if counting.seconds is not None:
            seconds = min(seconds, counting.seconds)  # never up while work completes
        elif counting.overrun:
            self._revisions += 1  # the last estimate ran out: this one is a stated revision
        self._shown, self._shown_at, self._rough = seconds, now, rough

    def _model(self, now: float) -> tuple[float, bool] | None:
        """Seconds left by the model, and whether a borrowed cost went into it."""
        costs = {m: s.cost_per_step(now) for m, s in self._methods.items()}
        measured = [c for c in costs.values() if c is not None]
        if not measured:
            return None
        borrowed = max(measured)
        seconds, rough = 0.0, False
        for method, state in self._methods.items():
            if not state.left:
                continue
            cost = costs[method]
            if cost is None:
                cost, rough = borrowed, True
            seconds += state.left * cost
        return seconds, rough


# --- before a run: an estimate from this machine's earlier runs -----------------------------------


@dataclass(frozen=True)
class PriorEstimate:
    """Seconds a planned run should take, from earlier units in the store.

    Attributes:
        seconds: the estimate; ``None`` when some method has no earlier unit to go by.
        measured_from: earlier units the estimate uses.
        missing: planned methods with no earlier unit on this victim.
    """

    seconds: float | None
    measured_from: int
    missing: tuple[str, ...]


def prior_estimate(
    timings: Iterable[Mapping[str, Any]],
    plan: Mapping[str, int],
    *,
    victim: str | None,
    length: int,
) -> PriorEstimate:
    """How long ``plan`` ({method: candidates}) should take at ``length`` on ``victim``.

    From ``Store.unit_timings`` rows of the same victim: each earlier unit's seconds per scored
    candidate per token of length, the median per method, times the planned candidates and this
    length. Why per token of length: generation time grows with the tokens written (a suffix is
    two thirds of the length); a rough but honest scale. A white-box search's steps are not
    counted (its unit scores one candidate), so earlier runs with other step counts skew it.
    """
    rates: dict[str, list[float]] = {}
    for row in timings:
        if victim is not None and row.get("victim") != victim:
            continue
        candidates = max(1, int(row.get("candidates") or 0))
        if row["length"] > 0:
            rates.setdefault(row["method"], []).append(row["seconds"] / candidates / row["length"])
    missing = tuple(m for m in plan if m not in rates)
    if missing:
        return PriorEstimate(None, sum(len(v) for v in rates.values()), missing)
    seconds = sum(
        statistics.median(rates[method]) * max(1, candidates) * length
        for method, candidates in plan.items()
    )
    return PriorEstimate(seconds, sum(len(rates[m]) for m in plan), ())
