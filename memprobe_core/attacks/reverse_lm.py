"""Reverse-LM: a causal LM trained on reversed token order writes the prefix for the suffix.

The reverse model reads the suffix backwards and continues it, i.e. it writes the text that comes
*before* the suffix, last token first (Pfau et al. 2023; hub id ``afterless/reverse-pythia-160m``).
Steps: tokenize the suffix with the **reverse model's** tokenizer (the one it was trained with),
flip the ids, generate greedily, flip the new ids back, decode → the prompt; the victim continues
it (greedy, ``max_new_tokens = len(suffix)``) and the output is scored like every other method.
``Dis = dis(true prefix, generated prefix)``.

Generation works on token ids, so it runs on the reverse model's torch module directly (a text
request would re-tokenize the flipped ids into different tokens): the reverse model must be an
``hf``-backend Generator exposing ``torch_model`` and ``tokenizer``.
"""

from __future__ import annotations

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
    emit,
)
from memprobe_core.attacks.manifest import build_manifest
from memprobe_core.attacks.model_set import MissingModelError, ModelSet, require
from memprobe_core.attacks.options import AttackOptions, ReverseOptions
from memprobe_core.attacks.registry import MethodSpec, register
from memprobe_core.attacks.result import (
    AttackResult,
    Cancelled,
    Candidate,
    build_result,
    check_cancel,
)
from memprobe_core.attacks.scoring import make_candidate, resolve_alpha, score
from memprobe_core.attacks.victim import (
    VictimAnswer,
    answer_victim,
    generation_record,
    victim_decoding,
)
from memprobe_core.metrics import dis
from memprobe_core.models.base import Decoding, Generator
from memprobe_core.snippets.split import SplitSnippet

METHOD = "reverse_lm"
DEFAULT_REVERSE_MODEL = "afterless/reverse-pythia-160m"


def flip(ids: Sequence[int]) -> list[int]:
    """Reverse a token id sequence (its own inverse: ``flip(flip(x)) == x``)."""
    return list(ids)[::-1]


def propose_prefix(reverse: Generator, suffix: str, max_new_tokens: int) -> tuple[str, list[int]]:
    """Let the reverse model write the text before ``suffix``.

    Args:
        reverse: a white-box Generator (``torch_model`` and ``tokenizer``) trained on reversed text.
        suffix: the true suffix (tokenized here with the reverse model's tokenizer).
        max_new_tokens: prefix tokens to write.

    Returns:
        ``(prefix_text, prefix_ids)`` in normal (forward) order, EOS/pad tokens removed.

    Raises:
        MissingModelError: the generator exposes no torch model or tokenizer.
    """
    import torch

    model = getattr(reverse, "torch_model", None)
    tok = reverse.tokenizer
    if model is None or tok is None:
        raise MissingModelError(
            f"Reverse-LM needs the reverse model's weights and tokenizer; {reverse.model_id!r} "
            f"(backend {reverse.backend!r}) has none. Load it with the 'hf' backend "
            f"(default hub id {DEFAULT_REVERSE_MODEL!r})."
        )
    suffix_ids = list(tok.encode(suffix, add_special_tokens=False))
    if not suffix_ids:
        raise ValueError("the suffix has no tokens under the reverse model's tokenizer")
    device = next(model.parameters()).device
    inp = torch.tensor([flip(suffix_ids)], dtype=torch.long, device=device)  # (1, Ls)
    stop = [
        i
        for i in (getattr(tok, "eos_token_id", None), getattr(tok, "pad_token_id", None))
        if i is not None
    ]
    with torch.no_grad():
        out = model.generate(
            input_ids=inp,
            attention_mask=torch.ones_like(inp),
            max_new_tokens=max_new_tokens,
            min_new_tokens=1,
            do_sample=False,
            pad_token_id=stop[-1] if stop else None,
        )  # (1, Ls + new)
    new = [i for i in out[0, inp.shape[1] :].tolist()]
    # Everything after the first stop token is padding; the model wrote "start of text" there.
    for k, i in enumerate(new):
        if i in stop:
            new = new[:k]
            break
    prefix_ids = flip(new)
    return tok.decode(prefix_ids, skip_special_tokens=True), prefix_ids


def run_reverse_lm(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
) -> AttackResult:
    """Run Reverse-LM on one split.

    Args:
        split: the snippet cut into prefix and suffix.
        models: ``reverse`` (a reverse LM on the hf backend) and ``victim``.
        options: ``reverse_max_new_tokens`` (default: the prefix length), scoring and α.
        on_event: ``round_started``, ``candidate_scored``, ``round_finished``, ``finished``.
        cancel: checked before each of the two model calls.

    Raises:
        MissingModelError: no reverse model, or one without weights.
    """
    reverse = require(models.reverse, "reverse", METHOD, f"e.g. {DEFAULT_REVERSE_MODEL}")
    alpha, alpha_source = resolve_alpha(split, models, options)
    meter = CostMeter()
    n_new = options.reverse.max_new_tokens or len(split.prefix_ids)
    trace: list[Candidate] = []
    answers: list[VictimAnswer] = []
    status = "finished"
    emit(on_event, RoundStarted(round=0, n=1))
    try:
        _propose_and_score(
            reverse, meter, split, models, options, alpha, n_new, trace, answers, on_event, cancel
        )
    except Cancelled:
        status = "cancelled"
    chosen = trace[0] if trace else None
    tok: Any = reverse.tokenizer
    manifest = build_manifest(
        METHOD,
        split,
        models,
        options,
        alpha,
        alpha_source,
        decoding={
            "reverse": Decoding(max_new_tokens=n_new).manifest(),
            "victim": victim_decoding(split, options).manifest(),
        },
        extra={
            "generation": generation_record(split, options, answers),
            "reverse_tokenizer": getattr(tok, "name_or_path", type(tok).__name__),
            "victim_format": "raw text",
        },
    )
    result = build_result(
        METHOD,
        split,
        chosen=chosen,
        trace=trace,
        alpha=alpha,
        dis=dis(split.prefix, chosen.prompt) if chosen else None,
        meter=meter,
        manifest=manifest,
        status=status,
    )
    emit(on_event, Finished(result=result))
    return result


def _propose_and_score(
    reverse: Generator,
    meter: CostMeter,
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    alpha: float,
    n_new: int,
    trace: list[Candidate],
    answers: list[VictimAnswer],
    on_event: EventCallback | None,
    cancel: threading.Event | None,
) -> None:
    """The reverse LM writes a prefix for the suffix; the victim answers it; it is scored.

    The answer and the candidate are appended to ``answers`` and ``trace`` as they come (a
    cancel between the two model calls keeps what was done).
    """
    check_cancel(cancel)
    t0 = time.perf_counter()
    prompt, prompt_ids = propose_prefix(reverse, split.suffix, n_new)
    # The reverse model plays the attacker's part: it proposes the prompt.
    meter.charge("attacker", queries=1, tokens=len(prompt_ids), seconds=time.perf_counter() - t0)
    check_cancel(cancel)
    answers.extend(answer_victim(meter, models.victim, [prompt], split, options, as_chat=False))
    sc = score(
        meter, [prompt], [answers[0].scored], split, models.victim, options, alpha, windowed=True
    )[0]
    cand = make_candidate(
        0, 0, prompt, answers[0], sc, is_round_best=True, extra={"prefix_tokens": len(prompt_ids)}
    )
    trace.append(cand)
    emit(on_event, CandidateScored(round=0, candidate=cand))
    emit(on_event, RoundFinished(round=0, best=cand))


register(
    MethodSpec(
        name=METHOD,
        label="Reverse-LM",
        run=run_reverse_lm,
        roles=("reverse", "victim"),
        white_box_roles=("reverse",),  # its token ids are flipped: weights and a tokenizer
        rank=30,
        options_key="reverse",
        options_class=ReverseOptions,
        summary="a reverse LM writes a prefix for the true suffix; the victim answers it",
    )
)
