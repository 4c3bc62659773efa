"""The extraction-risk bracket in words (memprobe_core.measuring.bracket; docs/method.md §14)."""

from __future__ import annotations

import math

import pytest

from memprobe_core.measuring.bracket import (
    bits_text,
    bracket_clauses,
    describe_bracket,
    samples_count,
    share_text,
)

FULL = {
    "pz_scheme": "top-k=40",
    "log10_p_z": -6.3,
    "near_verbatim_log10_lower": -4.49,
    "near_verbatim_edits": 5,
    "extraction_bits": 12.34,
    "extraction_window_tokens": 32,
}


def test_a_measured_unit_reads_lower_exact_and_upper_in_that_order() -> None:
    assert describe_bracket(FULL) == (
        "Extraction risk (top-k=40): at least 1 in 30903 samples writes it within 5 edits; "
        "exactly 1 in 2.0e+06 writes it verbatim; no decoding needs fewer than 2^12.3 tries to "
        "write its easiest 32-token window."
    )


def test_p_z_zero_is_said_as_never() -> None:
    record = {**FULL, "log10_p_z": None, "pz_outside_support": 2}
    assert bracket_clauses(record)[1] == "no sample writes it verbatim (p_z = 0)"


def test_p_z_one_and_a_certain_lower_bound_are_every_sample() -> None:
    record = {**FULL, "log10_p_z": 0.0, "near_verbatim_log10_lower": 0.0, "near_verbatim_edits": 1}
    near, exact, _ = bracket_clauses(record)
    assert near == "every sample writes it within 1 edit"
    assert exact == "every sample writes it verbatim (p_z = 1)"


def test_a_probability_near_one_is_a_share_that_never_reads_as_all() -> None:
    record = {**FULL, "log10_p_z": math.log10(0.99999), "near_verbatim_log10_lower": -0.2}
    near, exact, _ = bracket_clauses(record)
    assert exact == "over 99.9 % of samples write it verbatim"
    assert near == "at least 63.0 % of samples write it within 5 edits"  # 0.631 rounded down


def test_a_tiny_probability_past_float_range_is_a_power_of_ten() -> None:
    record = {**FULL, "log10_p_z": -412.2, "near_verbatim_log10_lower": -400.01}
    near, exact, _ = bracket_clauses(record)
    assert exact == "exactly 1 in 10^412 writes it verbatim"
    assert near == "at least 1 in 10^401 samples writes it within 5 edits"  # rounded up


def test_bits_zero_and_infinite() -> None:
    assert bracket_clauses({**FULL, "extraction_bits": 0.0})[2] == (
        "a single try of some decoding may write it (b = 0)"
    )
    # b = ∞ is stored as null when nothing says it was not measured (docs/method.md §21).
    assert bracket_clauses({**FULL, "extraction_bits": None})[2] == (
        "no decoding can write it (b = ∞)"
    )


def test_missing_keys_are_said_not_measured_with_the_reason_when_known() -> None:
    assert bracket_clauses({}) == [
        "near-verbatim lower bound not measured",
        "verbatim p_z not measured",
        "rank-based bound not measured",
    ]
    record = {
        "pz_scheme": "plain",
        "pz_not_measured": "out of memory",
        "extraction_bits": None,
        "extraction_not_measured": "the victim's server returns each token's log-prob",
        "near_verbatim_log10_lower": None,
        "near_verbatim_not_measured": "a black-box victim",
    }
    assert bracket_clauses(record) == [
        "near-verbatim lower bound not measured (a black-box victim)",
        "verbatim p_z not measured (out of memory)",
        "rank-based bound not measured (the victim's server returns each token's log-prob)",
    ]
    assert describe_bracket(None).startswith("Extraction risk: near-verbatim")


def test_a_lower_bound_of_zero_is_not_a_missing_measure() -> None:
    record = {"near_verbatim_log10_lower": None, "near_verbatim_edits": 3}
    assert bracket_clauses(record)[0] == (
        "no sample is certified to write it within 3 edits (lower bound 0)"
    )


@pytest.mark.parametrize(
    ("log10_count", "up", "shown"),
    [
        (math.log10(5), True, "5"),  # a whole count is not pushed up by float noise
        (math.log10(4.2), True, "5"),
        (math.log10(4.2), False, "4"),
        (math.log10(123_456), True, "1.3e+05"),
        (math.log10(123_456), False, "1.2e+05"),
        (math.log10(9.96e6), True, "1.0e+07"),  # the mantissa rolls over
        (math.log10(2e6), True, "2.0e+06"),
        (299.5, True, "3.2e+299"),
        (350.2, True, "10^351"),
    ],
)
def test_counts_round_on_the_safe_side(log10_count: float, up: bool, shown: str) -> None:
    assert samples_count(log10_count, up=up) == shown


@pytest.mark.parametrize(
    ("bits", "shown"), [(12.34, "12.3"), (12.0, "12"), (12.3, "12.3"), (0.05, "0"), (12.99, "12.9")]
)
def test_bits_round_down(bits: float, shown: str) -> None:
    assert bits_text(bits) == shown


def test_shares_round_down_for_a_bound_and_to_nearest_otherwise() -> None:
    assert share_text(0.4567, down=True) == "45.6 %"
    assert share_text(0.4567, down=False) == "45.7 %"
    assert share_text(0.9999, down=False) == "over 99.9 %"
