"""GCG toward the true suffix: white-box token search on the base model, then one answer.

Why not nanogcg (docs/method.md §7): 0.3.0 pins ``transformers<=4.47.1``, with transformers ≥ 5 pip
silently picks 0.2.3 whose prefix cache breaks (``'DynamicCache' object is not subscriptable``),
and it targets a fixed jailbreak string, not the true suffix. ``bench/gcg.py`` runs both side by
side; the search itself is in :mod:`memprobe_core.attacks.gcg_core`.

The search starts from the true prefix tokens and minimises the cross-entropy of the true suffix
on the base model. The decoded best prompt is then answered by the **base** model by default (the
paper evaluates "P-S-Base & GCG" on the base; that is why GCG's numbers repeat across victim rows
of its Table 1), or by the victim with ``gcg_answer_model="victim"`` (greedy,
``max_new_tokens = len(suffix)``), and scored like every other method;
``Dis = dis(true prefix, best prompt)``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.events import (
    CandidateScored,
    EventCallback,
    Finished,
    RoundFinished,
    RoundStarted,
    SearchStep,
    emit,
)
from memprobe_core.attacks.gcg_core import (  # noqa: F401  (re-exported: the search API)
    GCGSearch,
    GcgSearchConfig,
    SearchCounts,
    charge_search,
    gcg_search,
    round_trips,
    tokenizer_lead_ids,
)
from memprobe_core.attacks.manifest import build_manifest
from memprobe_core.attacks.model_set import MissingModelError, ModelSet, has_weights, require
from memprobe_core.attacks.options import AttackOptions, GCGOptions
from memprobe_core.attacks.registry import MethodSpec, register
from memprobe_core.attacks.result import AttackResult, build_result
from memprobe_core.attacks.scoring import make_candidate, resolve_alpha, score
from memprobe_core.attacks.victim import (
    VictimAnswer,
    answer_requests,
    generation_record,
    victim_decoding,
)
from memprobe_core.metrics import dis
from memprobe_core.models.base import Generator, TextTokenizer
from memprobe_core.snippets.split import SplitSnippet

logger = logging.getLogger(__name__)
METHOD = "gcg"


def _encode_for(tokenizer: Any, split: SplitSnippet, text: str, ids: Sequence[int]) -> list[int]:
    # The split's ids are the victim tokenizer's; reuse them only when the base shares it.
    name = getattr(tokenizer, "name_or_path", None)
    if name and name == split.tokenizer_name:
        return list(ids)
    return list(tokenizer.encode(text, add_special_tokens=False))


def _answerer(models: ModelSet, options: AttackOptions) -> Any:
    """The model that answers the found prompt: the base (paper) or the victim (option)."""
    return models.victim if options.gcg.answer_model == "victim" else models.base


def run_gcg(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
) -> AttackResult:
    """Run GCG toward the true suffix on the base model, then score the answer to the best prompt.

    Args:
        split: the snippet cut into prefix and suffix.
        models: ``base`` must be white-box (an ``hf`` backend exposing ``torch_model``); it
            answers the decoded best prompt unless ``options.gcg.answer_model == "victim"``.
        options: ``gcg_steps`` (paper: 30), ``gcg_top_k``, ``gcg_search_width``,
            ``gcg_batch_size``, ``gcg_answer_model``, ``seed``, scoring and α.
        on_event: a ``SearchStep`` per step, then round 1 (the best prompt answered and
            scored) and ``Finished``.
        cancel: checked between steps and candidate batches; the best prompt so far is still
            scored (one query) and the result has ``status="cancelled"``.

    Raises:
        MissingModelError: no base model, or one without weights and gradients.
    """
    base, tok = _white_box_base(models)
    alpha, alpha_source = resolve_alpha(split, models, options)
    meter = CostMeter()
    search = _search(base, tok, split, options, meter, on_event, cancel)
    best_prompt = tok.decode(search.best_ids, skip_special_tokens=True)
    answerer = _answerer(models, options)
    round_ = 1  # the search steps are not rounds: the one scored prompt is round 1
    emit(on_event, RoundStarted(round=round_, n=1))
    # The same budget and output window as every other method (`last` lets it write `length`).
    answer = answer_requests(meter, answerer, [best_prompt], split, options, role="victim")[0]
    sc = score(
        meter, [best_prompt], [answer.scored], split, answerer, options, alpha, windowed=True
    )[0]
    cand = make_candidate(
        round_,
        0,
        best_prompt,
        answer,
        sc,
        is_round_best=True,
        extra={**_search_record(search), "answer_model": options.gcg.answer_model},
    )
    emit(on_event, CandidateScored(round=round_, candidate=cand))
    emit(on_event, RoundFinished(round=round_, best=cand))
    manifest = build_manifest(
        METHOD,
        split,
        models,
        options,
        alpha,
        alpha_source,
        decoding={options.gcg.answer_model: victim_decoding(split, options).manifest()},
        extra=_manifest_extra(tok, answerer, search, split, options, answer),
    )
    result = build_result(
        METHOD,
        split,
        chosen=cand,
        trace=[cand],
        alpha=alpha,
        dis=dis(split.prefix, best_prompt),
        meter=meter,
        manifest=manifest,
        status="cancelled" if search.cancelled else "finished",
    )
    emit(on_event, Finished(result=result))
    return result


def _white_box_base(models: ModelSet) -> tuple[Generator, TextTokenizer]:
    """The base model and its tokenizer, checked to have weights and gradients."""
    base = require(models.base, "base", METHOD, "a white-box model for token gradients")
    tok = base.tokenizer
    if not has_weights(base) or tok is None:
        raise MissingModelError(
            f"GCG needs a white-box base model (weights and gradients); {base.model_id!r} "
            f"(backend {base.backend!r}) has none. Load the base with the 'hf' backend."
        )
    return base, tok


def _search(
    base: Generator,
    tok: TextTokenizer,
    split: SplitSnippet,
    options: AttackOptions,
    meter: CostMeter,
    on_event: EventCallback | None,
    cancel: threading.Event | None,
) -> GCGSearch:
    """The token search from the true prefix toward the suffix, one ``SearchStep`` per step."""
    steps = options.gcg.steps

    def on_step(step: int, loss: float, step_loss: float, ids: list[int]) -> None:
        best_prompt = tok.decode(ids, skip_special_tokens=True)
        event = SearchStep(
            step=step, steps=steps, loss=loss, step_loss=step_loss, best_prompt=best_prompt
        )
        emit(on_event, event)

    t0 = time.perf_counter()
    # The answerer gets the raw decoded text, so the search's context is the raw text too:
    # BOS before the prompt (cached), nothing after it.
    search = gcg_search(
        base.torch_model,  # type: ignore[attr-defined]  # checked by _white_box_base
        tok,
        _encode_for(tok, split, split.prefix, split.prefix_ids),
        _encode_for(tok, split, split.suffix, split.suffix_ids),
        _search_config(options, tok),
        lead_ids=tokenizer_lead_ids(tok),
        on_step=on_step,
        cancel=cancel,
    )
    charge_search(meter, search.counts, time.perf_counter() - t0)
    return search


def _search_config(options: AttackOptions, tok: TextTokenizer) -> GcgSearchConfig:
    """The search settings of ``options.gcg`` (the home of GCG's defaults), the run's seed and
    the tokenizer's special tokens (never proposed)."""
    gcg = options.gcg
    return GcgSearchConfig(
        steps=gcg.steps,
        top_k=gcg.top_k,
        search_width=gcg.search_width,
        batch_size=gcg.batch_size,
        seed=options.seed,
        not_allowed=list(getattr(tok, "all_special_ids", []) or []),
    )


def _search_record(search: GCGSearch) -> dict[str, Any]:
    """What the scored candidate keeps of the search (its loss curve, what was evaluated)."""
    return {
        "loss": search.best_loss,
        "initial_loss": search.initial_loss,
        "losses": search.losses,
        "step_losses": search.step_losses,
        "evaluated": search.evaluated,
        "dropped_not_round_trip": search.dropped,
    }


def _manifest_extra(
    tok: TextTokenizer,
    answerer: Generator,
    search: GCGSearch,
    split: SplitSnippet,
    options: AttackOptions,
    answer: VictimAnswer,
) -> dict[str, Any]:
    """GCG's part of the manifest: search settings, who answered, the generation record."""
    role = options.gcg.answer_model
    return {
        "gcg": {
            "steps": options.gcg.steps,
            "steps_done": len(search.losses),
            "top_k": options.gcg.top_k,
            "search_width": options.gcg.search_width,
            "batch_size": options.gcg.batch_size,
            "base_tokenizer": getattr(tok, "name_or_path", type(tok).__name__),
            "initial_prompt": "true prefix",
            "prefix_cache": True,
        },
        "answer_model": {"role": role, "model_id": answerer.model_id},
        "generation": generation_record(split, options, [answer]),
        "scored_model": role,
        "victim_format": "raw text",
    }


register(
    MethodSpec(
        name=METHOD,
        label="GCG",
        run=run_gcg,
        roles=("base", "victim"),
        rank=40,
        options_key="gcg",
        options_class=GCGOptions,
        white_box_roles=("base",),
        default_in_compare=False,
        summary="token-gradient search for a prompt on the white-box base model",
    )
)
