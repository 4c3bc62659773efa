"""Time left for a probe or a comparison, from a model of the work still to do.

Why not ``elapsed / done × left`` over the whole run: candidates land a round's batch at a time
and methods differ by orders of magnitude in cost. Between two batches that rate only falls, so
the estimate grew (a probe's ETA went from 9 to 33 minutes during a round that ended 8 s later),
and a comparison extrapolated the fast prefix-suffix units to GCG and the attacker loop ("50 s
left" with 7 minutes to go).

The model here:

- **Work in batches**: each method plans a number of steps (candidates to score, or search steps
  for a white-box search once it says how many). Steps come in batches: a round's candidates are
  answered by one generation call and land together, and a batch of four costs far less than
  four batches of one (on a 2-core CPU the Quick probe's round of 4 took less time than its
  round-0 candidate alone). A method announces each round's size (:meth:`EtaModel.round_started`)
  or the plan gives them all (``batches``); a step nobody announced is a batch of one.
- **Cost per batch, measured on the method itself**: the seconds its last batch of that size
  took. A batch size not measured yet is scaled from the nearest measured one by
  ``(size / measured) ** BATCH_EXPONENT`` (0.2: a batch of 4 is costed 1.32× a batch of 1, of 24
  1.89×); the real figure on a CPU lies between 1× and n×, and an estimate that runs out is
  revised (below) while one that is far too high helps nobody. A method not yet started uses its
  ``prior`` (seconds per batch from this machine's earlier runs) when the caller has one, else
  borrows the geometric mean of the batch costs measured so far, and the estimate says it is
  rough. (It borrowed the highest before; with GCG's search steps measured first that put the
  attacker loop at 5× its time, and the estimate must stay under 2× the time really left.)
- **A countdown between completions**: the estimate is made when a step finishes (or a round
  announces its size) and then counts down with the clock; at the next completion the new
  estimate is taken only if it is lower. So while work completes the time left never rises. When
  the countdown reaches 0 with work left, the estimate was too low: :attr:`EtaReading.overrun`
  says so, and the next completion starts a fresh estimate counted in
  :attr:`EtaReading.revisions`, which the page shows: a higher figure only ever comes as a stated
  revision, never as a silent jump up.

- **Load**: with ``cores`` given and :meth:`EtaModel.observe_load` fed the cores other processes
  keep busy (the page samples them at each poll and event), the model runs on a *work clock*
  that advances at the share of cores left free: a batch measured while the machine was busy is
  costed in work seconds, and the time left is the work left over the speed now (smoothed over
  :data:`LOAD_SMOOTHING_S`). Without it a batch measured under a load that then went away kept
  its slow cost until the next batch ended: 3.5× the time really left was seen. The figure
  shown still never rises within one revision: when the load rises, the countdown runs out and
  a stated revision follows.

Pure: the caller passes the clock and the load, so tests drive it with made-up times.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memprobe_core.attacks import registry

BATCH_EXPONENT = 0.2
"""A batch of ``n`` steps not measured yet costs ``(n / m) ** BATCH_EXPONENT`` times a measured
batch of ``m`` (see the module doc)."""


LEAST_FACTOR = 0.7
"""The least time plausibly left is this share of the model's figure for it (batches no faster
than measured, bigger ones no faster than smaller ones): the jitter of one batch to the next on a
shared CPU stayed within it in the traces (docs/benchmarks.md, "Estimates")."""


LOAD_SMOOTHING_S = 5.0
"""The speed now is the load's exponential average over about this many seconds: one poll's
interval (0.5 s) is too short to tell a browser's repaint from a lasting change."""


def _speed(cores: float, others_busy: float) -> float:
    """The share of this machine a job gets beside processes keeping ``others_busy`` cores busy
    (as in :func:`prior_estimate`: at least half a core)."""
    return _free(cores, others_busy) / cores


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


def scaled_batch_cost(costs: Mapping[int, float], size: int, *, low: bool = False) -> float | None:
    """Seconds a batch of ``size`` steps should take, from measured ``{size: seconds}``: the
    measured figure, else the nearest measured size scaled by ``BATCH_EXPONENT``. ``low``: the
    least it could plausibly take (a bigger batch no faster than a smaller one, a smaller one
    no faster per step than a bigger one)."""
    if size in costs:
        return costs[size]
    if not costs:
        return None
    nearest = min(costs, key=lambda m: (abs(math.log(m / size)), -m))
    exponent = (0.0 if size > nearest else 1.0) if low else BATCH_EXPONENT
    return costs[nearest] * (size / nearest) ** exponent


@dataclass
class _Method:
    planned: int
    sizes: list[int] = field(default_factory=list)  # planned batch sizes, in order (if known)
    done: int = 0
    started: float | None = None
    finished: float | None = None
    batch_started: float | None = None  # when the batch in flight began
    batch_size: int | None = None  # its size, when announced
    batch_done: int = 0  # its steps done
    first_landed: float | None = None  # when its first step landed (the rest only wait scoring)
    last_landed: float | None = None
    last_size: int | None = None  # the size of the last batch announced
    batches_done: int = 0
    costs: dict[int, float] = field(default_factory=dict)  # {batch size: seconds}, latest

    @property
    def left(self) -> int:
        return 0 if self.finished is not None else max(0, self.planned - self.done)

    def begin(self, now: float) -> None:
        if self.started is None:
            self.started = now
        if self.batch_started is None:
            self.batch_started = now

    def next_size(self) -> int | None:
        """The size of the batch after those done, when the plan says so."""
        return self.sizes[self.batches_done] if self.batches_done < len(self.sizes) else None

    def record(self, now: float, n: int) -> None:
        """``n`` steps finished at ``now``: close the batch in flight when it is complete."""
        self.begin(now)
        size = self.batch_size if self.batch_size is not None else self.next_size()
        self.done += n
        self.planned = max(self.planned, self.done)
        self.batch_done += n
        if self.first_landed is None:
            self.first_landed = now
        self.last_landed = now
        if size is None or self.batch_done >= size:
            took = now - (self.batch_started if self.batch_started is not None else now)
            steps = max(1, self.batch_done)
            self.costs[steps] = took
            self.batches_done += 1
            if size is not None:
                self.last_size = size
            self.batch_started, self.batch_size, self.batch_done = now, None, 0
            self.first_landed = self.last_landed = None
        else:
            self.batch_size = size

    def remaining(self, now: float, borrowed: tuple[float, float] | None) -> tuple[float, float]:
        """Seconds this method still needs: (estimate, least plausible). ``borrowed``: (cost,
        least cost) of a batch of one for a method that has measured nothing itself."""
        left = self.left
        if not left:
            return 0.0, 0.0
        if self.costs:
            central: Mapping[int, float] = self.costs
            least: Mapping[int, float] = self.costs
        elif borrowed is not None:
            central, least = {1: borrowed[0]}, {1: borrowed[1]}
        else:
            raise LookupError("no cost to go by")

        def cost(size: int) -> tuple[float, float]:
            return (
                scaled_batch_cost(central, size) or 0.0,
                scaled_batch_cost(least, size, low=True) or 0.0,
            )

        seconds = low = 0.0
        size = self.batch_size if self.batch_size is not None else self.next_size()
        flying = size is not None and self.batch_started is not None
        if flying and size is not None and self.batch_started is not None:
            still = min(left, size - self.batch_done)
            if self.first_landed is not None and self.last_landed is not None:
                # Its steps are landing: the batch was answered, the rest wait their scoring.
                each = (self.last_landed - self.first_landed) / max(1, self.batch_done - 1)
                seconds += still * each
            else:  # the batch in flight: its cost less what it has run already
                ran = now - self.batch_started
                whole, least_whole = cost(size)
                seconds += max(0.0, whole - ran)
                low += max(0.0, least_whole - ran)
            left -= still
        planned = self.sizes[self.batches_done + (1 if flying else 0) :]
        sizes: list[int] = []
        for planned_size in planned:
            if left <= 0:
                break
            sizes.append(min(left, planned_size))
            left -= sizes[-1]
        if left > 0:  # no plan for these: batches the size of the last announced one, else 1
            unit = size or self.last_size or 1
            full, rest = divmod(left, unit)
            sizes += [unit] * full + ([rest] if rest else [])
        for batch in sizes:
            whole, least_whole = cost(batch)
            seconds += whole
            low += least_whole
        return seconds, low


@dataclass
class EtaModel:
    """Remaining work of a run of several methods, each with planned steps (see module doc).

    Call :meth:`start` when a method begins, :meth:`round_started` when it starts a batch of
    ``n`` steps (a round of ``n`` candidates), :meth:`step` when it finishes a step (a candidate
    scored, a search step), :meth:`finish` when it ends (its remaining steps drop out, e.g. an
    early stop), and :meth:`reading` to show the time left.

    Args:
        plan: ``{method: steps}``.
        batches: optional ``{method: [batch sizes]}`` (the attacker loop: ``[1, n, n, …]``);
            without it a method's batches are those :meth:`round_started` announces.
        prior: optional ``{method: seconds per batch of one}`` from earlier runs, used for a
            method until it measures its own.
        cores: this machine's cores; with it, :meth:`observe_load` makes the estimate follow
            the load (module doc, "Load"). ``None``: the load is not taken into account.
    """

    plan: Mapping[str, int]
    batches: Mapping[str, Sequence[int]] | None = None
    prior: Mapping[str, float] | None = None
    cores: int | None = None
    # The work clock (module doc, "Load"): its value at the last load observation, that wall
    # time, the speed since then, the smoothed speed now, and the last figure shown (wall).
    _work: float | None = field(default=None, init=False)
    _work_at: float = field(default=0.0, init=False)
    _speed_last: float = field(default=1.0, init=False)
    _speed_now: float = field(default=1.0, init=False)
    _last_shown: tuple[float, float, int] | None = field(default=None, init=False)
    _methods: dict[str, _Method] = field(init=False)
    _shown: float | None = field(default=None, init=False)  # estimate at _shown_at
    _floor: float = field(default=0.0, init=False)  # least plausible time left at _shown_at
    _shown_at: float = field(default=0.0, init=False)
    _rough: bool = field(default=False, init=False)
    _revisions: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        sizes = self.batches or {}
        self._methods = {
            m: _Method(max(1, int(n)), [max(1, int(s)) for s in sizes.get(m, ())])
            for m, n in self.plan.items()
        }

    def _state(self, method: str) -> _Method:
        return self._methods.setdefault(method, _Method(1))

    def observe_load(self, now: float, others_busy: float | None) -> None:
        """Other processes kept ``others_busy`` cores busy on average since the last observation
        (a :class:`~memprobe_core.machine_load.LoadSampler` reading; ``None``: no new figure).
        Ignored without ``cores``."""
        if self.cores is None:
            return
        if self._work is None:
            self._work, self._work_at = now, now
        elif now > self._work_at:
            speed = self._speed_last if others_busy is None else _speed(self.cores, others_busy)
            interval = now - self._work_at
            self._work += interval * speed
            self._work_at = now
            self._speed_last = speed
            weight = 1.0 - math.exp(-interval / LOAD_SMOOTHING_S)
            self._speed_now += weight * (speed - self._speed_now)

    def _clock(self, now: float) -> float:
        """``now`` on the work clock (the wall clock itself when the load is not followed)."""
        if self._work is None:
            return now
        return self._work + (now - self._work_at) * self._speed_last

    def start(self, method: str, now: float) -> None:
        self._state(method).begin(self._clock(now))

    def round_started(self, method: str, now: float, n: int) -> None:
        """``method`` starts a batch of ``n`` steps (a round's candidates, answered together)."""
        now = self._clock(now)
        state = self._state(method)
        state.begin(now)
        if state.batch_done == 0:
            state.batch_size = max(1, int(n))
        self._estimate(now)

    def replan(self, method: str, steps: int) -> None:
        """``method`` now knows how many steps it will take (a search announces its steps)."""
        state = self._state(method)
        state.planned = max(state.done, int(steps))

    def step(self, method: str, now: float, n: int = 1) -> None:
        now = self._clock(now)
        self._state(method).record(now, n)
        self._estimate(now)

    def finish(self, method: str, now: float) -> None:
        now = self._clock(now)
        state = self._state(method)
        state.begin(now)
        state.finished = now
        self._estimate(now)

    def reading(self, now: float) -> EtaReading:
        """The time left to show at ``now``: the estimate counted down with the clock, and never
        more than twice the least time plausibly left (that one counted down too; see
        :data:`LEAST_FACTOR`). When that reaches 0 with work left, no figure: overrun. Following
        the load, the work left is over the speed now, and never more than the last figure shown
        counted down (a rise comes as a stated revision, never silently)."""
        work = self._reading_at(self._clock(now))
        if self._work is None or work.seconds is None:
            return work
        seconds = work.seconds / self._speed_now
        last = self._last_shown
        if last is not None and last[2] == work.revisions:
            seconds = min(seconds, last[0] - (now - last[1]))
        if seconds <= 0 and self._work_left():
            return dataclasses.replace(work, seconds=None, overrun=True)
        self._last_shown = (seconds, now, work.revisions)
        return dataclasses.replace(work, seconds=max(0.0, seconds))

    def _reading_at(self, now: float) -> EtaReading:
        """:meth:`reading` on the work clock (the wall clock when the load is not followed)."""
        if self._shown is None:
            return EtaReading(None, rough=self._rough, revisions=self._revisions)
        ran = now - self._shown_at
        left = min(self._shown - ran, 2.0 * (self._floor - ran))
        if left <= 0 and self._work_left():
            return EtaReading(None, rough=self._rough, overrun=True, revisions=self._revisions)
        return EtaReading(max(0.0, left), rough=self._rough, revisions=self._revisions)

    @property
    def fraction_done(self) -> float:
        """Steps done over steps planned (what the progress bar shows)."""
        planned = sum(max(s.planned, s.done) for s in self._methods.values())
        return sum(s.done for s in self._methods.values()) / planned if planned else 0.0

    # --- the estimate ------------------------------------------------------------------------

    def _work_left(self) -> bool:
        return any(state.left for state in self._methods.values())

    def _estimate(self, now: float) -> None:
        fresh = self._model(now)
        if fresh is None:
            return
        seconds, floor, rough = fresh
        counting = self._reading_at(now)
        central = (self._shown or 0.0) - (now - self._shown_at)  # the estimate's own countdown
        if counting.overrun:
            self._revisions += 1  # the last estimate ran out: this one is a stated revision
        elif counting.seconds is not None:
            if min(seconds, 2.0 * floor) > counting.seconds + 1e-9:
                if counting.seconds < central - 1e-9:
                    # The figure was held down by the least plausible time, which this step
                    # has now outlived: a fresh estimate, stated as a revision.
                    self._revisions += 1
                else:
                    seconds = min(seconds, counting.seconds)  # never up while work completes
            else:
                seconds = min(seconds, central)
        self._shown, self._floor, self._shown_at, self._rough = seconds, floor, now, rough

    def _model(self, now: float) -> tuple[float, float, bool] | None:
        """Seconds left by the model, the least plausible, and whether a borrowed cost went in."""
        measured = [
            cost / size**BATCH_EXPONENT
            for state in self._methods.values()
            for size, cost in state.costs.items()
            if cost > 0
        ]
        borrowed = (statistics.geometric_mean(measured), min(measured)) if measured else None
        prior = self.prior or {}
        seconds = floor = 0.0
        rough = False
        for method, state in self._methods.items():
            if not state.left:
                continue
            own = prior.get(method) if not state.costs else None
            if not state.costs and own is None:
                rough = True
            try:
                left, least = state.remaining(now, (own, own) if own is not None else borrowed)
            except LookupError:
                return None
            seconds += left
            floor += least
        return seconds, LEAST_FACTOR * floor, rough


# --- before a run: an estimate from this machine's earlier runs -----------------------------------

ROUGH_SECONDS_PER_BATCH_TOKEN = 1.7
"""With nothing measured here yet: seconds per batch of one per token of length, measured on a
2-core CPU under a load of 2 to 5 with the embedded models (the attacker loop's round 0 at length
60 took 102 to 203 s: it writes a prompt, then the victim answers; docs/benchmarks.md,
"Estimates"). Only a rough first figure: other models, machines and loads differ by far more
than the 2× the estimates during a run keep to."""


def rough_rate(method: str) -> float:
    """The rough seconds per batch of one per token of ``method``: what its registry entry
    declares (``MethodSpec.rough_rate``; the prefix-suffix baselines, which ask the victim once,
    0.2), else :data:`ROUGH_SECONDS_PER_BATCH_TOKEN`."""
    spec = next((s for s in registry.specs() if s.name == method), None)  # stored by another
    declared = spec.rough_rate if spec is not None else None  # version: not registered here
    return ROUGH_SECONDS_PER_BATCH_TOKEN if declared is None else declared


@dataclass(frozen=True)
class PriorEstimate:
    """Seconds a planned run should take, from earlier units in the store.

    Attributes:
        seconds: the estimate; ``None`` when some method has no earlier unit to go by.
        measured_from: earlier units the estimate uses.
        missing: planned methods with no earlier unit on this victim.
        rough_seconds: with methods missing: the estimate with those costed at
            :func:`rough_rate` (a rough first figure).
        load_scale: the factor applied for the load now against the load the units ran under
            (``None``: no unit recorded its load, so the same load as then is assumed).
    """

    seconds: float | None
    measured_from: int
    missing: tuple[str, ...]
    rough_seconds: float | None = None
    load_scale: float | None = None


def batch_weight(sizes: Iterable[int]) -> float:
    """A run's batches in batches-of-one: a batch of ``n`` weighs ``n ** BATCH_EXPONENT``."""
    return sum(max(1, int(n)) ** BATCH_EXPONENT for n in sizes)


def _free(cores: float, busy: float) -> float:
    return max(0.5, cores - busy)  # a process always gets some share of a core


def prior_estimate(
    timings: Iterable[Mapping[str, Any]],
    plan: Mapping[str, int],
    *,
    victim: str | None,
    length: int,
    batches: Mapping[str, Sequence[int]] | None = None,
    free_cores_now: float | None = None,
) -> PriorEstimate:
    """How long ``plan`` ({method: candidates}) should take at ``length`` on ``victim``.

    From earlier units of the same victim (rows with ``method``, ``length``, ``seconds``,
    ``candidates`` and ``victim``; where known ``victim_calls``, ``others_busy_cores`` and
    ``cores`` from the unit's costs): each unit's seconds per batch of one per token of length,
    the median per method, times this run's batches (``batches``: {method: [sizes]}; without it
    each candidate is a batch) and this length. A unit's batches are its generation calls to the
    victim, each weighing ``size ** BATCH_EXPONENT`` (a round of 4 answered together costs far
    less than 4 single answers); a unit without ``victim_calls`` counts each candidate as one.
    Why per token of length: generation time grows with the tokens written; a rough but honest
    scale. Load: a unit that recorded the cores other processes kept busy is scaled by the cores
    free then over those free now (``free_cores_now``). A white-box search's steps are not
    counted (its unit scores one candidate), so earlier runs with other step counts skew it.
    """
    sizes = {m: list((batches or {}).get(m) or [1] * max(1, n)) for m, n in plan.items()}
    rates: dict[str, list[float]] = {}
    scales: list[float] = []
    for row in timings:
        if victim is not None and row.get("victim") != victim:
            continue
        if row["length"] <= 0 or row["seconds"] <= 0:
            continue
        candidates = max(1, int(row.get("candidates") or 0))
        calls = int(row.get("victim_calls") or 0) or candidates
        weight = calls * max(1.0, candidates / calls) ** BATCH_EXPONENT
        rate = row["seconds"] / weight / row["length"]
        busy, cores = row.get("others_busy_cores"), row.get("cores") or 0
        if free_cores_now is not None and busy is not None and cores:
            scale = _free(cores, float(busy)) / max(0.5, free_cores_now)
            scale = min(4.0, max(0.25, scale))  # beyond that the load is no longer the story
            scales.append(scale)
            rate *= scale
        rates.setdefault(row["method"], []).append(rate)
    missing = tuple(m for m in plan if m not in rates)
    known = sum(
        statistics.median(rates[m]) * batch_weight(sizes[m]) * length for m in plan if m in rates
    )
    measured_from = sum(len(rates[m]) for m in plan if m in rates)
    load_scale = statistics.median(scales) if scales else None
    if missing:
        rough = known + sum(rough_rate(m) * batch_weight(sizes[m]) * length for m in missing)
        return PriorEstimate(None, measured_from, missing, rough, load_scale)
    return PriorEstimate(known, measured_from, (), None, load_scale)
