"""Near-verbatim extraction: a certified lower bound on the probability that one sample writes the
suffix within an edit budget, by decoding-constrained beam search (after Cooper et al. 2026,
"Estimating near-verbatim extraction risk in language models with decoding-constrained beam
search"; docs/method.md §22).

``p_z`` (§14) is the chance that one sample of ``L`` tokens under a scheme ``q`` writes the suffix
``z`` exactly. A sample a few tokens off leaks the text just as well, and the set of such samples
can hold far more probability than ``z`` alone. Its total is

    P_d = Σ_{y ∈ V^L, lev(y, z) ≤ d} q(y)

(Levenshtein distance over token ids). Enumerating ``V^L`` is impossible, but any set of distinct
sequences ``y`` with ``lev(y, z) ≤ d`` gives ``Σ q(y) ≤ P_d``: distinct sequences of the same
length are disjoint events of one sample. A beam search finds sequences with much of that mass:
it grows ``B`` partial sequences a token at a time, keeps only those whose edit distance to ``z``
can still end within ``d`` (the Levenshtein DP row of each partial sequence against the prefixes
of ``z``), ranks them by their exact ``q`` log-probability and keeps the top ``B``; the path of
``z`` itself is always kept, so the bound is never below ``p_z``. At the last token every
continuation of every beam that ends within ``d`` counts, not just the top ``B``.

Pure torch on a causal LM: the caller hands the prefix ids (the row p_z feeds) and the suffix ids.
The beams share one KV cache: one pass of the prefix, then one batched pass of at most ``B`` new
tokens per suffix token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memprobe_core.errors import OptionError
from memprobe_core.measuring.sampler import SamplingScheme, sampler_log_distribution

# A tenth of the suffix: 5 edits on a 50-token suffix.
DEFAULT_EDITS = 0.1
# 20 beams cost at most 20 samples of the suffix (one KV-cached token per beam and step), under
# the budget of 25 samples per suffix, the order of the ~20 samples Cooper et al. compare
# their cost with.
DEFAULT_BEAM_WIDTH = 20
MAX_BEAM_WIDTH = 1024


def check_edits(edits: Any) -> None:
    """Refuse an edit budget that is neither a share in [0, 1) nor a whole number ≥ 1."""
    is_number = isinstance(edits, (int, float)) and not isinstance(edits, bool)
    if not is_number or not 0 <= edits < math.inf or (edits >= 1 and edits != int(edits)):
        raise OptionError(
            "near_verbatim_edits",
            edits,
            "give a share of the suffix's tokens below 1 (e.g. 0.1) or a whole number of tokens "
            "from 1 (e.g. 5)",
        )


def check_beam_width(beam_width: Any) -> None:
    """Refuse a beam width that is not a whole number from 1 to ``MAX_BEAM_WIDTH``."""
    whole = isinstance(beam_width, int) and not isinstance(beam_width, bool)
    if not whole or not 1 <= beam_width <= MAX_BEAM_WIDTH:
        raise OptionError(
            "near_verbatim_beams", beam_width, f"give a whole number from 1 to {MAX_BEAM_WIDTH}"
        )


def edit_budget(edits: float, suffix_tokens: int) -> int:
    """The budget ``d`` in tokens: ``⌊edits · L⌋`` for a share below 1, else ``edits`` itself."""
    check_edits(edits)
    return math.floor(edits * suffix_tokens) if edits < 1 else int(edits)


@dataclass(frozen=True)
class NearVerbatimBound:
    """A certified lower bound on the near-verbatim extraction probability of one suffix.

    Attributes:
        log10_lower: log10 of the summed ``q`` of the sequences found (``None``: none has
            probability above 0).
        sequences: distinct sequences of ``L`` tokens within the budget whose ``q`` was summed.
        edits: the budget ``d`` in tokens.
        beam_width: ``B``.
        forward_passes / forward_tokens: what the search cost the model (the prefix's tokens
            once, then each step's beams).
    """

    log10_lower: float | None
    sequences: int
    edits: int
    beam_width: int
    forward_passes: int
    forward_tokens: int

    def to_record(self) -> dict[str, Any]:
        """The JSON-safe keys stored beside ``log10_p_z`` in a unit's ``verbatim`` record."""
        return {
            "near_verbatim_log10_lower": self.log10_lower,
            "near_verbatim_edits": self.edits,
            "near_verbatim_sequences": self.sequences,
            "near_verbatim_beam_width": self.beam_width,
            "near_verbatim_forward_passes": self.forward_passes,
            "near_verbatim_forward_tokens": self.forward_tokens,
        }


def near_verbatim_bound(
    model: Any,
    prefix_ids: Sequence[int],
    suffix_ids: Sequence[int],
    scheme: SamplingScheme,
    edits: float = DEFAULT_EDITS,
    beam_width: int = DEFAULT_BEAM_WIDTH,
) -> NearVerbatimBound:
    """The lower bound for ``suffix_ids`` after ``prefix_ids`` on a causal LM ``model``.

    Args:
        prefix_ids: the row the suffix follows (BOS included where the model wants one).
        suffix_ids: the true suffix ``z``; the samples considered have its length ``L``.
        edits: the budget: a share of ``L`` below 1 (``⌊edits · L⌋``) or whole tokens.
        beam_width: ``B``, the partial sequences kept per step.
    """
    import torch

    if not prefix_ids or not suffix_ids:
        raise ValueError("the near-verbatim bound needs at least one prefix and one suffix token")
    check_beam_width(beam_width)
    length = len(suffix_ids)
    budget = edit_budget(edits, length)
    device = next(model.parameters()).device
    search = _Search(torch.tensor(list(suffix_ids), dtype=torch.long, device=device), budget)
    with torch.inference_mode():
        out = model(
            input_ids=torch.tensor([list(prefix_ids)], device=device),
            use_cache=True,
            logits_to_keep=1,
        )
        passes, tokens = 1, len(prefix_ids)
        beams = _Beams.start(length, device)
        for step in range(length - 1):
            log_dist = sampler_log_distribution(out.logits[:, -1], scheme)
            beams, parents = search.extend(beams, log_dist, step, beam_width)
            if beams.size == 0:  # every partial sequence has q = 0 or no room left
                return NearVerbatimBound(None, 0, budget, beam_width, passes, tokens)
            cache = _returned_cache(out)
            cache.reorder_cache(parents)
            inputs = {"input_ids": beams.last[:, None], _cache_kwarg(model): cache}
            out = model(**inputs, use_cache=True)
            passes, tokens = passes + 1, tokens + beams.size
        log_total, count = search.finish(beams, sampler_log_distribution(out.logits[:, -1], scheme))
    log10 = None if log_total == -math.inf else log_total / math.log(10)
    return NearVerbatimBound(log10, count, budget, beam_width, passes, tokens)


def _cache_kwarg(model: Any) -> str:
    """The forward's name for a KV cache: ``cache`` (transformers ≥ 5.2x), else
    ``past_key_values`` (the rule of GCG's prefix cache, a layer above this one)."""
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _returned_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


@dataclass(frozen=True)
class _Beams:
    """The partial sequences kept: each one's last token, exact ``log q`` (float64), Levenshtein
    DP row against ``z[:0] … z[:L]``, and whether it is ``z``'s own prefix."""

    last: Any
    log_q: Any
    rows: Any
    on_true: Any

    @classmethod
    def start(cls, length: int, device: Any) -> _Beams:
        import torch

        return cls(
            last=torch.zeros(1, dtype=torch.long, device=device),
            log_q=torch.zeros(1, dtype=torch.float64, device=device),
            rows=torch.arange(length + 1, device=device)[None, :],
            on_true=torch.ones(1, dtype=torch.bool, device=device),
        )

    @property
    def size(self) -> int:
        return int(self.last.shape[0])


class _Search:
    """The arithmetic of one search: the DP rows and the pruning, against one suffix ``z``.

    Only whether a token equals ``z[j]`` enters the DP, so every token outside ``z`` gives a beam
    the same next row: rows are computed per *kind* — each distinct token of ``z``, then one
    "any other token" — not per vocabulary entry.
    """

    def __init__(self, suffix: Any, budget: int) -> None:
        import torch

        self.suffix = suffix
        self.budget = budget
        self.kinds = torch.unique(suffix)  # (U,)
        other = torch.ones((1, suffix.shape[0]), dtype=torch.long, device=suffix.device)
        # mismatch[k, j] = 1 when a token of kind k differs from z[j]; the last kind is "other".
        self.mismatch = torch.cat([(self.kinds[:, None] != suffix[None, :]).long(), other])

    def next_rows(self, rows: Any) -> Any:
        """``(n, K, L+1)``: each beam's DP row after one more token of each kind."""
        import torch

        n, width = rows.shape
        new = torch.empty((n, self.mismatch.shape[0], width), dtype=torch.long, device=rows.device)
        new[:, :, 0] = rows[:, None, 0] + 1
        for j in range(1, width):
            deleted = rows[:, None, j] + 1
            inserted = new[:, :, j - 1] + 1
            substituted = rows[:, None, j - 1] + self.mismatch[None, :, j - 1]
            new[:, :, j] = torch.minimum(torch.minimum(deleted, inserted), substituted)
        return new

    def can_end_within(self, rows: Any, remaining: int) -> Any:
        """Whether a partial sequence with these DP rows and ``remaining`` tokens still to come
        can end within the budget: aligning its first part with ``z[:j]`` costs ``rows[j]``, the
        rest at least the length gap ``|L − j − remaining|`` (and exactly that when the rest
        copies ``z[j:]``), so the prune never drops a sequence that could count."""
        import torch

        width = rows.shape[-1]
        j = torch.arange(width, device=rows.device)
        gap = (width - 1 - j - remaining).abs()
        return (rows + gap).min(dim=-1).values <= self.budget

    def extend(self, beams: _Beams, log_dist: Any, step: int, beam_width: int) -> tuple[Any, Any]:
        """The next beams (top ``B`` feasible by ``log q``, ``z``'s path kept) and the index of
        each one's parent (to reorder the KV cache)."""
        import torch

        rows = self.next_rows(beams.rows)
        feasible = self.can_end_within(rows, len(self.suffix) - step - 1)  # (n, K)
        n_kinds = self.kinds.shape[0]
        # Tokens of z: one candidate each. Any other token: the beam's top B of them suffice,
        # since they all share one row (feasible together or not at all).
        own = beams.log_q[:, None] + log_dist[:, self.kinds]
        own = own.masked_fill(~feasible[:, :n_kinds], -math.inf)
        others = log_dist.index_fill(1, self.kinds, -math.inf)
        top = others.topk(min(beam_width, others.shape[1]), dim=1)
        other = (beams.log_q[:, None] + top.values).masked_fill(~feasible[:, n_kinds:], -math.inf)
        scores = torch.cat([own, other], dim=1)  # (n, U + B)
        tokens = torch.cat([self.kinds.expand(beams.size, -1), top.indices], dim=1)
        kind = torch.cat(
            [
                torch.arange(n_kinds, device=scores.device).expand(beams.size, -1),
                torch.full_like(top.indices, n_kinds),
            ],
            dim=1,
        )
        chosen = self._chosen(scores, tokens, beams.on_true, step, beam_width)
        parents = torch.div(chosen, scores.shape[1], rounding_mode="floor")
        flat = (tokens.flatten()[chosen], kind.flatten()[chosen])
        truth = beams.on_true[parents] & (flat[0] == self.suffix[step])
        kept = _Beams(flat[0], scores.flatten()[chosen], rows[parents, flat[1]], truth)
        return kept, parents

    def _chosen(self, scores: Any, tokens: Any, on_true: Any, step: int, beam_width: int) -> Any:
        """Flat indices of the top ``B`` finite candidates; ``z``'s own continuation replaces the
        last of them when it was not among them (and has q > 0)."""
        import torch

        flat = scores.flatten()
        finite = int(torch.isfinite(flat).sum())
        chosen = flat.topk(min(beam_width, finite)).indices
        truth = (on_true[:, None] & (tokens == self.suffix[step])).flatten()
        truth &= torch.isfinite(flat)
        if truth.any() and not truth[chosen].any():
            true_index = truth.nonzero()[0]
            chosen = torch.cat([chosen[: beam_width - 1], true_index])
        return chosen

    def finish(self, beams: _Beams, log_dist: Any) -> tuple[float, int]:
        """Natural-log sum of ``q`` over every last token of every beam that ends within the
        budget (each a distinct complete sequence), and how many there are."""
        import torch

        rows = self.next_rows(beams.rows)
        within = rows[:, :, -1] <= self.budget  # (n, K)
        n_kinds = self.kinds.shape[0]
        mask = within[:, n_kinds:].expand(-1, log_dist.shape[1]).clone()
        mask[:, self.kinds] = within[:, :n_kinds]
        scores = (beams.log_q[:, None] + log_dist).masked_fill(~mask, -math.inf)
        count = int(torch.isfinite(scores).sum())
        return float(torch.logsumexp(scores.flatten(), dim=0)), count
