"""The ETA's promise during a run (issue 52): once 10 % of the steps are done, the time left it
shows is never more than twice the time really left.

Synthetic timings replayed into ``EtaModel`` the way a run feeds it (``start`` as a unit starts,
``round_started`` at each round, ``step`` per candidate or search step, ``finish`` as the unit
ends), with the page reading it twice a second. The timings are shaped like recorded runs on a
2-core CPU (docs/benchmarks.md, "Estimates"): the attacker loop's round 0 answers its one
initial prompt alone (and pays the first call's warm-up), later rounds answer their candidates as
one batch (costing 1× to n× a single one); prefix-suffix, GCG's search steps and the attacker
loop differ by an order of magnitude; each batch jitters by ±15 %; and the machine may slow
down mid-run (load 1 → 4: up to 3×).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from memprobe_core.runs.eta import EtaModel

POLL = 0.5


@dataclass
class Event:
    at: float
    call: str
    method: str
    n: int = 1


def attacker_loop(
    rng: random.Random, t: float, *, rounds: int, n: int, cost: float, slow
) -> tuple[list[Event], float]:  # type: ignore[no-untyped-def]
    """Round 0: one candidate (with warm-up); then ``rounds`` batches of ``n``."""
    events = [Event(t, "start", "interactive")]
    economy = rng.uniform(0.0, 1.0)  # a batch of n costs n ** economy × a batch of one
    for r in range(rounds + 1):
        size = 1 if r == 0 else n
        events.append(Event(t, "round_started", "interactive", size))
        took = cost * size**economy * rng.uniform(0.85, 1.15)
        if r == 0:
            took *= rng.uniform(1.0, 1.2)  # the first call's warm-up
        t += took * slow(t)
        for i in range(size):  # the batch's candidates are scored one after the other
            events.append(Event(t + 0.05 * i, "step", "interactive"))
        t += 0.05 * (size - 1)  # the next round starts as the last candidate is scored
    events.append(Event(t, "finish", "interactive"))
    return events, t


def single(method: str, t: float, took: float) -> tuple[list[Event], float]:
    t_end = t + took
    return [
        Event(t, "start", method),
        Event(t, "round_started", method, 1),
        Event(t_end, "step", method),
        Event(t_end, "finish", method),
    ], t_end


def search(
    rng: random.Random, t: float, steps: int, cost: float, slow
) -> tuple[list[Event], float]:  # type: ignore[no-untyped-def]
    events = [Event(t, "start", "gcg")]
    for _ in range(steps):
        t += cost * rng.uniform(0.85, 1.15) * slow(t)
        events.append(Event(t, "search_step", "gcg", steps))
    more, t = single("gcg", t, cost * rng.uniform(0.3, 1.0) * slow(t))
    return events + more[1:], t


def scenario(seed: int, kind: str, load: int) -> tuple[dict[str, int], list[Event], float]:
    rng = random.Random(seed)
    unit = 10.0 * (1.0 if load == 1 else 2.5)  # load 4 on 2 cores: every step ~2.5× slower
    slow_from = rng.uniform(0, 3000) if rng.random() < 0.5 else float("inf")
    factor = rng.uniform(1.0, 3.0)

    def slow(t: float) -> float:
        return factor if t >= slow_from else 1.0

    rounds, n = rng.choice([1, 2, 3]), rng.choice([4, 8, 24])
    plan: dict[str, int] = {}
    events: list[Event] = []
    t = 0.0
    if kind == "compare":
        cheap = unit * rng.uniform(0.05, 0.3)
        for method in ("ps_base", "ps_inst"):
            more, t = single(method, t, cheap * rng.uniform(0.5, 1.5) * slow(t))
            events += more
            plan[method] = 1
        steps = rng.randint(2, 10)
        more, t = search(rng, t, steps, unit * rng.uniform(0.5, 4.0), slow)
        events += more
        plan["gcg"] = 1  # a search announces its steps once it starts
    more, t = attacker_loop(rng, t, rounds=rounds, n=n, cost=unit * rng.uniform(1, 10), slow=slow)
    events += more
    plan["interactive"] = 1 + rounds * n
    return plan, events, t


def replay(
    plan: dict[str, int], events: list[Event], end: float
) -> list[tuple[float, float, float]]:
    """Feed the events, read the model every POLL s; (time, fraction done, shown) per reading."""
    eta = EtaModel(plan)
    readings = []
    i, now = 0, 0.0
    while now < end:
        while i < len(events) and events[i].at <= now:
            e = events[i]
            if e.call == "search_step":
                eta.replan(e.method, e.n + 1)
                eta.step(e.method, e.at)
            elif e.call == "round_started":
                eta.round_started(e.method, e.at, e.n)
            else:
                getattr(eta, e.call)(e.method, e.at)
            i += 1
        reading = eta.reading(now)
        if reading.seconds is not None:
            readings.append((now, eta.fraction_done, reading.seconds))
        now += POLL
    return readings


@pytest.mark.parametrize("load", [1, 4])
@pytest.mark.parametrize("kind", ["probe", "compare"])
def test_after_a_tenth_of_the_work_the_time_left_shown_is_at_most_twice_the_real(
    kind: str, load: int
) -> None:
    worst = 0.0
    for seed in range(60):
        plan, events, end = scenario(seed, kind, load)
        readings = replay(plan, events, end)
        assert readings, "an estimate is shown during the run"
        for now, done, shown in readings:
            if done >= 0.1:
                ratio = shown / (end - now)
                worst = max(worst, ratio)
                assert ratio <= 2.0, (seed, now, done, shown, end - now)
    assert worst > 1.0  # the figures are real estimates, not a cautious 0
