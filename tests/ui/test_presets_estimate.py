"""The estimate a page shows before Run (ui_common.presets.estimate_text): from this machine's
earlier units per token and per batch, corrected for the load, or a rough first figure."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from memprobe_core.attacks import registry
from memprobe_core.option_fields import option
from memprobe_core.runs.eta import (
    BATCH_EXPONENT,
    ROUGH_SECONDS_PER_BATCH_TOKEN,
    prior_estimate,
    rough_rate,
)
from ui_common.presets import Plan, estimate_text, planned_candidates

LABELS = {"ps_base": "P-S-Base", "gcg": "GCG", "interactive": "Ours"}


def row(method: str, seconds: float, **extra: object) -> dict[str, object]:
    return {
        "method": method,
        "length": 100,
        "seconds": seconds,
        "candidates": 1,
        "victim": "v",
    } | extra


def test_nothing_measured_names_every_method_and_gives_a_rough_cpu_figure() -> None:
    plan = Plan({"ps_base": 1, "gcg": 1, "interactive": 5}, {"interactive": [1, 4]})
    text = estimate_text([], plan, "v", 60, free_now=1.0, cores=2, labels=LABELS)
    assert "No time measured yet: P-S-Base, GCG, Ours have not run on this victim here." in text
    rough = 60 * (rough_rate("ps_base") + ROUGH_SECONDS_PER_BATCH_TOKEN * (2 + 4**BATCH_EXPONENT))
    assert f"Rough guess for a 2-core CPU: about {round(rough / 60)} min" in text
    one = estimate_text([], Plan({"gcg": 1}, {}), "v", 60, free_now=None, cores=2, labels=LABELS)
    assert "GCG has not run" in one and "Rough guess" in one
    assert "Rough guess" not in estimate_text(
        [], plan, "v", 60, free_now=1.0, cores=2, labels=LABELS, gpu=True
    )


def test_the_baselines_declare_a_cheaper_rough_rate_than_the_default() -> None:
    assert rough_rate("ps_base") == rough_rate("ps_inst") == 0.2  # MethodSpec.rough_rate
    assert (
        rough_rate("interactive") == rough_rate("not_registered") == ROUGH_SECONDS_PER_BATCH_TOKEN
    )


def test_one_earlier_unit_is_singular_and_no_recorded_load_is_said() -> None:
    text = estimate_text([row("ps_base", 10.0)], {"ps_base": 1}, "v", 100, free_now=2.0, cores=2)
    assert "about 10 s (from 1 earlier unit of these methods" in text
    assert "the same load as then assumed (they recorded none)" in text
    two = estimate_text([row("ps_base", 10.0)] * 2, {"ps_base": 1}, "v", 100, free_now=2.0, cores=2)
    assert "from 2 earlier units" in two


def test_fewer_cores_free_now_than_when_the_units_ran_scales_the_estimate_up() -> None:
    rows = [row("ps_base", 60.0, others_busy_cores=0.0, cores=2)]  # ran with 2 cores free
    idle = estimate_text(rows, {"ps_base": 1}, "v", 100, free_now=2.0, cores=2)
    busy = estimate_text(rows, {"ps_base": 1}, "v", 100, free_now=1.0, cores=2)
    assert "about 60 s" in idle and "×1.00" in idle
    assert (
        "about 2 min" in busy and "corrected for the load (1.0 of 2 cores free now): ×2.00" in busy
    )


def test_a_round_is_costed_as_one_batch_not_as_its_candidates() -> None:
    # An earlier probe: 5 candidates in 2 victim calls (round 0 alone, then a batch of 4).
    earlier = row("interactive", 100.0, candidates=5, victim_calls=2)
    plan = planned_candidates(["interactive"], {"interactive": {"rounds": 3, "n_candidates": 4}})
    assert dict(plan) == {"interactive": 13} and plan.batches == {"interactive": [1, 4, 4, 4]}
    text = estimate_text([earlier], plan, "v", 100, free_now=None, cores=2)
    # Per candidate it would be 100 s × 13 / 5 = 260 s; per batch: 100 s × (1 + 3 × 4^0.2) /
    # (2 × 2.5^0.2) ≈ 206 s.
    per_batch = 100.0 / (2 * 2.5**BATCH_EXPONENT) * (1 + 3 * 4**BATCH_EXPONENT)
    assert per_batch == pytest.approx(206, abs=1)
    assert f"about {round(per_batch / 60)} min" in text


def test_an_audit_is_costed_per_snippet_and_length() -> None:
    rows = [row("ps_base", 10.0)]  # 0.1 s per token
    text = estimate_text(
        rows, {"ps_base": 1}, "v", 50, free_now=None, cores=2, snippets=3, lengths=[50, 100]
    )
    assert "about 45 s (from 1 earlier unit" in text and "scaled to these lengths" in text


def _seconds(plan: Plan, rows: list[dict[str, object]]) -> float:
    estimate = prior_estimate(rows, plan, victim="v", length=100, batches=plan.batches)
    assert estimate.seconds is not None
    return estimate.seconds


def test_divergence_is_sized_by_its_own_samples_option() -> None:
    # An earlier divergence unit: 4 samples answered in one batched call.
    rows = [row("divergence", 100.0, candidates=4, victim_calls=1)]
    four = planned_candidates(["divergence"], {"method_options": {"divergence": {"samples": 4}}})
    sixteen = planned_candidates(
        ["divergence"], {"method_options": {"divergence": {"samples": 16}}}
    )
    assert dict(sixteen) == {"divergence": 16} and sixteen.batches == {"divergence": [16]}
    # The samples are one batch, costed as the ETA costs a batch: 4× the samples, 4^0.2× the time.
    assert _seconds(sixteen, rows) / _seconds(four, rows) == pytest.approx(4**BATCH_EXPONENT)


@dataclass(frozen=True)
class CountOptions:
    count: int = option(2, help="candidates scored", low=1, high=64)


def test_a_registered_methods_declared_count_sizes_its_estimate() -> None:
    spec = registry.MethodSpec(
        name="toy_count",
        label="Toy count",
        run=lambda *a, **k: None,  # never run: only its declared cost is read
        roles=("victim",),
        rank=46,
        options_key="toy_count",
        options_class=CountOptions,
        candidates=lambda options: options.for_method("toy_count").count,
        rough_rate=0.5,
    )
    registry.register(spec)
    try:
        # Nothing measured yet: its declared rough rate, per batch of one per token (2 × 0.5 × 60).
        guess = estimate_text(
            [], planned_candidates(["toy_count"], {}), "v", 60, free_now=None, cores=2
        )
        assert "Rough guess for a 2-core CPU: about 60 s" in guess
        rows = [row("toy_count", 10.0)]
        two = planned_candidates(["toy_count"], {})
        six = planned_candidates(["toy_count"], {"method_options": {"toy_count": {"count": 6}}})
        assert dict(two) == {"toy_count": 2} and dict(six) == {"toy_count": 6}
        assert _seconds(six, rows) / _seconds(two, rows) == pytest.approx(3.0)  # 6 batches of 1
    finally:
        registry.unregister("toy_count")
