"""GCG toward the true suffix: white-box token search on the base model (our own implementation).

Why not nanogcg (METHOD.md §7): 0.3.0 pins ``transformers<=4.47.1``, with transformers ≥ 5 pip
silently picks 0.2.3 whose prefix cache breaks (``'DynamicCache' object is not subscriptable``),
and it targets a fixed jailbreak string, not the true suffix.

Search (Zou et al. 2023, greedy coordinate gradient), starting from the true prefix tokens:

1. loss = mean cross-entropy of the true suffix ids given the prompt ids;
2. gradient of the loss w.r.t. a one-hot encoding of the prompt → for each position the top-k
   tokens that most decrease the linearised loss;
3. ``search_width`` candidates, each changing one random position to one of its top-k tokens;
   candidates whose decode → re-encode does not give the same ids are dropped (the victim only
   ever sees the decoded text, so a prompt that does not round-trip is not the one we scored);
4. exact losses of the candidates in batches; the best ever is kept, so the reported loss never
   increases.

The decoded best prompt then goes to the victim (greedy, ``max_new_tokens = len(suffix)``) and is
scored like every other method; ``Dis = dis(true prefix, best prompt)``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memprobe_core.attacks.common import AttackOptions, ModelSet
from memprobe_core.attacks.events import (
    CandidateScored,
    EventCallback,
    Finished,
    RoundFinished,
    RoundStarted,
    SearchStep,
    emit,
)
from memprobe_core.attacks.result import AttackResult, Cancelled, check_cancel
from memprobe_core.attacks.scoring import (
    VICTIM_DECODING,
    CostMeter,
    MissingModelError,
    ask_victim,
    build_manifest,
    build_result,
    make_candidate,
    require,
    resolve_alpha,
    score,
)
from memprobe_core.data import SplitSnippet

logger = logging.getLogger("memprobe")
METHOD = "gcg"
# Budget for one batch of candidate logits (B × suffix × vocab floats) when no batch size is set.
_LOGITS_BUDGET_BYTES = 512 * 2**20


@dataclass
class GCGSearch:
    """What the token search found.

    Attributes:
        best_ids: prompt ids with the lowest loss seen (the initial prompt if nothing beat it).
        best_loss / initial_loss: mean CE of the suffix given the best / the initial prompt.
        losses: best-ever loss after each step (non-increasing).
        step_losses: lowest candidate loss of each step (can go up: candidates are random).
        evaluated / dropped: candidates whose loss was computed / dropped for not round-tripping.
        cancelled: the search stopped early on the cancel flag.
    """

    best_ids: list[int]
    best_loss: float
    initial_loss: float
    losses: list[float] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)
    evaluated: int = 0
    dropped: int = 0
    cancelled: bool = False


def _embed_scale(embed: Any) -> float | None:
    # Gemma-style embeddings multiply by sqrt(hidden) inside their forward; a one-hot product
    # with the raw weight must do the same or the gradient is taken at the wrong point.
    scale = getattr(embed, "embed_scale", None)
    if scale is None:
        return None
    return float(scale.item() if hasattr(scale, "item") else scale)


def _forward_logits(model: Any, keep: int, **inputs: Any) -> Any:
    """Logits of the last ``keep`` positions (skips the vocab projection of the prompt part)."""
    try:
        return model(**inputs, logits_to_keep=keep, use_cache=False).logits[:, -keep:]
    except TypeError:  # a model without logits_to_keep
        return model(**inputs, use_cache=False).logits[:, -keep:]


def round_trips(tokenizer: Any, ids: Sequence[int]) -> bool:
    """Whether ``decode(ids)`` re-encodes to exactly ``ids``."""
    text = tokenizer.decode(list(ids), skip_special_tokens=False)
    return list(tokenizer.encode(text, add_special_tokens=False)) == list(ids)


def gcg_search(
    model: Any,
    tokenizer: Any,
    prompt_ids: Sequence[int],
    target_ids: Sequence[int],
    *,
    lead_ids: Sequence[int] = (),
    steps: int = 30,
    top_k: int = 256,
    search_width: int = 128,
    batch_size: int | None = None,
    seed: int = 0,
    not_allowed: Sequence[int] = (),
    on_step: Callable[[int, float, float, list[int]], None] | None = None,
    cancel: threading.Event | None = None,
) -> GCGSearch:
    """Minimise the cross-entropy of ``target_ids`` given ``lead_ids + prompt_ids``.

    Args:
        model: a causal LM (``torch.nn.Module`` with ``get_input_embeddings``) in eval mode.
        tokenizer: its tokenizer (round-trip filter).
        prompt_ids: the starting prompt (the true prefix); only these positions change.
        target_ids: the true suffix.
        lead_ids: fixed tokens before the prompt (BOS when the tokenizer adds one).
        steps / top_k / search_width: GCG search size; batch_size: candidates per forward pass
            (``None``: as many as fit a 512 MiB logits budget).
        seed: seeds a local ``torch.Generator`` (no global RNG state is touched).
        not_allowed: token ids never proposed (special tokens).
        on_step: called after each step with (step, best loss, step's lowest loss, best ids).
        cancel: checked between steps and between candidate batches.

    Returns:
        A :class:`GCGSearch`; its ``losses`` never increase.
    """
    import torch
    import torch.nn.functional as F

    if not prompt_ids:
        raise ValueError("GCG needs a non-empty starting prompt (the true prefix)")
    if not target_ids:
        raise ValueError("GCG needs a non-empty target (the true suffix)")
    if model.training:
        logger.warning("GCG: the model is in training mode (dropout on); losses will be noisy")
    embed = model.get_input_embeddings()
    weight = embed.weight  # (V, d)
    device, vocab = weight.device, weight.shape[0]
    scale = _embed_scale(embed)
    lp, lt = len(prompt_ids), len(target_ids)
    lead = torch.tensor(list(lead_ids), dtype=torch.long, device=device)  # (Lb,)
    target = torch.tensor(list(target_ids), dtype=torch.long, device=device)  # (Lt,)
    current = torch.tensor(list(prompt_ids), dtype=torch.long, device=device)  # (Lp,)
    blocked = torch.zeros(vocab, dtype=torch.bool, device=device)  # (V,)
    blocked[[i for i in not_allowed if 0 <= i < vocab]] = True
    n_tok = len(tokenizer) if hasattr(tokenizer, "__len__") else vocab
    blocked[n_tok:] = True  # embedding rows padded past the tokenizer's vocabulary
    n_allowed = int((~blocked).sum())
    if n_allowed == 0:
        raise ValueError("GCG: every token is blocked; nothing can be substituted")
    if batch_size is None:
        per_seq = (lt + 1) * vocab * 4
        batch_size = max(1, min(search_width, _LOGITS_BUDGET_BYTES // per_seq))
    gen = torch.Generator(device="cpu").manual_seed(seed)

    with torch.no_grad():
        lead_emb = embed(lead[None]) if len(lead) else None  # (1, Lb, d)
        target_emb = embed(target[None])  # (1, Lt, d)

    def token_grad(ids: Any) -> tuple[Any, float]:
        one_hot = torch.zeros(lp, vocab, dtype=weight.dtype, device=device)  # (Lp, V)
        one_hot.scatter_(1, ids[:, None], 1.0)
        one_hot.requires_grad_(True)
        emb = (one_hot @ weight)[None]  # (1, Lp, d)
        if scale is not None:  # in the weight dtype, as the embedding's own forward does
            emb = emb * torch.tensor(scale, dtype=emb.dtype, device=device)
        parts = [emb, target_emb] if lead_emb is None else [lead_emb, emb, target_emb]
        logits = _forward_logits(model, lt + 1, inputs_embeds=torch.cat(parts, dim=1))  # (1, Lt+1, V)
        loss = F.cross_entropy(logits[0, :-1].float(), target)
        # autograd.grad, not backward(): nothing accumulates in the (possibly shared) model's .grad.
        (grad,) = torch.autograd.grad(loss, [one_hot])  # (Lp, V)
        return grad, float(loss.detach())

    def losses_of(cands: Any) -> Any:  # cands (B, Lp) -> (B,)
        out = []
        with torch.no_grad():
            for i in range(0, cands.shape[0], batch_size):
                check_cancel(cancel)
                chunk = cands[i : i + batch_size]  # (b, Lp)
                b = chunk.shape[0]
                inp = torch.cat([lead.expand(b, -1), chunk, target.expand(b, -1)], dim=1)  # (b, L)
                logits = _forward_logits(model, lt + 1, input_ids=inp)[:, :-1]  # (b, Lt, V)
                ce = F.cross_entropy(
                    logits.float().transpose(1, 2), target.expand(b, -1), reduction="none"
                )  # (b, Lt)
                out.append(ce.mean(dim=1))
        return torch.cat(out)

    grad, initial_loss = token_grad(current)
    result = GCGSearch(best_ids=current.tolist(), best_loss=initial_loss, initial_loss=initial_loss)
    changed = False
    try:
        for step in range(1, steps + 1):
            check_cancel(cancel)
            if step > 1 and changed:  # the gradient only changes with the current prompt
                grad, _ = token_grad(current)
            changed = False
            grad = grad.masked_fill(blocked[None, :], float("inf"))
            top = (-grad).topk(min(top_k, n_allowed), dim=1).indices.cpu()  # (Lp, k)
            pos = torch.randint(0, lp, (search_width,), generator=gen)  # (W,)
            pick = torch.randint(0, top.shape[1], (search_width,), generator=gen)  # (W,)
            cands = current.cpu().repeat(search_width, 1)  # (W, Lp)
            cands[torch.arange(search_width), pos] = top[pos, pick]
            cands = torch.unique(cands, dim=0)  # sorted, hence deterministic
            keep = [
                i for i, row in enumerate(cands.tolist())
                if row != result.best_ids and round_trips(tokenizer, row)
            ]
            result.dropped += cands.shape[0] - len(keep)
            if not keep:
                logger.info("GCG step %d: no candidate round-trips; keeping the current prompt", step)
                result.losses.append(result.best_loss)
                result.step_losses.append(float("nan"))
                if on_step:
                    on_step(step, result.best_loss, float("nan"), result.best_ids)
                continue
            cands = cands[keep].to(device)  # (W', Lp)
            losses = losses_of(cands)  # (W',)
            result.evaluated += cands.shape[0]
            j = int(losses.argmin())
            step_loss = float(losses[j])
            if step_loss < result.best_loss:
                result.best_loss, result.best_ids = step_loss, cands[j].tolist()
                current, changed = cands[j], True
            result.losses.append(result.best_loss)
            result.step_losses.append(step_loss)
            if on_step:
                on_step(step, result.best_loss, step_loss, result.best_ids)
    except Cancelled:
        result.cancelled = True
    return result


def _encode_for(tokenizer: Any, split: SplitSnippet, text: str, ids: Sequence[int]) -> list[int]:
    # The split's ids are the victim tokenizer's; reuse them only when the base shares it.
    name = getattr(tokenizer, "name_or_path", None)
    if name and name == split.tokenizer_name:
        return list(ids)
    return list(tokenizer.encode(text, add_special_tokens=False))


def _lead_ids(tokenizer: Any) -> list[int]:
    """Special tokens the tokenizer puts before a text (BOS), kept fixed in front of the prompt."""
    plain = list(tokenizer.encode("a", add_special_tokens=False))
    full = list(tokenizer.encode("a", add_special_tokens=True))
    if plain and full[-len(plain) :] == plain:
        return full[: len(full) - len(plain)]
    return []


def run_gcg(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
) -> AttackResult:
    """Run GCG toward the true suffix on the base model, then score the victim's output.

    Args:
        split: the snippet cut into prefix and suffix.
        models: ``base`` must be white-box (an ``hf`` backend exposing ``torch_model``);
            ``victim`` answers the decoded best prompt.
        options: ``gcg_steps`` (paper: 30), ``gcg_top_k``, ``gcg_search_width``,
            ``gcg_batch_size``, ``seed``, scoring and α.
        on_event: a ``SearchStep`` per step, then round 1 (the best prompt answered and
            scored) and ``Finished``.
        cancel: checked between steps and candidate batches; the best prompt so far is still
            scored (one victim query) and the result has ``status="cancelled"``.

    Raises:
        MissingModelError: no base model, or one without weights and gradients.
    """
    from memprobe_core.metrics import dis

    base = require(models.base, "base", METHOD, "a white-box model for token gradients")
    torch_model = getattr(base, "torch_model", None)
    if not base.white_box or torch_model is None or base.tokenizer is None:
        raise MissingModelError(
            f"GCG needs a white-box base model (weights and gradients); {base.model_id!r} "
            f"(backend {base.backend!r}) has none. Load the base with the 'hf' backend."
        )
    tok = base.tokenizer
    alpha, alpha_source = resolve_alpha(split, models, options)
    meter = CostMeter()
    prompt_ids = _encode_for(tok, split, split.prefix, split.prefix_ids)
    target_ids = _encode_for(tok, split, split.suffix, split.suffix_ids)
    steps = options.gcg_steps

    def on_step(step: int, loss: float, step_loss: float, ids: list[int]) -> None:
        emit(on_event, SearchStep(step=step, steps=steps, loss=loss, step_loss=step_loss,
                                  best_prompt=tok.decode(ids, skip_special_tokens=True)))

    t0 = time.perf_counter()
    search = gcg_search(
        torch_model, tok, prompt_ids, target_ids,
        lead_ids=_lead_ids(tok), steps=steps, top_k=options.gcg_top_k,
        search_width=options.gcg_search_width, batch_size=options.gcg_batch_size,
        seed=options.seed, not_allowed=list(getattr(tok, "all_special_ids", []) or []),
        on_step=on_step, cancel=cancel,
    )
    meter.add_seconds("search", time.perf_counter() - t0)
    best_prompt = tok.decode(search.best_ids, skip_special_tokens=True)
    round_ = 1  # the search steps are not rounds: the one scored prompt is round 1
    emit(on_event, RoundStarted(round=round_, n=1))
    output = ask_victim(meter, models.victim, [best_prompt], split, as_chat=False)[0]
    sc = score(meter, [best_prompt], [output], split, models.victim, options, alpha)[0]
    cand = make_candidate(
        round_, 0, best_prompt, output, sc, is_round_best=True,
        extra={
            "loss": search.best_loss,
            "initial_loss": search.initial_loss,
            "losses": search.losses,
            "step_losses": search.step_losses,
            "evaluated": search.evaluated,
            "dropped_not_round_trip": search.dropped,
        },
    )
    emit(on_event, CandidateScored(round=round_, candidate=cand))
    emit(on_event, RoundFinished(round=round_, best=cand))
    manifest = build_manifest(
        METHOD, split, models, options, alpha, alpha_source,
        decoding={"victim": dict(VICTIM_DECODING, max_new_tokens=split.suffix_tokens)},
        extra={
            "gcg": {
                "steps": steps, "steps_done": len(search.losses), "top_k": options.gcg_top_k,
                "search_width": options.gcg_search_width, "batch_size": options.gcg_batch_size,
                "base_tokenizer": getattr(tok, "name_or_path", type(tok).__name__),
                "initial_prompt": "true prefix",
            },
            "victim_format": "raw text",
        },
    )
    result = build_result(
        METHOD, split, chosen=cand, trace=[cand], alpha=alpha,
        dis=dis(split.prefix, best_prompt), meter=meter, manifest=manifest,
        status="cancelled" if search.cancelled else "finished",
    )
    emit(on_event, Finished(result=result))
    return result
