"""One round of prompts, answered and scored: the skeleton of a simple method.

A method that asks one model a fixed set of prompts (P-S-Base and P-S-Inst ask the true prefix;
a new method its own instruction) needs the same steps around its prompts: the round's events,
one batched call (greedy, or ``n`` samples per prompt with a sampling ``decoding``), Mem / LCS_P /
objective for each answer, the best by objective as the result, the manifest and the costs.
:func:`run_one_round` does them, so such a method is its prompts plus a
:class:`~memprobe_core.attacks.registry.MethodSpec` (docs/adding-a-method.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

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
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions
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
from memprobe_core.models.base import Decoding, Generator, Request
from memprobe_core.snippets.split import SplitSnippet


@dataclass(frozen=True)
class RoundPrompts:
    """What one round asks and how its result is recorded.

    Attributes:
        requests: what ``model`` is sent, one per candidate (a text, or chat messages).
        prompts: each request's prompt as text (stored with its candidate; LCS_P is measured
            on it): the request itself for a text request.
        answer_model: the role of the model that answers (``victim`` or ``base``).
        extras: each candidate's ``extra`` (e.g. its format), one per request or none (the
            ``n`` samples of a request share it, with their ``sample`` index added).
        manifest_extra: ``chosen candidate (or None) -> dict`` merged into the manifest after
            the generation record (e.g. which format won).
        dis: the result's Dis (``None``: the prompt does not paraphrase, e.g. the true prefix).
        figures: ``result -> dict`` of the method's own figures (``MethodSpec.figures``), put
            into ``result.verbatim`` before the ``finished`` event.
    """

    requests: Sequence[Request]
    prompts: Sequence[str]
    answer_model: str = "victim"
    extras: Sequence[dict[str, Any]] = ()
    manifest_extra: Callable[[Candidate | None], dict[str, Any]] | None = None
    dis: float | None = None
    figures: Callable[[AttackResult], dict[str, Any]] | None = None


def run_one_round(
    method: str,
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    model: Generator,
    asked: RoundPrompts,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
    decoding: Decoding | None = None,
) -> AttackResult:
    """Ask ``model`` every request of ``asked`` in one batched call, score each answer against
    the true suffix and return the best by objective (round 0 of the trace).

    ``decoding`` defaults to :func:`~memprobe_core.attacks.victim.victim_decoding` (greedy, one
    answer per request); a sampling one (``victim_decoding(split, options, temperature=1.0,
    n=k, seed=options.seed)``) makes ``k`` candidates of each request, all scored.

    Events: ``round_started``, one ``candidate_scored`` per answer, ``round_finished``,
    ``finished``. A ``cancel`` set part-way returns what was scored (status ``cancelled``).
    """
    if len(asked.requests) != len(asked.prompts):
        raise ValueError("give one prompt text per request")
    decoding = decoding or victim_decoding(split, options)
    alpha, alpha_source = resolve_alpha(split, models, options)
    meter = CostMeter()
    trace: list[Candidate] = []
    answers: list[VictimAnswer] = []
    status = "finished"
    emit(on_event, RoundStarted(round=0, n=len(asked.requests) * decoding.n))
    try:
        check_cancel(cancel)
        answers.extend(
            answer_requests(meter, model, asked.requests, split, options, decoding=decoding)
        )
        _score_answers(
            meter, model, split, options, alpha, asked, answers, trace, on_event, cancel, decoding.n
        )
    except Cancelled:
        status = "cancelled"
    chosen = best_of(trace)
    if chosen is not None:
        chosen.is_round_best = True
        emit(on_event, RoundFinished(round=0, best=chosen))
    extra: dict[str, Any] = {
        "generation": generation_record(split, options, answers),
        "scored_model": asked.answer_model,
    }
    if decoding.n > 1:  # greedy manifests stay as they were
        extra["samples_per_request"] = decoding.n
    if asked.manifest_extra is not None:
        extra.update(asked.manifest_extra(chosen))
    manifest = build_manifest(
        method,
        split,
        models,
        options,
        alpha,
        alpha_source,
        decoding={"model": decoding.manifest()},
        extra=extra,
        answer_model=asked.answer_model,
    )
    result = build_result(
        method,
        split,
        chosen=chosen,
        trace=trace,
        alpha=alpha,
        dis=asked.dis,
        meter=meter,
        manifest=manifest,
        status=status,
    )
    if asked.figures is not None:
        result.verbatim.update(asked.figures(result))
    emit(on_event, Finished(result=result))
    return result


def _score_answers(
    meter: CostMeter,
    model: Generator,
    split: SplitSnippet,
    options: AttackOptions,
    alpha: float,
    asked: RoundPrompts,
    answers: list[VictimAnswer],
    trace: list[Candidate],
    on_event: EventCallback | None,
    cancel: threading.Event | None,
    copies: int = 1,
) -> None:
    """Score the answers (windowed; ``copies`` per prompt) and append each candidate to
    ``trace`` as it comes, so a cancel part-way keeps the ones scored."""
    prompts = [p for p in asked.prompts for _ in range(copies)]
    scores = score(
        meter,
        prompts,
        [a.scored for a in answers],
        split,
        model,
        options,
        alpha,
        windowed=True,
    )
    for i, (prompt, answer, scored) in enumerate(zip(prompts, answers, scores)):
        check_cancel(cancel)
        extra = dict(asked.extras[i // copies]) if asked.extras else {}
        if copies > 1:
            extra["sample"] = i % copies
        cand = make_candidate(0, i, prompt, answer, scored, extra=extra)
        trace.append(cand)
        emit(on_event, CandidateScored(round=0, candidate=cand))
