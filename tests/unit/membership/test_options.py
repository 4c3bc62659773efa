"""The one signal list, measurement options and how a result's signals are shown."""

from __future__ import annotations

import pytest

from memprobe_core.attacks.options import AttackOptions
from memprobe_core.errors import UsageError
from memprobe_core.membership import SIGNALS, MeasureOptions
from memprobe_core.membership.options import signals_frame


def test_signal_names_and_columns_are_unique():
    assert len({s.name for s in SIGNALS}) == len(SIGNALS)
    assert all(s.column == f"signal_{s.name}" for s in SIGNALS)


@pytest.mark.parametrize("bad", [{"min_k_percent": 0}, {"min_k_percent": 101}, {"extract_k": 0}])
def test_out_of_range_measure_options_are_refused(bad):
    with pytest.raises(UsageError, match=next(iter(bad))):
        MeasureOptions(**bad)


def test_measure_options_round_trip_through_a_stored_config():
    options = AttackOptions(measure=MeasureOptions(signals=False, min_k_percent=10, extract_k=7))
    back = AttackOptions.from_dict(options.to_dict())
    assert back.measure == options.measure
    # A config stored before the measure options existed gets the defaults.
    legacy = options.to_dict()
    del legacy["measure"]
    assert AttackOptions.from_dict(legacy).measure == MeasureOptions()


def test_signals_frame_shows_measured_signals_in_the_list_order_with_their_direction():
    frame = signals_frame({"min_k": -3.5, "loss": 2.0, "tokens": 200, "min_k_percent": 20})
    assert list(frame["signal"]) == ["Loss", "Min-K%"]
    assert list(frame["member if"]) == ["lower", "higher"]
    assert signals_frame({}).empty and signals_frame(None).empty


def test_signals_frame_shows_a_recorded_failure():
    frame = signals_frame({"error": "OutOfMemoryError: too long"})
    assert frame.iloc[0]["what"] == "OutOfMemoryError: too long"
