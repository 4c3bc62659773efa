"""The ETA model of probes and comparisons (memprobe_core.runs.eta)."""

from __future__ import annotations

import random

import pytest

from memprobe_core.runs.eta import BATCH_EXPONENT, LEAST_FACTOR, EtaModel


def test_a_batched_round_counts_down_instead_of_growing() -> None:
    # The attacker loop: 1 initial candidate, then a round of 8 scored as one batch.
    eta = EtaModel({"interactive": 9})
    eta.start("interactive", 0.0)
    eta.step("interactive", 10.0)  # the initial prompt: 10 s a candidate
    assert eta.reading(10.0).seconds == pytest.approx(80.0)
    # The old rate (elapsed / done) would say 8 × 50 = 400 s here; the countdown falls. It runs
    # at twice the clock once the figure reaches twice the least time plausibly left (0.7 × 80 s).
    assert eta.reading(30.0).seconds == pytest.approx(60.0)
    assert eta.reading(50.0).seconds == pytest.approx(2 * (0.7 * 80.0 - 40.0))
    assert eta.reading(89.0).overrun
    eta.step("interactive", 90.0, n=8)
    assert eta.reading(90.0).seconds == 0.0


def test_a_round_announced_as_one_batch_is_costed_as_a_batch_not_per_candidate() -> None:
    # Round 0: the initial prompt alone, 100 s; round 1: 4 candidates answered as one batch.
    eta = EtaModel({"interactive": 5})
    eta.start("interactive", 0.0)
    eta.round_started("interactive", 0.0, 1)
    eta.step("interactive", 100.0)
    eta.round_started("interactive", 100.0, 4)
    # Per candidate it would be 4 × 100 s; a batch of 4 is costed 4 ** 0.2 × a batch of 1.
    assert eta.reading(100.0).seconds == pytest.approx(100.0 * 4**BATCH_EXPONENT)
    for i in range(4):  # the batch lands together
        eta.step("interactive", 180.0 + i * 0.1)
    assert eta.reading(181.0).seconds == 0.0


def test_the_plan_can_give_every_batch_size_up_front() -> None:
    planned = EtaModel({"interactive": 9}, batches={"interactive": [1, 4, 4]})
    planned.start("interactive", 0.0)
    planned.step("interactive", 10.0)
    assert planned.reading(10.0).seconds == pytest.approx(2 * 10.0 * 4**BATCH_EXPONENT)
    planned.step("interactive", 30.0, n=4)  # round 1 took 20 s: round 2 is costed so
    assert planned.reading(30.0).seconds == pytest.approx(20.0)


def test_a_method_not_started_uses_its_prior_from_earlier_runs_and_is_not_rough() -> None:
    eta = EtaModel({"ps_base": 1, "gcg": 3}, prior={"gcg": 7.0})
    eta.start("ps_base", 0.0)
    eta.step("ps_base", 1.0)
    eta.finish("ps_base", 1.0)
    reading = eta.reading(1.0)
    assert not reading.rough and reading.seconds == pytest.approx(3 * 7.0)


def test_the_time_left_never_rises_while_steps_complete() -> None:
    rng = random.Random(7)
    for _ in range(200):
        plan = {m: rng.randint(1, 12) for m in ("ps_base", "gcg", "interactive")}
        eta, now, shown = EtaModel(plan), 0.0, []
        for method, steps in plan.items():
            eta.start(method, now)
            cost = rng.choice([0.1, 1.0, 20.0])
            for _ in range(steps):
                took = cost * rng.uniform(0.5, 1.5)
                for moment in (now + took / 2, now + took * 0.999):  # the page polls meanwhile
                    shown = _polled(eta.reading(moment), shown)
                now += took
                eta.step(method, now)
                shown = _polled(eta.reading(now), shown)
            eta.finish(method, now)
        for (rev_a, a), (rev_b, b) in zip(shown, shown[1:]):
            assert rev_b > rev_a or b <= a + 1e-9, shown


def _polled(reading, shown: list[tuple[int, float]]) -> list[tuple[int, float]]:  # type: ignore[no-untyped-def]
    # After "longer than estimated" the next figure is a new estimate, with revisions + 1.
    return shown + ([(reading.revisions, reading.seconds)] if reading.seconds is not None else [])


def test_an_unstarted_method_borrows_the_measured_cost_and_says_it_is_rough() -> None:
    eta = EtaModel({"ps_base": 1, "gcg": 1, "interactive": 9})
    eta.start("ps_base", 0.0)
    eta.step("ps_base", 2.0)
    eta.finish("ps_base", 2.0)
    reading = eta.reading(2.0)
    assert reading.rough and reading.seconds == pytest.approx(2.0 * 10)


def test_a_search_that_announces_its_steps_is_costed_per_step() -> None:
    eta = EtaModel({"gcg": 1})
    eta.start("gcg", 0.0)
    eta.replan("gcg", 31)  # 30 search steps, then its one candidate
    eta.step("gcg", 3.0)
    reading = eta.reading(3.0)
    assert not reading.rough and reading.seconds == pytest.approx(30 * 3.0)


def test_an_estimate_that_runs_out_says_so_then_starts_afresh() -> None:
    eta = EtaModel({"interactive": 3})
    eta.start("interactive", 0.0)
    eta.step("interactive", 1.0)  # 1 s a step: 2 s left
    assert eta.reading(1.2).seconds == pytest.approx(1.8)
    late = eta.reading(5.0)
    assert late.overrun and late.seconds is None
    eta.step("interactive", 11.0)  # the last step took 10 s: one step left, costed so
    fresh = eta.reading(11.0)
    assert not fresh.overrun and fresh.seconds == pytest.approx(10.0)
    assert (late.revisions, fresh.revisions) == (0, 1)


def test_a_method_that_stops_early_drops_its_remaining_steps() -> None:
    eta = EtaModel({"interactive": 9, "ps_base": 1})
    eta.start("interactive", 0.0)
    eta.step("interactive", 5.0)
    eta.finish("interactive", 5.0)  # converged after its first candidate
    assert eta.reading(5.0).seconds == pytest.approx(5.0)  # only ps_base's one step, borrowed


def test_nothing_measured_means_no_figure() -> None:
    eta = EtaModel({"ps_base": 1})
    eta.start("ps_base", 0.0)
    assert eta.reading(30.0).seconds is None


def test_an_unstarted_method_borrows_the_geometric_mean_of_the_measured_costs() -> None:
    # Borrowing the slowest put the attacker loop at GCG's cost per search step (5× its time in
    # the traces); an estimate that runs out is revised, one far too high is not.
    eta = EtaModel({"ps_base": 1, "ps_inst": 1, "interactive": 3})
    eta.start("ps_base", 0.0)
    eta.step("ps_base", 2.0)
    eta.finish("ps_base", 2.0)
    eta.start("ps_inst", 2.0)
    eta.step("ps_inst", 12.0)
    eta.finish("ps_inst", 12.0)
    # Shown: the geometric mean's 3 × √20 s, held under twice the least plausible (the
    # cheapest measured, 2 s a step, × 0.7): the unknown method may be as cheap as ps_base.
    shown = min(3 * (2.0 * 10.0) ** 0.5, 2 * LEAST_FACTOR * 3 * 2.0)
    assert eta.reading(12.0).seconds == pytest.approx(shown)
    eta.start("interactive", 12.0)
    eta.step("interactive", 13.0)  # its own cost (1 s a step) replaces the borrowed one
    assert eta.reading(13.0).seconds == pytest.approx(2.0)


def test_the_estimate_before_a_run_scales_earlier_units_of_the_same_victim() -> None:
    from memprobe_core.runs.eta import prior_estimate

    timings = [
        {"method": "ps_base", "length": 100, "seconds": 10.0, "candidates": 1, "victim": "v"},
        {"method": "ps_base", "length": 100, "seconds": 30.0, "candidates": 1, "victim": "v"},
        {"method": "ps_base", "length": 100, "seconds": 999.0, "candidates": 1, "victim": "other"},
        {"method": "interactive", "length": 50, "seconds": 50.0, "candidates": 5, "victim": "v"},
    ]
    # ps_base: median 0.2 s per token × 200; interactive: 0.2 s per candidate-token × 9 × 200.
    both = prior_estimate(timings, {"ps_base": 1, "interactive": 9}, victim="v", length=200)
    assert both.seconds == pytest.approx(0.2 * 200 + 0.2 * 9 * 200)
    assert both.measured_from == 3 and both.missing == ()
    unknown = prior_estimate(timings, {"gcg": 1, "ps_base": 1}, victim="v", length=200)
    assert unknown.seconds is None and unknown.missing == ("gcg",)
