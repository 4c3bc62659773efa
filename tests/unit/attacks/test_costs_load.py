"""A method's costs record the generation calls to the victim (its batches) and the machine's
load over the method, which the estimate before a run corrects for (memprobe_core.runs.eta)."""

from __future__ import annotations

from memprobe_core.attacks.costs import CostMeter
from memprobe_core.machine_load import LoadSampler
from memprobe_core.models.base import Decoding
from tests.helpers.scripted_models import parrot


def test_the_meter_records_the_load_other_processes_put_on_the_machine_meanwhile() -> None:
    clock = iter([0.0, 10.0])
    busy = iter([100.0, 125.0])  # the machine: 25 busy core-seconds over 10 s
    own = iter([1.0, 11.0])  # this process: 10 of them
    sampler = LoadSampler(
        clock=lambda: next(clock),
        system_busy=lambda: next(busy),
        own_cpu=lambda: next(own),
        cores=lambda: 4,
    )
    costs = CostMeter(load=sampler).finish()
    assert costs.others_busy_cores == 1.5  # (25 − 10) / 10 s: other processes kept 1.5 busy
    assert costs.cores >= 1


def test_a_round_answered_in_one_call_counts_as_one_victim_batch() -> None:
    meter = CostMeter()
    victim = parrot("victim", "some words")
    meter.generate("victim", victim, ["a", "b", "c", "d"], Decoding(max_new_tokens=4))
    meter.generate("attacker", victim, ["e"], Decoding(max_new_tokens=4))
    costs = meter.finish()
    assert costs.victim_calls == 1 and costs.victim_queries == 4
