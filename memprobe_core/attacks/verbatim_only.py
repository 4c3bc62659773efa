"""Verbatim only: k-extractability and the greedy match length from one forward pass.

A unit of ``verbatim`` asks what P-S with the raw prefix asks — does greedy decoding of the
prefix give the suffix back? — without decoding: the prefix as the victim would be prompted with
it, then the suffix, go through the victim once, and the argmax before each suffix token is the
token greedy decoding writes there given the suffix so far (``hf_speculative.greedy_agreement``).
The leading run where they agree is exactly the run greedy decoding reproduces, so

- ``match_tokens`` — how many suffix tokens greedy decoding reproduces from the start,
- ``extractable`` — whether that reaches ``extract_k`` (k-extractability, Carlini et al. 2023),

are the numbers generation would give (docs/method.md §9; a test compares them with P-S
answers), at the cost of one scoring pass instead of one decode step per token (fed in chunks
that stop at the first disagreement). The longest verbatim span needs the whole greedy answer
and is not measured; neither is Mem.

An audit's executor calls :func:`prefetch` with its next units' pieces (``MethodSpec.prefetch``):
their matches are computed 16 snippets a batch, sorted by length, and the units read them.

``MethodSpec.extracts`` is ``False`` (no output is scored: no Mem, PII or paired gain) and
``MethodSpec.verbatim`` is ``True``: Table 1 shows its extraction rate. The membership signals
are measured beside it as for every unit, so ``--verbatim-only`` is an extraction-rate and
membership audit in forward passes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.events import EventCallback, Finished, emit
from memprobe_core.attacks.model_set import MissingModelError, ModelSet, has_weights
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.registry import MethodSpec, register
from memprobe_core.attacks.result import AttackResult
from memprobe_core.attacks.signals_only import unscored_result
from memprobe_core.models.measure_cache import MeasureCache, model_key, tokenizer_name
from memprobe_core.records import VerbatimRecord
from memprobe_core.snippets.split import SplitSnippet

METHOD = "verbatim"


# Greedy matches by (victim, prompt ids, suffix ids): filled by ``prefetch`` or by a unit.
_MATCHES = MeasureCache(size=4096)


def suffix_ids(split: SplitSnippet, victim: Any) -> list[int]:
    """The suffix as the victim's tokens: the split's own when the victim's tokenizer cut it,
    else the suffix text encoded by the victim's tokenizer."""
    tok = victim.tokenizer
    if split.tokenizer_name == tokenizer_name(tok):
        return list(split.suffix_ids)
    return list(tok.encode(split.suffix, add_special_tokens=False))


# Snippets of one teacher-forced batch (``prefetch``): sorted by length first, so a batch pads
# little; 16 rows of the embedded Gemma took 0.18 s a snippet against 0.40 s one at a time.
PREFETCH_BATCH = 16


def _rows(split: SplitSnippet, victim: Any) -> tuple[list[int], list[int]]:
    """(prompt ids, suffix ids): the prefix as the victim is prompted with it, the suffix."""
    return list(victim.prompt_ids(split.prefix)), suffix_ids(split, victim)


def _match_key(victim: Any, prompt: list[int], suffix: list[int]) -> tuple[Any, ...]:
    return (model_key(victim), tuple(prompt), tuple(suffix))


def _agreements(victim: Any, rows: list[tuple[list[int], list[int]]]) -> list[int]:
    import torch

    from memprobe_core.models.hf_speculative import greedy_agreement

    pad = victim.tokenizer.pad_token_id
    with torch.inference_mode():
        return greedy_agreement(
            victim.torch_model,
            [prompt for prompt, _ in rows],
            [suffix for _, suffix in rows],
            pad_id=int(pad) if pad is not None else 0,
            screen=getattr(victim, "screened_head", True),
        )


def greedy_match(split: SplitSnippet, victim: Any) -> tuple[int, int]:
    """``(matched, suffix tokens)``: how many leading suffix tokens greedy decoding of the raw
    prefix reproduces on ``victim`` (teacher forcing; what :func:`prefetch` computed, when it
    did)."""
    prompt, suffix = _rows(split, victim)
    if not suffix:
        return 0, 0
    key = _match_key(victim, prompt, suffix)
    cached = _MATCHES.get(key)
    if cached is not None:
        return int(cached["matched"]), len(suffix)
    (matched,) = _agreements(victim, [(prompt, suffix)])
    _MATCHES.put(key, {"matched": matched})
    return matched, len(suffix)


def prefetch(pieces: Sequence[SplitSnippet], models: ModelSet, options: AttackOptions) -> None:
    """The greedy match of every piece in batched teacher-forced passes (``MethodSpec.prefetch``),
    kept where :func:`greedy_match` looks first. The same numbers as one piece at a time: a
    row's positions see only its own tokens (tests compare batched with generation)."""
    victim = models.victim
    if not has_weights(victim):
        return  # each unit refuses it, naming the victim
    todo: dict[tuple[Any, ...], tuple[list[int], list[int]]] = {}
    for piece in pieces:
        prompt, suffix = _rows(piece, victim)
        key = _match_key(victim, prompt, suffix)
        if suffix and _MATCHES.get(key) is None:
            todo[key] = (prompt, suffix)
    keys = sorted(todo, key=lambda k: len(todo[k][0]) + len(todo[k][1]))
    for start in range(0, len(keys), PREFETCH_BATCH):
        batch = keys[start : start + PREFETCH_BATCH]
        for key, matched in zip(batch, _agreements(victim, [todo[k] for k in batch])):
            _MATCHES.put(key, {"matched": matched})


def clear_cache() -> None:
    """Forget every greedy match computed (tests, benchmarks)."""
    _MATCHES.clear()


def verbatim_record(matched: int, suffix_tokens: int, k: int) -> VerbatimRecord:
    """The ``verbatim`` dict of a teacher-forced unit (the span metrics: not measured)."""
    k_used = min(k, suffix_tokens)
    return {
        "extract_k": k_used,
        "extractable": k_used > 0 and matched >= k_used,
        "match_tokens": matched,
        "span_tokens": None,
        "span_chars": None,
        "teacher_forced": True,
    }


def run_verbatim_only(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
    **_: Any,
) -> AttackResult:
    """The teacher-forced verbatim metrics of ``split`` on the victim (``cancelled`` when
    ``cancel`` was set before it started).

    Raises:
        MissingModelError: the victim exposes no weights (an endpoint): a forward pass over a
            given text with every position's argmax needs them.
    """
    victim = models.victim
    cancelled = cancel is not None and cancel.is_set()
    if not cancelled and not has_weights(victim):
        raise MissingModelError(
            f"verbatim-only needs the victim's weights (one forward pass over prefix + suffix); "
            f"{victim.model_id!r} (backend {victim.backend!r}) has none. Use P-S-Base, which "
            "asks it to generate, or load the victim with the 'hf' backend."
        )
    meter = CostMeter()
    result = unscored_result(
        METHOD,
        split,
        models,
        options,
        meter,
        cancelled=cancelled,
        decoding={"victim": {"teacher_forced": True, "greedy": True}},
    )
    if not cancelled:
        started = time.perf_counter()
        matched, total = greedy_match(split, victim)
        # One forward pass of the victim, counted as one query that generated nothing.
        meter.charge("victim", queries=1, tokens=0, seconds=time.perf_counter() - started)
        result.costs = meter.finish()
        result.verbatim = verbatim_record(matched, total, options.measure.extract_k)
    emit(on_event, Finished(result=result))
    return result


register(
    MethodSpec(
        name=METHOD,
        label="Verbatim only",
        run=run_verbatim_only,
        roles=("victim",),
        white_box_roles=("victim",),
        rank=85,
        default_in_compare=False,
        extracts=False,
        verbatim=True,
        prefetch=prefetch,
        summary="no generation: k-extractability and the greedy match length from one "
        "teacher-forced pass of the victim, beside the membership signals",
    )
)
