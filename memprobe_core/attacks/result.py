"""The one result type every extraction method returns, its trace rows, costs and events."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class Candidate:
    """One scored prompt of a method's search (round 0 is the initial prompt).

    ``flags`` marks candidates kept in the trace but worth a look: ``"empty"`` (the attacker
    returned nothing usable), ``"duplicate"`` (same prompt as an earlier candidate),
    ``"truncated"`` (the attacker hit ``max_prompt_tokens`` while writing it).
    """

    round: int
    index: int
    prompt: str
    output: str
    mem: float
    lcs_p: float
    objective: float
    flags: list[str] = field(default_factory=list)
    is_round_best: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Costs:
    """What a method spent: queries, generated tokens and seconds (wall and per part).

    The ``search_*`` counters are GCG's white-box passes on the base model: forward calls,
    backward (gradient) passes, sequences and token positions run forward (a cached prefix
    counts once); ``search_seconds`` is the whole search. ``measure_seconds``: the verbatim
    metrics and membership signals measured after the method (not part of ``wall_seconds``).
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


@dataclass
class AttackResult:
    """What any method found for one (snippet, length).

    Attributes:
        method: a registered method name (:mod:`memprobe_core.attacks.registry`).
        snippet_id / domain / length: what was probed.
        prompt / output: the chosen prompt and the victim's output for it.
        mem / lcs_p / objective: scores of the chosen prompt (see ``memprobe_core.metrics``).
        dis: normalized Levenshtein distance between the initial and the chosen prompt; ``None``
            for methods with no initial prompt of their own.
        alpha: α used in the objective.
        trace: every scored candidate, in scoring order.
        pii: ``memprobe_core.pii.pii_report(suffix, output).to_dict()``.
        costs: counters; manifest: models, decoding, scoring options, seed, versions.
        status: ``"finished"`` or ``"cancelled"`` (best so far returned).
        mem_init: Mem of the initial prompt (interactive method; ``None`` otherwise).
        mem_best: the highest Mem in the trace (``--select max_mem``).
        mem_reference: the reference code's ``best_rougeL`` = max(Mem_init, Mem of the rounds'
            argmax O) (interactive method; ``--select reference``).
        verbatim: verbatim-extraction metrics of ``output`` against the true suffix
            (:func:`memprobe_core.membership.verbatim.verbatim_metrics`); ``{}`` when not measured.
        membership: the snippet's membership signals on the victim
            (:func:`memprobe_core.membership.signals.compute_signals`); ``{}`` when not measured
            (black-box victim, or switched off).
    """

    method: str
    snippet_id: str
    domain: str
    length: int
    prompt: str
    output: str
    mem: float
    lcs_p: float
    objective: float
    alpha: float
    dis: float | None = None
    trace: list[Candidate] = field(default_factory=list)
    pii: dict[str, Any] = field(default_factory=dict)
    costs: Costs = field(default_factory=Costs)
    manifest: dict[str, Any] = field(default_factory=dict)
    status: str = "finished"
    mem_init: float | None = None
    mem_best: float | None = None
    mem_reference: float | None = None
    verbatim: dict[str, Any] = field(default_factory=dict)
    membership: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttackResult:
        data = dict(data)
        # Results stored before these fields existed lack them (the defaults are None).
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        data["trace"] = [Candidate(**c) for c in data.get("trace", [])]
        data["costs"] = Costs(**data.get("costs", {}))
        return cls(**data)


class Cancelled(Exception):
    """Raised inside a method when its cancel flag is set (caught by the method itself)."""


def check_cancel(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled()
