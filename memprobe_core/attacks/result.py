"""The one result type every extraction method returns, its trace rows, and how it is built from
the chosen candidate (the selection rules' Mem values too)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from memprobe_core.attacks.costs import CostMeter, Costs
from memprobe_core.pii import pii_report
from memprobe_core.records import MembershipRecord, VerbatimRecord
from memprobe_core.snippets.split import SplitSnippet

# Candidate flags, one meaning each. A flagged candidate stays in the trace.
EMPTY = "empty"  # the attacker returned nothing usable: never sent to the victim, never chosen
DUPLICATE = "duplicate"  # the same prompt as an earlier candidate of the run
TRUNCATED = "truncated"  # the attacker hit max_prompt_tokens while writing the prompt
CLIPPED = "clipped"  # the store cut its prompt or output to MAX_STORED_TEXT (scores are whole)
CANDIDATE_FLAGS: tuple[str, ...] = (EMPTY, DUPLICATE, TRUNCATED, CLIPPED)
# What each flag means, in words for tables and tooltips.
CANDIDATE_FLAG_MEANINGS: dict[str, str] = {
    EMPTY: "the attacker returned nothing usable: never sent to the victim, never chosen",
    DUPLICATE: "the same prompt as an earlier candidate of the run",
    TRUNCATED: "the attacker hit its prompt-length cap (max_prompt_tokens) while writing the "
    "prompt; it was kept and scored like the others",
    CLIPPED: "the store cut the stored prompt or output to save space; the scores are of the "
    "whole text",
}


@dataclass
class Candidate:
    """One scored prompt of a method's search (round 0 is the initial prompt).

    ``flags`` marks candidates kept in the trace but worth a look (``CANDIDATE_FLAGS``):
    ``"empty"`` (the attacker returned nothing usable), ``"duplicate"`` (same prompt as an
    earlier candidate), ``"truncated"`` (the attacker hit ``max_prompt_tokens`` while writing
    it), ``"clipped"`` (set by the store: it cut the stored prompt or output).
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
    verbatim: VerbatimRecord = field(default_factory=dict)
    membership: MembershipRecord = field(default_factory=dict)

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


def reference_mem(trace: Sequence[Candidate]) -> float | None:
    """The reference code's ``best_rougeL``: ``max(Mem(p_init), Mem(p*_rounds))``.

    ``p*_rounds`` is the argmax of the objective over the refinement rounds (round ≥ 1): the
    reference picks its optimized prompt among the iterations' best, then compares its Mem with
    the initial prompt's (run.py: ``max(rougel_init, opt_rougeL)``). ``None`` without p_init.
    """
    init = [c for c in trace if c.round == 0 and EMPTY not in c.flags]
    if not init:
        return None
    best_round = best_of([c for c in trace if c.round >= 1])
    return max(init[0].mem, best_round.mem) if best_round is not None else init[0].mem


def best_mem(trace: Sequence[Candidate]) -> float | None:
    """The highest Mem among the trace's scored (non-empty) candidates."""
    mems = [c.mem for c in trace if EMPTY not in c.flags]
    return max(mems) if mems else None


def best_of(candidates: Sequence[Candidate]) -> Candidate | None:
    """Highest objective among eligible candidates (not ``empty``); the first wins ties."""
    best = None
    for cand in candidates:
        if EMPTY in cand.flags:
            continue
        if best is None or cand.objective > best.objective:
            best = cand
    return best


def build_result(
    method: str,
    split: SplitSnippet,
    *,
    chosen: Candidate | None,
    trace: list[Candidate],
    alpha: float,
    dis: float | None,
    meter: CostMeter,
    manifest: dict[str, Any],
    status: str = "finished",
    mem_init: float | None = None,
    mem_reference: float | None = None,
) -> AttackResult:
    """An AttackResult from the chosen candidate (``None``: cancelled before anything was scored).

    ``mem_best`` is filled from the trace; ``mem_init`` / ``mem_reference`` only by methods with
    an initial prompt of their own. PII is counted in the scored window of the output.
    """
    output = chosen.output if chosen else ""
    scored = chosen.extra.get("scored_output", output) if chosen else ""
    return AttackResult(
        method=method,
        snippet_id=split.snippet.id,
        domain=split.snippet.domain,
        length=split.length,
        prompt=chosen.prompt if chosen else "",
        output=output,
        mem=chosen.mem if chosen else 0.0,
        lcs_p=chosen.lcs_p if chosen else 0.0,
        objective=chosen.objective if chosen else 0.0,
        alpha=alpha,
        dis=dis,
        trace=trace,
        pii=pii_report(split.suffix, scored).to_dict(),
        costs=meter.finish(),
        manifest=manifest,
        status=status,
        mem_init=mem_init,
        mem_best=best_mem(trace),
        mem_reference=mem_reference,
    )
