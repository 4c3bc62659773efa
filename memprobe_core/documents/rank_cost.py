"""A whole document's rank-based extraction cost (Liu, Evans & Xiong 2026; docs/method.md §21).

The paper's setting: ONE teacher-forced pass over the whole text, each token ranked given
everything before it, then every window of ``l`` tokens. The map's windows cannot give it (a
token there sees only its window's 50-token prefix, and a window stops being read once it is
settled), so a map run makes this one pass over the document, after its windows.

A document longer than the victim's context is read by a sliding context: passes of
``context`` tokens (the tokenizer's front tokens, then the document) starting every
``context // 2`` document tokens; the first pass scores all its tokens, each later one only its
second half, so every token is ranked given at least ``context // 2 − len(front)`` tokens before
it (all of them while the document fits). A pass holds at most :data:`MAX_PASS_TOKENS` (the
victim's context when smaller), which bounds its memory on a long-context model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from memprobe_core.documents.extraction_map import _project, _projection_matches
from memprobe_core.measuring.inextractability import (
    InextractabilityOptions,
    extraction_cost,
    token_log2_bounds,
    token_min_bits,
    token_ranks,
)

# Positions projected onto the vocabulary at a time (262k logits a position for Gemma).
PROJECTION_CHUNK = 256
# The longest pass (attention memory grows with its square).
MAX_PASS_TOKENS = 2048
# Decimals each token's log2 factor is kept with: a window of l = 50 tokens sums to within
# 50 · 5e-5 = 0.0025 bits of the unrounded pass, and the record stays small (one number a token).
FACTOR_DECIMALS = 4


def model_context(model: Any) -> int:
    """Tokens a pass holds: the victim's context (its config's ``max_position_embeddings``),
    at most :data:`MAX_PASS_TOKENS`."""
    found = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return min(int(found), MAX_PASS_TOKENS) if isinstance(found, int) and found > 0 else 2048


def passes(n_ids: int, n_front: int, context: int) -> list[tuple[int, int, int]]:
    """``(start, first_scored, end)`` in document ids of each pass: it feeds
    ``front + ids[start:end]`` and ranks ``ids[first_scored:end]``."""
    room = context - n_front
    if room < 2:
        raise ValueError(f"a context of {context} tokens leaves no room after {n_front} front")
    if n_ids <= room:
        return [(0, 0, n_ids)]
    step = room // 2
    found = [(0, 0, room)]
    while found[-1][2] < n_ids:
        start = found[-1][2] - step
        found.append((start, found[-1][2], min(start + room, n_ids)))
    return found


def document_rank_cost(
    model: Any,
    ids: Sequence[int],
    front: Sequence[int],
    *,
    context: int | None = None,
    options: InextractabilityOptions | None = None,
) -> dict[str, Any]:
    """The document's extraction cost record (``extraction_bits``, ``greedy_extractable_rate``,
    the worst window in document token indices, …, and how it was read).

    Args:
        model: a transformers causal LM (the victim's ``torch_model``).
        ids: the document's token ids. front: tokens put before each pass (Gemma's BOS).
        context: tokens a pass may hold (default: :func:`model_context`).
    """
    import torch

    context = context or model_context(model)
    options = options or InextractabilityOptions()
    device = getattr(model, "device", "cpu")
    ranks: list[int] = []
    log_probs: list[float] = []
    planned = passes(len(ids), len(front), context)
    # With no front token nothing predicts the document's first token: it is not ranked.
    first = 0 if front else 1
    for start, scored, end in planned:
        row = torch.tensor([[*front, *ids[start:end]]], dtype=torch.long, device=device)
        # Row index of document token i is len(front) + i - start; logits[j] predict row[j + 1].
        lo = len(front) + max(scored, first) - start - 1
        hi = len(front) + end - start - 1
        with torch.inference_mode():
            read = _reader(model, row, hi - lo)
            for a in range(lo, hi, PROJECTION_CHUNK):
                b = min(a + PROJECTION_CHUNK, hi)
                got = token_ranks(read(a, b), row[0, a + 1 : b + 1], options.rank_cap)
                ranks += got[0]
                log_probs += got[1]
    cost = extraction_cost(ranks, log_probs, options)
    record: dict[str, Any] = {
        "extraction_bits": None,
        "greedy_extractable_rate": None,
        "ranked_tokens": len(ranks),
        "first_ranked_token": first,
        "context_tokens": context,
        "passes": len(planned),
        "rank_cap": options.rank_cap,
        "window_tokens": options.window_tokens,
        # The pass's own output, kept so a view derives each token's min b from it.
        "token_log2_bounds": stored_factors(token_log2_bounds(ranks, log_probs, options.rank_cap)),
    }
    if cost is not None:
        record.update(cost.to_record())
        record["extraction_worst_window"] = [cost.worst_start + first, cost.worst_end + first]
    return record


def stored_factors(factors: Sequence[float]) -> list[float | None]:
    """Each token's log2 factor rounded for the run's JSON config (``None``: a probability 0,
    ``−inf``, which JSON cannot hold)."""
    return [round(f, FACTOR_DECIMALS) if math.isfinite(f) else None for f in factors]


def document_token_bits(record: dict[str, Any], document_tokens: int) -> list[float] | None:
    """Each document token's minimum ``b`` over the windows of ``l`` tokens covering it, from a
    stored rank-cost record (:func:`document_rank_cost`); ``math.inf`` for a token nothing ranks
    (the first one without a front token). ``None`` for a record made before memprobe kept the
    per-token factors."""
    factors = record.get("token_log2_bounds")
    if factors is None:
        return None
    first = int(record.get("first_ranked_token", 0))
    window = int(record.get("window_tokens") or record.get("extraction_window_tokens") or 1)
    bits = [math.inf] * first + token_min_bits(factors, window)
    return (bits + [math.inf] * document_tokens)[:document_tokens]


def _reader(model: Any, row: Any, n: int) -> Any:
    """``read(a, b)``: the logits of row positions ``[a, b)`` (float32), the body run once and
    its hidden states projected a chunk at a time where that is the model's own output (the
    extraction map's check), else sliced from the model's full forward."""
    # The check (once per model) on a short piece: its full forward projects every position.
    if _projection_matches(model, row[:, :64], min(n, 16)):
        hidden = model.get_decoder()(input_ids=row, use_cache=False).last_hidden_state[0]
        return lambda a, b: _project(model, hidden[a:b]).float()
    logits = model(input_ids=row, use_cache=False).logits[0]
    return lambda a, b: logits[a:b].float()
