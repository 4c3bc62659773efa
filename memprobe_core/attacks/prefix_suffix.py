"""P-S-Base and P-S-Inst: the true prefix as the prompt, greedy, ``max_new_tokens = len(suffix)``
(``length`` with the ``last`` output window, whose last ``len(suffix)`` tokens are scored).

P-S-Base asks the base model; P-S-Inst the (instruction-tuned) victim. An instruct victim with a
chat template gets the prefix twice in one batched call when ``options.ps.chat_template``: raw
(as a base model would see it) and as a user message inside its chat template. Both rows stay in
the trace (``extra["format"]``); the better by objective is the result, and the manifest records
which (``ps_format``).
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.events import (
    CandidateScored,
    EventCallback,
    Finished,
    RoundFinished,
    RoundStarted,
    emit,
)
from memprobe_core.attacks.manifest import build_manifest
from memprobe_core.attacks.model_set import ModelSet, require
from memprobe_core.attacks.options import AttackOptions, PrefixSuffixOptions
from memprobe_core.attacks.registry import MethodSpec, register
from memprobe_core.attacks.result import (
    AttackResult,
    Cancelled,
    Candidate,
    best_of,
    build_result,
    check_cancel,
)
from memprobe_core.attacks.scoring import make_candidate, resolve_alpha, score
from memprobe_core.attacks.victim import (
    VictimAnswer,
    answer_requests,
    generation_record,
    victim_decoding,
)
from memprobe_core.models.base import Generator, Request
from memprobe_core.snippets.split import SplitSnippet


def run_prefix_suffix(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    variant: Literal["base", "inst"] = "base",
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
) -> AttackResult:
    """Run P-S-Base (``variant="base"``) or P-S-Inst (``variant="inst"``) on one split.

    Args:
        split: the snippet cut into prefix and suffix (by the victim's tokenizer).
        models: ``base`` for P-S-Base, ``victim`` for P-S-Inst.
        options: scoring, α and ``ps_chat_template``.
        variant: ``"base"`` or ``"inst"``.
        on_event: receives ``round_started``, ``candidate_scored``, ``round_finished``, ``finished``.
        cancel: when set, the run stops before the next query and returns what it has.

    Returns:
        An AttackResult with ``dis=None`` (the prompt is the true prefix by construction).

    Raises:
        ValueError: an unknown variant; MissingModelError: no base model for P-S-Base.
    """
    if variant not in ("base", "inst"):
        raise ValueError(f"variant {variant!r} is unknown; use 'base' or 'inst'")
    method = f"ps_{variant}"
    model = (
        require(models.base, "base", method, "the victim's pre-instruction-tuning parent")
        if variant == "base"
        else models.victim
    )
    alpha, alpha_source = resolve_alpha(split, models, options)
    meter = CostMeter()
    formats = ["raw"]
    if variant == "inst" and options.ps.chat_template and model.has_chat_template:
        formats.append("chat")
    trace: list[Candidate] = []
    answers: list[VictimAnswer] = []
    status = "finished"
    emit(on_event, RoundStarted(round=0, n=len(formats)))
    try:
        _ask_and_score(
            meter, model, formats, split, options, alpha, trace, answers, on_event, cancel
        )
    except Cancelled:
        status = "cancelled"
    chosen = best_of(trace)
    if chosen is not None:
        chosen.is_round_best = True
        emit(on_event, RoundFinished(round=0, best=chosen))
    manifest = build_manifest(
        method,
        split,
        models,
        options,
        alpha,
        alpha_source,
        decoding={"model": victim_decoding(split, options).manifest()},
        extra={
            "generation": generation_record(split, options, answers),
            "scored_model": "base" if variant == "base" else "victim",
            "ps_formats": formats,
            "ps_format": chosen.extra["format"] if chosen else None,
        },
        answer_model="base" if variant == "base" else "victim",
    )
    result = build_result(
        method,
        split,
        chosen=chosen,
        trace=trace,
        alpha=alpha,
        dis=None,
        meter=meter,
        manifest=manifest,
        status=status,
    )
    emit(on_event, Finished(result=result))
    return result


def _ask_and_score(
    meter: CostMeter,
    model: Generator,
    formats: list[str],
    split: SplitSnippet,
    options: AttackOptions,
    alpha: float,
    trace: list[Candidate],
    answers: list[VictimAnswer],
    on_event: EventCallback | None,
    cancel: threading.Event | None,
) -> None:
    """The true prefix in each format, answered in one batched call and scored.

    The answers and each scored candidate are appended to ``answers`` and ``trace`` as they
    come (so a cancel part-way keeps them) and every candidate is emitted.
    """
    check_cancel(cancel)
    requests: list[Request] = [
        split.prefix if fmt == "raw" else [{"role": "user", "content": split.prefix}]
        for fmt in formats
    ]
    answers.extend(answer_requests(meter, model, requests, split, options))
    scores = score(
        meter,
        [split.prefix] * len(formats),
        [a.scored for a in answers],
        split,
        model,
        options,
        alpha,
        windowed=True,
    )
    for i, (fmt, out, sc) in enumerate(zip(formats, answers, scores)):
        check_cancel(cancel)
        cand = make_candidate(0, i, split.prefix, out, sc, extra={"format": fmt})
        trace.append(cand)
        emit(on_event, CandidateScored(round=0, candidate=cand))


def run_ps_base(
    split: SplitSnippet, models: ModelSet, options: AttackOptions, **kw: Any
) -> AttackResult:
    """P-S-Base: :func:`run_prefix_suffix` on the base model."""
    return run_prefix_suffix(split, models, options, variant="base", **kw)


def run_ps_inst(
    split: SplitSnippet, models: ModelSet, options: AttackOptions, **kw: Any
) -> AttackResult:
    """P-S-Inst: :func:`run_prefix_suffix` on the instruction-tuned victim."""
    return run_prefix_suffix(split, models, options, variant="inst", **kw)


register(
    MethodSpec(
        name="ps_base",
        label="P-S-Base",
        run=run_ps_base,
        roles=("base",),
        rank=10,
        options_key="ps",
        options_class=PrefixSuffixOptions,
        default_in_audit=True,
        baseline_rank=2,
        summary="the true prefix as the prompt, greedy, on the base model",
    )
)
register(
    MethodSpec(
        name="ps_inst",
        label="P-S-Inst",
        run=run_ps_inst,
        roles=("victim",),
        rank=20,
        options_key="ps",
        options_class=PrefixSuffixOptions,
        default_in_audit=True,
        baseline_rank=1,
        summary="the true prefix as the prompt, greedy, on the instruction-tuned victim",
    )
)
