"""The ``hf`` backend's two ways to decode one batch: memprobe's own loop and ``model.generate``.

Why not ``model.generate``: a probe asks for ``n`` samples of ONE attacker request and for
greedy answers of many victim prompts of different lengths. ``generate`` copies the prompt ``n``
times before the prefill (``num_return_sequences`` expands the inputs first) and keeps computing
rows that already ended until the last one ends. This loop instead

- prefills each distinct prompt of the batch once and copies its KV cache to its ``n`` rows;
- drops rows that emitted a stop token from the batch (cache, mask and positions shrink with it);
- writes each step's keys and values into memory reserved for the whole run
  (``hf_kvcache.preallocated_cache``) instead of copying the cache at every step;
- returns the generated token ids, so nobody re-tokenizes the outputs;
- prefills prompts of very different lengths in length buckets, merged into one left-padded
  cache (:func:`length_buckets`): a victim round's 24 prompts of 17 to 124 tokens padded to 124
  were 2,976 positions for 1,029 real ones (6.6 s on the embedded Gemma; 2.7 s in 3 buckets).

The model calls are the ones ``generate`` makes (left padding, position ids from the attention
mask, ``logits_to_keep=1``, no mask when nothing is padded), so greedy outputs are the same (a
bucketed prefill computes fewer padded positions beside the real ones: the same tokens, logits
equal to float rounding);
sampling applies transformers' own temperature, top-k and top-p warpers and draws by inverse CDF
(``draw``: the same distribution as ``torch.multinomial``, a tenth of its cost) from a
``torch.Generator`` seeded per call.

``generate_reference`` is the other path: ``model.generate`` on the left-padded batch (every
row prefilled, rows that ended computed on), kept as the reference the loop is tested against,
for models the loop cannot drive, and for the static-cache + ``torch.compile`` option.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memprobe_core.models.hf_greedy_head import greedy_pass

# Bucket a prefill only when it skips at least this many padded positions: below it the extra
# calls and the merge are not worth it.
BUCKET_MIN_SAVED = 256


@dataclass(frozen=True)
class BatchDecoding:
    """How this loop decodes one batch: the caller's ``models.base.Decoding`` resolved to the
    tokenizer's stop and pad ids.

    Attributes:
        max_new_tokens: cap on generated tokens per row.
        temperature: 0 for greedy, > 0 to sample.
        top_p: nucleus mass when sampling (1.0: off).
        stop_ids: token ids that end a row (the stop token counts as generated).
        pad_id: the id written into padded prompt positions (masked out).
        bucket_min_saved: prefill the prompts in length buckets (:func:`length_buckets`) when
            that skips at least this many padded positions; a very large value turns it off.
        screened_head: greedy passes screen the vocabulary projection in bfloat16 and decide
            in float32 where :mod:`hf_greedy_head` applies (the same choices; ``False`` only
            for comparisons).
        top_k: sample among the k most likely tokens of each step (0: off).
    """

    max_new_tokens: int
    temperature: float
    top_p: float
    stop_ids: tuple[int, ...]
    pad_id: int
    bucket_min_saved: int = BUCKET_MIN_SAVED
    screened_head: bool = True
    top_k: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class Decoded:
    """One row's output: generated ids (stop token included when it stopped) and why it ended."""

    ids: tuple[int, ...]
    stopped: bool


def supports_own_loop(model: Any) -> bool:
    """Whether ``decode`` can drive ``model`` (a decoder-only LM taking a ``cache`` argument)."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return False
    return "cache" in _forward_params(model)


def decode(
    model: Any,
    prompts: list[list[int]],
    spec: BatchDecoding,
    generator: Any = None,
    *,
    watch: Callable[[list[list[int]]], None] | None = None,
) -> list[Decoded]:
    """Generate for every prompt row (rows may repeat a prompt: it is prefilled once).

    Args:
        model: a decoder-only transformers LM in eval mode.
        prompts: token ids per row (the n samples of one request are n equal rows).
        spec: decoding settings.
        generator: ``torch.Generator`` for sampling (``None``: torch's global generator).
        watch: called with every row's ids so far after each step (it must not keep them
            beyond the call, nor change them: ``memprobe_core.models.live``).

    Returns:
        One ``Decoded`` per row, in row order.
    """
    import torch

    unique: dict[tuple[int, ...], int] = {}
    row_of = [unique.setdefault(tuple(p), len(unique)) for p in prompts]
    device = model.device
    state = _prefill(model, [list(p) for p in unique], spec, device)
    if len(unique) < len(prompts):
        # Each distinct prompt was run once; its cache rows are copied to every row that asks for it.
        state.select(torch.tensor(row_of, device=device))
        state.rows = torch.arange(
            len(prompts), device=device
        )  # from here on, one id per output row
    return _loop(model, state, spec, generator, len(prompts), watch)


class _State:
    """The batch being decoded: KV cache, 2-D mask, next positions, logits and row ids.

    After a greedy step ``choices`` holds each row's next token and ``logits`` is ``None``
    (a greedy step computes only the argmax, :mod:`hf_greedy_head`).
    """

    def __init__(self, cache: Any, mask: Any, positions: Any, logits: Any, rows: Any) -> None:
        self.cache, self.mask, self.positions, self.logits, self.rows = (
            cache,
            mask,
            positions,
            logits,
            rows,
        )
        self.choices: Any = None

    def select(self, index: Any) -> None:
        """Keep (or repeat) the batch rows ``index`` (a 1-D long tensor)."""
        self.cache.batch_select_indices(index)
        if self.mask is not None:
            self.mask = self.mask[index]
        self.positions = self.positions[index]
        if self.logits is not None:
            self.logits = self.logits[index]
        if self.choices is not None:
            self.choices = self.choices[index]
        self.rows = self.rows[index]


# A forward call's fixed cost in prompt positions, when choosing buckets (on the embedded
# Gemma on 2 CPU cores a call costs about what 15-30 more positions do; erring high keeps
# buckets few).
BUCKET_CALL_COST = 64


def length_buckets(
    lengths: list[int], min_saved: int, call_cost: int | None = None
) -> list[list[int]]:
    """Row indices grouped for prefilling: one group (all rows, in order) unless groups of
    similar lengths skip at least ``min_saved`` padded positions.

    Rows sorted by length are cut into consecutive groups minimising Σ (rows × longest) +
    ``call_cost`` per group (default :data:`BUCKET_CALL_COST`; dynamic programming over the
    cut points: exact, O(rows²)).
    """
    call_cost = BUCKET_CALL_COST if call_cost is None else call_cost
    n = len(lengths)
    whole = [list(range(n))]
    if n < 2:
        return whole
    order = sorted(range(n), key=lambda i: lengths[i])
    sorted_lengths = [lengths[i] for i in order]
    best = [0] + [float("inf")] * n  # best[j]: cost of the first j sorted rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):
            cost = best[i] + (j - i) * sorted_lengths[j - 1] + call_cost
            if cost < best[j]:
                best[j], cut[j] = cost, i
    if n * sorted_lengths[-1] + call_cost - best[n] < min_saved:
        return whole
    groups, j = [], n
    while j > 0:
        groups.append([order[k] for k in range(cut[j], j)])
        j = cut[j]
    return groups[::-1]


def _left_padded(prompts: list[list[int]], pad_id: int, device: Any) -> tuple[Any, Any, Any]:
    """``(ids, mask, positions)`` of ``prompts`` left padded to the longest, (B, T) each;
    positions as ``generate`` computes them from the mask."""
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)  # (B, T), left padded
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        mask[row, width - len(prompt) :] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
    return ids, mask, positions


def _prefill(model: Any, prompts: list[list[int]], spec: BatchDecoding, device: Any) -> _State:
    import torch

    from memprobe_core.models.hf_kvcache import preallocated_cache

    ids, mask, positions = _left_padded(prompts, spec.pad_id, device)
    width = ids.shape[1]
    cache = preallocated_cache(model.config, capacity=width + spec.max_new_tokens)
    # generate drops an all-ones mask (no padding) for the whole run; do the same so the
    # attention kernels, hence greedy outputs, are the ones generate would use.
    run_mask = None if bool((mask == 1).all()) else mask
    groups = length_buckets([len(p) for p in prompts], spec.bucket_min_saved)
    logits = None
    if len(groups) > 1:
        logits = _bucketed_prefill(model, prompts, groups, spec, cache)
    if logits is None:
        logits = _forward(model, ids, run_mask, positions, cache)
    rows = torch.arange(len(prompts), device=device)
    return _State(cache, run_mask, positions[:, -1:] + 1, logits, rows)


def _bucketed_prefill(
    model: Any, prompts: list[list[int]], groups: list[list[int]], spec: BatchDecoding, cache: Any
) -> Any:
    """Prefill each group of rows on its own and write their keys and values into ``cache``
    as one left-padded batch would hold them; the last position's float32 logits, (B, V).
    ``None`` (nothing written) when ``cache`` cannot take merged rows (a layer that is not
    memprobe's buffer, or prompts past a sliding window).

    Each real position sees the same tokens and position ids as in one padded prefill; only
    which padded positions are computed beside it changes (greedy outputs are tested equal).
    """
    import torch

    from memprobe_core.models.hf_kvcache import (
        can_merge_prefills,
        merge_prefills,
        preallocated_cache,
    )

    width = max(len(p) for p in prompts)
    if not can_merge_prefills(cache, width):
        return None
    parts: list[tuple[Any, list[int]]] = []
    logits: list[Any] = [None] * len(prompts)
    for rows in groups:
        part = [prompts[r] for r in rows]
        ids, mask, positions = _left_padded(part, spec.pad_id, model.device)
        own = preallocated_cache(model.config, capacity=ids.shape[1])
        run_mask = None if bool((mask == 1).all()) else mask
        for row, row_logits in zip(rows, _forward(model, ids, run_mask, positions, own)):
            logits[row] = row_logits
        parts.append((own, rows))
    merge_prefills(cache, parts, batch=len(prompts), width=width)
    return torch.stack(logits)


def _forward(model: Any, ids: Any, mask: Any, positions: Any, cache: Any) -> Any:
    """One model call; the float32 logits of the last position, (B, V)."""
    kwargs = _call_kwargs(model, ids, mask, positions, cache)
    if "logits_to_keep" in _forward_params(model):
        kwargs["logits_to_keep"] = 1  # only the last position's logits are needed
    out = model(**kwargs, return_dict=True)
    return out.logits[:, -1].to(copy=True, dtype=_float32())


def _call_kwargs(model: Any, ids: Any, mask: Any, positions: Any, cache: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"input_ids": ids, "cache": cache, "use_cache": True}
    if mask is not None:
        kwargs["attention_mask"] = mask
    if "position_ids" in _forward_params(model):
        kwargs["position_ids"] = positions
    return kwargs


def _loop(
    model: Any,
    state: _State,
    spec: BatchDecoding,
    generator: Any,
    n_rows: int,
    watch: Callable[[list[list[int]]], None] | None = None,
) -> list[Decoded]:
    import torch

    pick = _picker(spec, generator)
    device = state.positions.device
    stops = torch.tensor(sorted(set(spec.stop_ids)) or [-1], device=device)
    out: list[list[int]] = [[] for _ in range(n_rows)]
    stopped = [False] * n_rows
    done = torch.zeros(n_rows, dtype=torch.bool, device=device)
    for step in range(spec.max_new_tokens):
        tokens = pick(state.logits) if state.choices is None else state.choices  # (A,)
        ended = torch.isin(tokens, stops)
        for row, token, end in zip(state.rows.tolist(), tokens.tolist(), ended.tolist()):
            if not stopped[row]:
                out[row].append(token)
                stopped[row] = end
        done[state.rows] |= ended
        if watch is not None:
            watch(out)
        if step == spec.max_new_tokens - 1 or bool(done.all()):
            break
        if bool(ended.any()):  # rows that stopped leave the batch: cache, mask, positions, logits
            keep = (~ended).nonzero().squeeze(-1)
            state.select(keep)
            tokens = tokens[keep]
        _step(model, state, tokens, spec)
    return [Decoded(tuple(ids), s) for ids, s in zip(out, stopped)]


def _step(model: Any, state: _State, tokens: Any, spec: BatchDecoding) -> None:
    """Feed the tokens just chosen; keep the logits of the next position (sampling) or its
    greedy choices (greedy: through ``hf_greedy_head``, screened where it applies)."""
    import torch

    if state.mask is not None:
        ones = torch.ones(
            (state.mask.shape[0], 1), dtype=state.mask.dtype, device=state.mask.device
        )
        state.mask = torch.cat([state.mask, ones], dim=-1)
    ids = tokens[:, None]
    if spec.greedy:
        kwargs = _call_kwargs(model, ids, state.mask, state.positions, state.cache)
        params = _forward_params(model)
        choices, _ = greedy_pass(model, kwargs, 1, params, screen=spec.screened_head)
        state.choices, state.logits = choices[:, 0], None
    else:
        state.logits = _forward(model, ids, state.mask, state.positions, state.cache)
    state.positions = state.positions + 1


def _picker(spec: BatchDecoding, generator: Any) -> Any:
    """A function from logits (A, V) to the chosen token per row (A,)."""
    import torch

    if spec.greedy:
        return lambda logits: torch.argmax(logits, dim=-1)
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    # The warpers generate would apply for these settings, in its order (temperature, top-k,
    # top-p).
    warpers = LogitsProcessorList([TemperatureLogitsWarper(spec.temperature)])
    if spec.top_k > 0:
        warpers.append(TopKLogitsWarper(spec.top_k))
    if spec.top_p < 1.0:
        warpers.append(TopPLogitsWarper(spec.top_p))

    def sample(logits: Any) -> Any:
        scores = warpers(None, logits)  # type: ignore[arg-type]  # these warpers ignore the ids
        return draw(torch.softmax(scores.double(), dim=-1), generator)

    return sample


def draw(probs: Any, generator: Any) -> Any:
    """One token per row of ``probs`` (A, V; rows sum to ~1, zeros never drawn), by inverse CDF.

    Why not ``torch.multinomial``: for one sample it draws an exponential variate per vocabulary
    entry, 31 ms for 24 rows of SmolLM2's 49k entries on this CPU, a fifth of an attacker decode
    step; one uniform per row against the cumulative sum (float64, so the tail's mass is not
    rounded away) takes 3.6 ms and samples the same distribution. The random stream differs from
    ``generate``'s, so sampled text differs from ``generation_loop="transformers"`` for one seed.
    """
    import torch

    cdf = probs.cumsum(dim=-1)
    total = cdf[:, -1:]
    if not bool(torch.isfinite(total).all() and (total > 0).all()):
        # torch.multinomial refused these too: such logits mean the model itself failed.
        raise ValueError(
            "the model's next-token probabilities are not finite or sum to 0 (NaN or inf logits)"
        )
    u = torch.rand(total.shape, generator=generator, dtype=cdf.dtype, device=cdf.device) * total
    # The first entry whose cumulative mass exceeds u: a zero-probability entry never does.
    index = torch.searchsorted(cdf, u, right=True).squeeze(-1)
    # u < total always, except when rounding makes them equal: then no entry exceeds u and the
    # index is past the end; take the row's last drawable entry (rare: not computed otherwise).
    past_end = index == probs.shape[-1]
    if bool(past_end.any()):
        last_drawable = (probs > 0).long().cumsum(dim=-1).argmax(dim=-1)
        index = torch.where(past_end, last_drawable, index)
    return index


def _forward_params(model: Any) -> frozenset[str]:
    return _params_of(type(model))  # type: ignore[arg-type]  # classes are hashable


@functools.lru_cache(maxsize=64)
def _params_of(cls: Any) -> frozenset[str]:
    # Per class, not per call: inspect.signature costs more than a small model's decode step.
    return frozenset(inspect.signature(cls.forward).parameters)


def _float32() -> Any:
    import torch

    return torch.float32


# --- the reference path: model.generate ---------------------------------------------------------


def generate_reference(
    model: Any, prompts: list[list[int]], spec: BatchDecoding, *, compile_: bool = False
) -> list[Decoded]:
    """``model.generate`` on the left-padded rows (seeded through torch's global generator)."""
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), spec.pad_id, dtype=torch.long)  # (B, T), left padded
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        mask[row, width - len(prompt) :] = 1
    output = model.generate(
        input_ids=ids.to(model.device),
        attention_mask=mask.to(model.device),
        generation_config=generation_config(model, spec, compile_=compile_),
    )
    stops = set(spec.stop_ids)
    rows = []
    for tokens in output[:, width:].tolist():  # (B, new tokens); rows that stopped early are padded
        end = next((k for k, t in enumerate(tokens) if t in stops), None)
        rows.append(
            Decoded(tuple(tokens), False)
            if end is None
            else Decoded(tuple(tokens[: end + 1]), True)
        )
    return rows


def generation_config(model: Any, spec: BatchDecoding, *, compile_: bool = False) -> Any:
    """The ``GenerationConfig`` for ``spec``, every knob set explicitly.

    Unset fields would be filled from the checkpoint's generation_config.json (top_k=64,
    repetition penalties …) and change the method.
    """
    from transformers import CompileConfig, GenerationConfig

    greedy = spec.greedy
    config = GenerationConfig(
        max_new_tokens=spec.max_new_tokens,
        min_new_tokens=0,
        do_sample=not greedy,
        temperature=1.0 if greedy else spec.temperature,
        top_p=1.0 if greedy else spec.top_p,
        # 0 turns top-k off when sampling; greedy gets the library default so it does not warn.
        top_k=50 if greedy else spec.top_k,
        num_beams=1,
        repetition_penalty=1.0,
        no_repeat_ngram_size=0,
        eos_token_id=list(spec.stop_ids),
        pad_token_id=spec.pad_id,
        bos_token_id=getattr(model.generation_config, "bos_token_id", None),
    )
    if compile_:
        # A static KV cache gives fixed shapes, which is what lets torch.compile reuse its graph.
        config.cache_implementation = "static"
        on_cpu = getattr(model.device, "type", "cpu") == "cpu"
        compile_config = CompileConfig(mode="default" if on_cpu else "reduce-overhead")
        # transformers compiles only on GPUs unless told
        compile_config._compile_all_devices = True  # type: ignore[assignment]
        config.compile_config = compile_config
    return config


class seeded:
    """Seed torch's global generators for one call and put their state back afterwards."""

    def __init__(self, seed: int | None, device: Any, *, active: bool) -> None:
        self.seed, self.device, self.active = seed, device, active
        self._fork: Any = None

    def __enter__(self) -> None:
        import torch

        if self.seed is None or not self.active:
            return
        devices: list[int] = []
        if getattr(self.device, "type", str(self.device)).startswith("cuda"):
            devices = [self.device.index or 0] if hasattr(self.device, "index") else [0]
        self._fork = torch.random.fork_rng(devices=devices)
        self._fork.__enter__()
        torch.manual_seed(self.seed)

    def __exit__(self, *exc: Any) -> None:
        if self._fork is not None:
            self._fork.__exit__(*exc)
            self._fork = None
