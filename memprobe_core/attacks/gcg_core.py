"""GCG's token search (greedy coordinate gradient, Zou et al. 2023) on a torch causal LM.

The model sees ``before + prompt + after + target``: ``before`` and ``after`` are fixed context
(BOS, a chat template's opening and closing tokens), only ``prompt`` changes, and the loss is the
mean cross-entropy of ``target`` alone. :func:`gcg_search` reads as nanoGCG's loop does:

1. :func:`token_gradient`: loss and gradient w.r.t. a one-hot encoding of the prompt;
2. :func:`sample_ids_from_grad`: ``search_width`` candidates, each swapping one random position
   for one of its top-k tokens of most negative gradient;
3. :func:`filter_ids`: candidates whose decode → re-encode does not give the same ids are dropped
   (the answering model only ever sees the decoded text);
4. :func:`candidates_loss`: exact losses in batches; the best ever is kept, so the reported loss
   never increases.

Speed: the ``before`` tokens are run once and their KV cache is expanded (a view, no copy) over
each candidate batch (:class:`PrefixCache`); only the positions that predict the target go
through the vocabulary projection (``logits_to_keep``); duplicate candidates are scored once; the
gradient is recomputed only when the current prompt moved. Every pass is counted in a
:class:`SearchCounts` that belongs to the call, never to the (possibly shared, cached) model.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.result import Cancelled, check_cancel
from memprobe_core.models import threads

logger = logging.getLogger(__name__)
# Budget for one batch of candidate logits (B × target × vocab floats) when no batch size is set:
# big batches are what make the CPU and GPU efficient, and nanoGCG materialises more than this
# (logits of every position) for its whole search width at once.
_LOGITS_BUDGET_BYTES = 1024 * 2**20


@dataclass
class SearchCounts:
    """Model work of one search: private to the call, so concurrent runs never mix.

    Attributes:
        forward_passes: model forward calls (the prefix, each gradient, each candidate batch).
        backward_passes: gradient computations w.r.t. the one-hot prompt.
        sequences: sequences run forward (a batch of b candidates counts b).
        tokens: token positions run forward (cached prefix positions are counted once).
        seconds: wall seconds spent in the model passes.
    """

    forward_passes: int = 0
    backward_passes: int = 0
    sequences: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def add_forward(self, batch: int, length: int, seconds: float) -> None:
        self.forward_passes += 1
        self.sequences += batch
        self.tokens += batch * length
        self.seconds += seconds


@dataclass(frozen=True, kw_only=True)
class GcgSearchConfig:
    """How one GCG search runs: its size, its sampling and what it may propose.

    The sizes have no defaults here: GCG's live in
    :class:`~memprobe_core.attacks.options.GCGOptions` (ACR's in its own options), and the
    caller hands their values in.

    Attributes:
        steps / top_k / search_width: GCG search size.
        batch_size: candidates per forward pass (``None``: as many as fit a 1 GiB logits budget).
        seed: seeds a local ``torch.Generator`` (no global RNG state is touched).
        not_allowed: token ids never proposed (special tokens); kept as a tuple.
        prefix_cache: reuse the KV cache of the fixed tokens before the prompt (False: recompute
            it every pass; same losses to float tolerance, for tests and benchmarks).
    """

    steps: int
    top_k: int
    search_width: int
    batch_size: int | None = None
    seed: int = 0
    not_allowed: Sequence[int] = ()
    prefix_cache: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "not_allowed", tuple(self.not_allowed))


@dataclass
class GCGSearch:
    """What the token search found.

    Attributes:
        best_ids: prompt ids with the lowest loss seen (the initial prompt if nothing beat it).
        best_loss / initial_loss: mean CE of the target given the best / the initial prompt.
        losses: best-ever loss after each step (non-increasing).
        step_losses: lowest candidate loss of each step (can go up: candidates are random).
        evaluated / dropped: candidates whose loss was computed / dropped for not round-tripping.
        cancelled: the search stopped early on the cancel flag.
        stopped: the ``stop`` callback ended the search early (its goal was reached).
        counts: the forward/backward passes, tokens and seconds the search spent.
    """

    best_ids: list[int]
    best_loss: float
    initial_loss: float
    losses: list[float] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)
    evaluated: int = 0
    dropped: int = 0
    cancelled: bool = False
    stopped: bool = False
    counts: SearchCounts = field(default_factory=SearchCounts)


def charge_search(meter: CostMeter, counts: SearchCounts, seconds: float) -> None:
    """Charge a white-box search's passes to ``meter``'s ``search_*`` costs; ``seconds``: the
    whole search's wall time (its passes and whatever ran between them)."""
    c = meter.costs
    c.search_seconds += seconds
    c.search_forward_passes += counts.forward_passes
    c.search_backward_passes += counts.backward_passes
    c.search_sequences += counts.sequences
    c.search_tokens += counts.tokens


def tokenizer_lead_ids(tokenizer: Any) -> list[int]:
    """Special tokens the tokenizer puts before a text (BOS): the ``lead_ids`` a search keeps
    fixed in front of the prompt when the model will see the raw text."""
    plain = list(tokenizer.encode("a", add_special_tokens=False))
    full = list(tokenizer.encode("a", add_special_tokens=True))
    if plain and full[-len(plain) :] == plain:
        return full[: len(full) - len(plain)]
    return []


def _embed_scale(embed: Any) -> float | None:
    # Gemma-style embeddings multiply by sqrt(hidden) inside their forward; a one-hot product
    # with the raw weight must do the same or the gradient is taken at the wrong point.
    scale = getattr(embed, "embed_scale", None)
    if scale is None:
        return None
    return float(scale.item() if hasattr(scale, "item") else scale)


def _cache_kwarg(model: Any) -> str:
    """The forward's name for a KV cache: ``cache`` (transformers ≥ 5.2x), else ``past_key_values``."""
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _forward_logits(model: Any, keep: int, past: Any = None, **inputs: Any) -> Any:
    """Logits of the last ``keep`` positions (skips the vocab projection of the other positions)."""
    if past is not None:  # ``past`` is a private copy: the pass may append to it
        inputs[_cache_kwarg(model)] = past
    try:
        out = model(**inputs, logits_to_keep=keep, use_cache=past is not None)
    except TypeError:  # a model without logits_to_keep
        out = model(**inputs, use_cache=past is not None)
    return out.logits[:, -keep:]


class PrefixCache:
    """KV cache of the fixed tokens before the optimised span, computed once per search.

    :meth:`expand` hands each forward pass its own cache object whose layers are *views* of the
    batch-1 tensors expanded over the batch: the pass appends to its copy (``torch.cat`` makes new
    tensors), so the cached prefix is never modified and costs no memory per candidate.
    """

    _SUPPORTED = ("DynamicLayer", "DynamicSlidingWindowLayer")

    def __init__(self, cache: Any, length: int) -> None:
        self.cache = cache
        self.length = length

    @classmethod
    def build(cls, model: Any, before: Any, counts: SearchCounts) -> PrefixCache | None:
        """Run ``before`` (1-D ids) once; ``None`` when empty or the model's cache is not expandable."""
        import torch

        if before.numel() == 0:
            return None
        t0 = time.perf_counter()
        with torch.no_grad():  # not inference_mode: the gradient pass attends to these tensors
            out = model(input_ids=before[None], use_cache=True)
        counts.add_forward(1, before.numel(), time.perf_counter() - t0)
        cache = getattr(out, "cache", None)
        if cache is None:
            cache = getattr(out, "past_key_values", None)
        layers = getattr(cache, "layers", None)
        if not layers or any(type(layer).__name__ not in cls._SUPPORTED for layer in layers):
            # Legacy tuples or exotic layers (linear attention, quantized): recompute instead.
            logger.info(
                "GCG: %s cache is not expandable; running the prefix every pass",
                type(cache).__name__,
            )
            return None
        return cls(cache, before.numel())

    def expand(self, batch: int) -> Any:
        """A fresh cache object for one forward pass of ``batch`` sequences."""
        new = copy.copy(self.cache)
        new.layers = []
        for layer in self.cache.layers:
            mine = copy.copy(layer)
            if getattr(layer, "is_initialized", False) and layer.keys is not None:
                mine.keys = layer.keys.expand(batch, -1, -1, -1)
                mine.values = layer.values.expand(batch, -1, -1, -1)
            new.layers.append(mine)
        return new


@dataclass
class _Problem:
    """The fixed parts of one search (built once by :func:`gcg_search`)."""

    model: Any
    weight: Any  # (V, d) input embedding matrix
    scale: float | None
    before: Any  # (Lb,)
    after: Any  # (La,)
    target: Any  # (Lt,)
    prefix: PrefixCache | None
    counts: SearchCounts

    def tail(self) -> Any:
        """Ids after the prompt that every pass feeds: ``after`` + ``target[:-1]`` (the last target
        token is never an input: only the logits that predict it are needed)."""
        import torch

        return torch.cat([self.after, self.target[:-1]])

    def past(self, batch: int) -> Any:
        return self.prefix.expand(batch) if self.prefix is not None else None


def token_gradient(problem: _Problem, ids: Any) -> tuple[Any, float]:
    """Loss at ``ids`` (1-D prompt) and its gradient w.r.t. the one-hot prompt, shape (Lp, V)."""
    import torch
    import torch.nn.functional as F

    p, embed = problem, problem.model.get_input_embeddings()
    lt = p.target.numel()
    t0 = time.perf_counter()
    one_hot = torch.zeros(
        ids.numel(), p.weight.shape[0], dtype=p.weight.dtype, device=p.weight.device
    )
    one_hot.scatter_(1, ids[:, None], 1.0)
    one_hot.requires_grad_(True)
    emb = (one_hot @ p.weight)[None]  # (1, Lp, d)
    if p.scale is not None:  # in the weight dtype, as the embedding's own forward does
        emb = emb * torch.tensor(p.scale, dtype=emb.dtype, device=emb.device)
    with torch.no_grad():
        fixed_before = embed(p.before[None]) if p.prefix is None and p.before.numel() else None
        tail = embed(p.tail()[None])  # (1, La + Lt - 1, d)
    parts = [emb, tail] if fixed_before is None else [fixed_before, emb, tail]
    inputs = torch.cat(parts, dim=1)  # (1, L, d)
    logits = _forward_logits(p.model, lt, p.past(1), inputs_embeds=inputs)  # (1, Lt, V)
    loss = F.cross_entropy(logits[0].float(), p.target)
    # autograd.grad, not backward(): nothing accumulates in the (possibly shared) model's .grad.
    (grad,) = torch.autograd.grad(loss, [one_hot])  # (Lp, V)
    p.counts.add_forward(1, inputs.shape[1], 0.0)
    p.counts.backward_passes += 1
    p.counts.seconds += time.perf_counter() - t0
    return grad, float(loss.detach())


def sample_ids_from_grad(
    ids: Any, grad: Any, blocked: Any, *, search_width: int, top_k: int, generator: Any
) -> Any:
    """``search_width`` candidates (W, Lp): each swaps one random position of ``ids`` for one of
    that position's ``top_k`` tokens of most negative gradient (``blocked`` tokens never)."""
    import torch

    grad = grad.masked_fill(blocked[None, :], float("inf"))
    top = (-grad).topk(min(top_k, int((~blocked).sum())), dim=1).indices.cpu()  # (Lp, k)
    pos = torch.randint(0, ids.numel(), (search_width,), generator=generator)  # (W,)
    pick = torch.randint(0, top.shape[1], (search_width,), generator=generator)  # (W,)
    cands = ids.cpu().repeat(search_width, 1)  # (W, Lp)
    cands[torch.arange(search_width), pos] = top[pos, pick]
    return torch.unique(cands, dim=0)  # sorted, hence deterministic; duplicates scored once


def round_trips(tokenizer: Any, ids: Sequence[int]) -> bool:
    """Whether ``decode(ids)`` re-encodes to exactly ``ids``."""
    text = tokenizer.decode(list(ids), skip_special_tokens=False)
    return list(tokenizer.encode(text, add_special_tokens=False)) == list(ids)


def filter_ids(tokenizer: Any, cands: Any, skip: Sequence[int]) -> tuple[Any, int]:
    """Candidates that round-trip through the tokenizer and differ from ``skip``; and how many
    were dropped."""
    keep = [
        i
        for i, row in enumerate(cands.tolist())
        if row != list(skip) and round_trips(tokenizer, row)
    ]
    return cands[keep], cands.shape[0] - len(keep)


def candidates_loss(
    problem: _Problem, cands: Any, batch_size: int, cancel: threading.Event | None
) -> Any:
    """Mean target CE of each candidate prompt, (B, Lp) -> (B,), in batches of ``batch_size``."""
    import torch
    import torch.nn.functional as F

    p = problem
    lt, tail = p.target.numel(), p.tail()
    out = []
    with torch.inference_mode():
        for i in range(0, cands.shape[0], batch_size):
            check_cancel(cancel)
            chunk = cands[i : i + batch_size]  # (b, Lp)
            b = chunk.shape[0]
            parts = [chunk, tail.expand(b, -1)]
            if p.prefix is None and p.before.numel():
                parts.insert(0, p.before.expand(b, -1))
            inp = torch.cat(parts, dim=1)  # (b, L)
            t0 = time.perf_counter()
            logits = _forward_logits(p.model, lt, p.past(b), input_ids=inp)  # (b, Lt, V)
            ce = F.cross_entropy(
                logits.reshape(b * lt, -1).float(), p.target.repeat(b), reduction="none"
            )  # (b * Lt,)
            out.append(ce.view(b, lt).mean(dim=1))
            p.counts.add_forward(b, inp.shape[1], time.perf_counter() - t0)
    return torch.cat(out)


def _blocked_tokens(tokenizer: Any, vocab: int, not_allowed: Sequence[int], device: Any) -> Any:
    import torch

    blocked = torch.zeros(vocab, dtype=torch.bool, device=device)  # (V,)
    blocked[[i for i in not_allowed if 0 <= i < vocab]] = True
    n_tok = len(tokenizer) if hasattr(tokenizer, "__len__") else vocab
    blocked[n_tok:] = True  # embedding rows padded past the tokenizer's vocabulary
    if bool(blocked.all()):
        raise ValueError("GCG: every token is blocked; nothing can be substituted")
    return blocked


def _problem(
    model: Any,
    lead_ids: Sequence[int],
    after_ids: Sequence[int],
    target_ids: Sequence[int],
    prefix_cache: bool,
    counts: SearchCounts,
) -> _Problem:
    import torch

    embed = model.get_input_embeddings()
    weight = embed.weight  # (V, d)

    def ids(xs: Sequence[int]) -> Any:
        return torch.tensor(list(xs), dtype=torch.long, device=weight.device)

    before = ids(lead_ids)
    prefix = PrefixCache.build(model, before, counts) if prefix_cache else None
    return _Problem(
        model, weight, _embed_scale(embed), before, ids(after_ids), ids(target_ids), prefix, counts
    )


def gcg_search(
    model: Any,
    tokenizer: Any,
    prompt_ids: Sequence[int],
    target_ids: Sequence[int],
    config: GcgSearchConfig,
    *,
    lead_ids: Sequence[int] = (),
    after_ids: Sequence[int] = (),
    on_step: Callable[[int, float, float, list[int]], None] | None = None,
    stop: Callable[[list[int]], bool] | None = None,
    cancel: threading.Event | None = None,
) -> GCGSearch:
    """Minimise the cross-entropy of ``target_ids`` given ``lead_ids + prompt_ids + after_ids``.

    Args:
        model: a causal LM (``torch.nn.Module`` with ``get_input_embeddings``) in eval mode.
        tokenizer: its tokenizer (round-trip filter).
        prompt_ids: the starting prompt (the true prefix); only these positions change.
        target_ids: the true suffix; the loss is on these tokens only.
        config: the search's size, seed, blocked tokens and prefix cache
            (:class:`GcgSearchConfig`).
        lead_ids: fixed tokens before the prompt (BOS, a chat template's opening); their KV cache
            is computed once (unless ``config.prefix_cache`` is off).
        after_ids: fixed tokens between the prompt and the target (a chat template's closing and
            the assistant header): context, not target.
        on_step: called after each step with (step, best loss, step's lowest loss, best ids).
        stop: called after each step (after ``on_step``) with the best ids; ``True`` ends the
            search there with ``stopped`` set (ACR stops once the best prompt reproduces the
            target: lowering its loss further buys nothing).
        cancel: checked between steps and between candidate batches.

    Returns:
        A :class:`GCGSearch`; its ``losses`` never increase; ``counts`` holds the model work.
    """
    import torch

    if not prompt_ids:
        raise ValueError("GCG needs a non-empty starting prompt (the true prefix)")
    if not target_ids:
        raise ValueError("GCG needs a non-empty target (the true suffix)")
    if model.training:
        logger.warning("GCG: the model is in training mode (dropout on); losses will be noisy")
    counts = SearchCounts()
    problem = _problem(model, lead_ids, after_ids, target_ids, config.prefix_cache, counts)
    vocab = problem.weight.shape[0]
    blocked = _blocked_tokens(tokenizer, vocab, config.not_allowed, problem.weight.device)
    batch_size = config.batch_size
    if batch_size is None:
        batch_size = max(
            1, min(config.search_width, _LOGITS_BUDGET_BYTES // (len(target_ids) * vocab * 4))
        )
    gen = torch.Generator(device="cpu").manual_seed(config.seed)
    current = torch.tensor(list(prompt_ids), dtype=torch.long, device=problem.weight.device)
    grad, initial_loss = token_gradient(problem, current)
    result = GCGSearch(
        best_ids=current.tolist(), best_loss=initial_loss, initial_loss=initial_loss, counts=counts
    )
    steps = config.steps
    try:
        for step in range(1, steps + 1):
            check_cancel(cancel)
            threads.adapt()  # a step is a batch boundary: threads from the cores free now
            moved = _step(
                problem,
                tokenizer,
                result,
                grad,
                blocked,
                gen,
                step,
                search_width=config.search_width,
                top_k=config.top_k,
                batch_size=batch_size,
                cancel=cancel,
            )
            if on_step:
                on_step(step, result.best_loss, result.step_losses[-1], result.best_ids)
            if stop is not None and stop(result.best_ids):
                result.stopped = True
                break
            if moved and step < steps:  # the gradient only changes with the current prompt
                current = torch.tensor(result.best_ids, dtype=torch.long, device=current.device)
                grad, _ = token_gradient(problem, current)
    except Cancelled:
        result.cancelled = True
    return result


def _step(
    problem: _Problem,
    tokenizer: Any,
    result: GCGSearch,
    grad: Any,
    blocked: Any,
    gen: Any,
    step: int,
    *,
    search_width: int,
    top_k: int,
    batch_size: int,
    cancel: threading.Event | None,
) -> bool:
    """One GCG step: sample, filter, score; updates ``result``; True when the best prompt moved."""
    current = _cpu_ids(result.best_ids)
    cands = sample_ids_from_grad(
        current, grad, blocked, search_width=search_width, top_k=top_k, generator=gen
    )
    cands, dropped = filter_ids(tokenizer, cands, skip=result.best_ids)
    result.dropped += dropped
    if cands.shape[0] == 0:
        logger.info("GCG step %d: no candidate round-trips; keeping the current prompt", step)
        result.losses.append(result.best_loss)
        result.step_losses.append(float("nan"))
        return False
    cands = cands.to(problem.weight.device)  # (W', Lp)
    losses = candidates_loss(problem, cands, batch_size, cancel)  # (W',)
    result.evaluated += cands.shape[0]
    j = int(losses.argmin())
    step_loss = float(losses[j])
    moved = step_loss < result.best_loss
    if moved:
        result.best_loss, result.best_ids = step_loss, cands[j].tolist()
    result.losses.append(result.best_loss)
    result.step_losses.append(step_loss)
    return moved


def _cpu_ids(ids: Sequence[int]) -> Any:
    """A CPU long tensor of ``ids`` (candidates are sampled on the CPU for a device-free RNG)."""
    import torch

    return torch.tensor(list(ids), dtype=torch.long)
