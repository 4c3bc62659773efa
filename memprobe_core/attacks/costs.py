"""What a method spends: queries, generated tokens and seconds, per role.

:class:`CostMeter` charges each call from its own completions and clock (not per model), so one
model object playing two roles (victim and attacker) is still charged to the right role."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from memprobe_core.machine_load import LoadSampler, cpu_cores
from memprobe_core.models.base import Completion, Decoding, Generator, Request


@dataclass
class Costs:
    """What a method spent: queries, generated tokens and seconds (wall and per part).

    The ``search_*`` counters are GCG's white-box passes on the base model: forward calls,
    backward (gradient) passes, sequences and token positions run forward (a cached prefix
    counts once); ``search_seconds`` is the whole search. ``measure_seconds``: the verbatim
    metrics and membership signals measured after the method (not part of ``wall_seconds``).
    ``victim_calls``: generation calls to the victim (a round's candidates are one call, one
    batch); ``others_busy_cores`` / ``cores``: the cores other processes kept busy over the
    method, of those this process may use (``memprobe_core.machine_load``; ``None`` / 0 where
    not measured), so an estimate from this unit can be corrected for the load it ran under.
    """

    victim_queries: int = 0
    attacker_queries: int = 0
    generated_tokens: int = 0
    wall_seconds: float = 0.0
    victim_seconds: float = 0.0
    attacker_seconds: float = 0.0
    scoring_seconds: float = 0.0
    search_seconds: float = 0.0
    search_forward_passes: int = 0
    search_backward_passes: int = 0
    search_sequences: int = 0
    search_tokens: int = 0
    measure_seconds: float = 0.0
    victim_calls: int = 0
    others_busy_cores: float | None = None
    cores: int = 0

    @classmethod
    def measured_on_the_machine(cls) -> frozenset[str]:
        """The fields a clock or the machine's load decides (seconds, others' busy cores): two
        runs of the same units, or a run and its resume, differ in these and only these."""
        return frozenset(
            f.name
            for f in fields(cls)
            if f.name.endswith("_seconds") or f.name == "others_busy_cores"
        )


@dataclass
class CostMeter:
    """Counts queries, tokens and seconds per role over one method run.

    Attributes:
        started: ``time.perf_counter()`` at creation (wall seconds are measured from it).
        costs: the running counters (``Costs``), filled as calls are made.
    """

    started: float = field(default_factory=time.perf_counter)
    costs: Costs = field(default_factory=Costs)
    load: LoadSampler = field(default_factory=LoadSampler, repr=False)

    def __post_init__(self) -> None:
        self.load.sample()  # the start of the window finish() measures the machine's load over

    def generate(
        self,
        role: str,
        model: Generator,
        requests: Sequence[Request],
        decoding: Decoding,
        *,
        references: Sequence[str] | None = None,
    ) -> list[list[Completion]]:
        """Call ``model.generate`` and charge what it spent to ``role`` (victim or attacker);
        ``references`` (the true suffix per request) let a backend draft greedy tokens.

        The charge is computed from this call's own completions and clock, never from the
        model's running counters: a model is shared (cached once per process), so another job
        generating on it at the same time would otherwise leak its work into this run's costs.
        """
        t0 = time.perf_counter()
        out = model.generate(list(requests), **decoding.kwargs(), references=references)
        seconds = time.perf_counter() - t0
        sequences = [c for row in out for c in row]
        if role == "victim":
            self.costs.victim_calls += 1
        self.charge(
            role,
            queries=len(sequences),
            tokens=sum(c.num_tokens for c in sequences),
            seconds=seconds,
        )
        return out

    def charge(self, role: str, *, queries: int, tokens: int, seconds: float) -> None:
        """Add a call made outside ``Generator.generate`` (e.g. a white-box forward pass)."""
        c = self.costs
        c.generated_tokens += tokens
        if role == "victim":
            c.victim_queries += queries
            c.victim_seconds += seconds
        elif role == "attacker":
            c.attacker_queries += queries
            c.attacker_seconds += seconds
        else:
            raise ValueError(f"role {role!r} is unknown; use 'victim' or 'attacker'")

    def add_seconds(self, part: str, seconds: float) -> None:
        """Add seconds to ``scoring`` or ``search``."""
        setattr(self.costs, f"{part}_seconds", getattr(self.costs, f"{part}_seconds") + seconds)

    def finish(self) -> Costs:
        """The counters with the wall time and the machine's load over the method filled in."""
        self.costs.wall_seconds = time.perf_counter() - self.started
        busy = self.load.sample()
        if busy is not None:
            self.costs.others_busy_cores = round(busy, 3)
            self.costs.cores = cpu_cores()
        return self.costs
