"""Membership signals of one snippet: from one batched forward pass of a white-box victim, or
from the log-probs a black-box victim's server gives the snippet's tokens.

docs/method.md §8 defines them; :data:`~memprobe_core.membership.options.SIGNALS` names them. With
``ℓ_t = log p(x_t | x_<t)`` over the snippet's first ``length`` tokens ``x``:

- ``loss`` ``= −mean ℓ_t``; ``ppl = exp(loss)``; ``suffix_loss``: ``−mean ℓ_t`` over the suffix
  tokens (given the true prefix, which is the text before them);
- ``zlib`` ``= loss / bits of zlib.compress(text.encode("utf-8"))`` (Carlini et al. 2021);
- ``lowercase`` ``= loss(x) / loss(lower(x))``, ``lower(x)`` the text lower-cased and tokenized
  again;
- ``min_k``: mean of the lowest k % of ``ℓ_t`` (Shi et al. 2024);
- ``min_k_pp``: mean of the lowest k % of ``(ℓ_t − μ_t) / σ_t``, with ``μ_t`` and ``σ_t`` the mean
  and standard deviation of ``log p(z | x_<t)`` for ``z ∼ p(· | x_<t)`` (Zhang et al. 2024);
- ``ref_ratio`` (with a reference model): victim total NLL per UTF-8 byte of the text minus the
  reference's, so the two tokenizers may differ.
- ``dc_pdd`` (with token frequencies of a reference corpus, :mod:`.dc_pdd`) and ``pac`` (with
  ``pac_augmentations``, :mod:`.pac`): from the same pass; PAC's word-swapped copies are extra
  rows of its one forward call (or extra texts of the server's requests).

Conventions:

- **First token.** When the tokenizer has a BOS token it is put in front and every token of
  ``x`` is scored (the model saw BOS-led text in training). Without one, the first token has no
  context and is not scored: ``tokens`` is then ``len(x) − 1``.
- **k %.** ``max(1, floor(n · k / 100))`` of the ``n`` scored tokens: the truncation of the
  reference implementations (``int(len * ratio)``), but never zero tokens.
- **Tokens.** ``x`` is ``piece.prefix_ids + piece.suffix_ids`` when the victim's tokenizer cut
  the piece; otherwise (a whitespace split) ``piece.text`` is tokenized again and the suffix
  starts after the tokens of ``piece.prefix`` (an approximate boundary).

Black-box victims (``Generator.scores_text``: an OpenAI-compatible server that answers
``/completions`` with ``echo`` and ``logprobs``) get every signal but Min-K%++ from two requests
(x and lower(x)); the server's tokenizer is not ours, so the suffix's tokens are those that
start at or after the prefix's last character, and the first token is scored when the server
puts a BOS in front (vLLM does), as in the white-box rule. ``scored_by`` records which way.

Cost: ``x`` and ``lower(x)`` go through the victim together, right-padded with an attention
mask, in one forward call (one row when lower-casing changes nothing); the reference, when
given, gets one forward call of its own. Statistics are computed from float32 log-softmax. The
five methods of an audit share a snippet and length, so results are cached (:func:`clear_cache`).
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from memprobe_core.membership.dc_pdd import count_tokens, dc_pdd_score
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.membership.pac import augment, pac_score
from memprobe_core.membership.recall import (
    conditioned_row,
    is_prefix_text,
    prefix_text,
    recall_scores,
)
from memprobe_core.models.base import Generator, LogprobsUnavailable
from memprobe_core.snippets.split import SplitSnippet, leading_special_ids

log = logging.getLogger(__name__)

# Positions whose (T, V) float32 temporaries are alive at once: bounds the memory of the
# statistics on a large vocabulary (Gemma-3: 262k entries, ~1 MiB per position and temporary).
_STATS_CHUNK = 64
CACHE_SIZE = 256


@dataclass(frozen=True)
class TokenStats:
    """Per-token statistics of one sequence, one entry per predicted token.

    Attributes:
        log_probs: ``ℓ_t = log p(x_t | x_<t)``.
        mu: ``μ_t``, the expected log-prob under the model's own next-token distribution
            (``None`` when not asked for).
        sigma: ``σ_t``, the standard deviation of that log-prob (``None`` when not asked for).
    """

    log_probs: tuple[float, ...]
    mu: tuple[float, ...] | None = None
    sigma: tuple[float, ...] | None = None


# --- statistics from logits (pure) ------------------------------------------------------------


def token_stats(logits: Any, targets: Any, *, calibrate: bool = True) -> TokenStats:
    """Statistics of ``targets`` under ``logits`` (float32, whatever the logits' dtype).

    Args:
        logits: ``(T, V)`` tensor; row ``t`` is the model's prediction for ``targets[t]``.
        targets: ``(T,)`` integer tensor of the tokens that came.
        calibrate: also compute ``μ_t`` and ``σ_t`` (Min-K%++).
    """
    import torch

    lps, mus, sigmas = [], [], []
    for start in range(0, int(targets.shape[0]), _STATS_CHUNK):
        block = logits[start : start + _STATS_CHUNK].float()  # (C, V)
        tgt = targets[start : start + _STATS_CHUNK].long()  # (C,)
        logp = torch.log_softmax(block, dim=-1)  # (C, V)
        lps.append(logp.gather(-1, tgt[:, None])[:, 0])
        if calibrate:
            mu, sigma = _moments(logp)
            mus.append(mu)
            sigmas.append(sigma)
    if not lps:
        return TokenStats((), () if calibrate else None, () if calibrate else None)
    return TokenStats(
        tuple(torch.cat(lps).tolist()),
        tuple(torch.cat(mus).tolist()) if calibrate else None,
        tuple(torch.cat(sigmas).tolist()) if calibrate else None,
    )


def _moments(logp: Any) -> tuple[Any, Any]:
    """``μ`` and ``σ`` of ``log p(z)`` for ``z ∼ p``, per row of log-probs ``(C, V)`` (consumed).

    Few passes over the vocabulary, in place where possible: on Gemma-3's 262k entries this is
    most of the statistics' cost. ``σ² = E[(log p)²] − μ²`` in float32 loses ~1e-4 absolute to
    cancellation, far below the spread Min-K%++ ranks by.
    """
    import torch

    # A masked entry (log p = −inf, p = 0) would give 0 · (−inf) = NaN. Below −1e4, exp()
    # is 0 in float32 anyway, so clamping there changes no p and removes the NaN.
    logp.clamp_(min=-1e4)
    q = logp.exp().mul_(logp)  # p · log p, (C, V)
    mu = q.sum(-1)  # (C,)
    second = torch.linalg.vecdot(q, logp)  # E[(log p)²], (C,)
    return mu, (second - mu * mu).clamp_min(0.0).sqrt()


def min_k_count(n: int, percent: float) -> int:
    """How many of ``n`` scored tokens "the lowest k %" takes: ``max(1, floor(n·k/100))``."""
    return max(1, math.floor(n * float(percent) / 100.0 + 1e-9))


def mean_lowest(values: Sequence[float], percent: float) -> float:
    """Mean of the lowest ``percent`` % of ``values`` (at least one value)."""
    if not values:
        raise ValueError("mean_lowest of no values: nothing was scored")
    count = min_k_count(len(values), percent)
    return sum(sorted(values)[:count]) / count


def calibrated(stats: TokenStats) -> list[float]:
    """Min-K%++'s per-token scores ``(ℓ_t − μ_t) / σ_t``.

    A one-hot prediction has ``σ_t = 0``; its score is then 0 (the token is neither more nor
    less likely than the model's expectation), never a division by zero.
    """
    if stats.mu is None or stats.sigma is None:
        raise ValueError("these statistics were computed without calibrate=True")
    return [
        (lp - mu) / sigma if sigma > 0 else 0.0
        for lp, mu, sigma in zip(stats.log_probs, stats.mu, stats.sigma)
    ]


def zlib_bits(text: str) -> int:
    """Bits of ``zlib.compress(text.encode("utf-8"))`` (Carlini et al. 2021's zlib entropy)."""
    return 8 * len(zlib.compress(text.encode("utf-8")))


# --- signals from statistics (pure) -----------------------------------------------------------


def _mean_nll(log_probs: Sequence[float]) -> float:
    return -sum(log_probs) / len(log_probs)


def signals_from_stats(
    stats: TokenStats,
    *,
    text: str,
    suffix_start: int,
    min_k_percent: float,
    lower_log_probs: Sequence[float] | None = None,
    reference_nll: float | None = None,
) -> dict[str, Any]:
    """The membership signals of one text from its token statistics.

    Args:
        stats: the victim's statistics of the text's scored tokens (without ``μ``/``σ``, from
            a server's log-probs, Min-K%++ is ``None``).
        text: the text itself (zlib bits, UTF-8 bytes of the reference ratio).
        suffix_start: index into ``stats`` of the first suffix token.
        min_k_percent: k of Min-K% and Min-K%++.
        lower_log_probs: the victim's ``ℓ_t`` of the lower-cased text (``None``: no lowercase).
        reference_nll: the reference model's total NLL of the text (``None``: no ref_ratio).

    Returns:
        ``{signal name: value, "tokens": scored tokens, "min_k_percent": k}``; a value that is
        undefined for this text (e.g. an empty suffix) is ``None``.
    """
    lps = stats.log_probs
    loss = _mean_nll(lps)
    suffix = lps[suffix_start:]
    lower_loss = _mean_nll(lower_log_probs) if lower_log_probs else None
    out: dict[str, Any] = {
        "loss": loss,
        "ppl": math.exp(
            min(loss, 700.0)
        ),  # exp(700) is near float64's top; a loss that high is noise
        "suffix_loss": _mean_nll(suffix) if suffix else None,
        "zlib": loss / zlib_bits(text),
        "lowercase": loss / lower_loss if lower_loss else None,
        "min_k": mean_lowest(lps, min_k_percent),
        # Min-K%++ needs the whole next-token distribution: only a forward pass has it.
        "min_k_pp": mean_lowest(calibrated(stats), min_k_percent) if stats.mu is not None else None,
    }
    if reference_nll is not None:
        n_bytes = len(text.encode("utf-8"))
        out["ref_ratio"] = (-sum(lps) - reference_nll) / n_bytes
    out["tokens"] = len(lps)
    out["min_k_percent"] = float(min_k_percent)
    return out


# --- model inputs and the forward pass --------------------------------------------------------


def tokenizer_name(tokenizer: Any) -> str:
    """The name ``memprobe_core.snippets.split.split`` records for a tokenizer (to tell whether it cut a piece)."""
    name = getattr(tokenizer, "name_or_path", None) or getattr(tokenizer, "name", None)
    return str(name or type(tokenizer).__name__)


def model_row(tokenizer: Any, ids: Sequence[int], text: str) -> tuple[list[int], int]:
    """The ids fed to the model for ``text`` (encoded without specials as ``ids``), and the
    index in ``ids`` of the first scored token (docs/method.md §8).

    What the tokenizer puts in front of a text by default comes first, as in training, serving
    and mimir (``tokenizer(text)``): with a BOS every text token is scored (index 0); without
    one (GPT-2, SmolLM2, which define a BOS they never add) the first token has nothing to be
    predicted from and is not scored (index 1). Prepending any defined BOS changed every
    token's context on such models: loss differed from mimir's by up to 0.50.
    """
    # Read off ``text`` itself (not ``ids``, which a split may have cut from a longer text).
    plain = tokenizer.encode(text, add_special_tokens=False)
    front = leading_special_ids(tokenizer, text, plain)
    if front:
        return [*front, *ids], 0
    return list(ids), 1


def victim_ids(tokenizer: Any, piece: SplitSnippet) -> tuple[list[int], int]:
    """The text's ids under the victim's tokenizer and how many of them are prefix."""
    if piece.tokenizer_name == tokenizer_name(tokenizer):
        return [*piece.prefix_ids, *piece.suffix_ids], len(piece.prefix_ids)
    # Cut by another tokenizer (whitespace split): tokenize the text again; the suffix starts
    # after the prefix's own tokens (the boundary may move by a token where a word is merged).
    ids = list(tokenizer.encode(piece.text, add_special_tokens=False))
    n_prefix = len(tokenizer.encode(piece.prefix, add_special_tokens=False))
    return ids, min(n_prefix, max(len(ids) - 1, 0))


def forward_rows(model: Any, rows: Sequence[Sequence[int]], *, pad_id: int, device: Any) -> Any:
    """Logits of every row in ONE forward call (right-padded, with an attention mask).

    Right padding keeps each row's positions 0..len−1 as when it runs alone, and a causal model
    never attends from a real token to a pad after it, so padded rows score as unpadded ones.

    Returns:
        ``(B, T_max, V)`` logits; row ``i``'s own are ``[:len(rows[i])]``.
    """
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), int(pad_id), dtype=torch.long)  # (B, T)
    mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, T)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(list(row), dtype=torch.long)
        mask[i, : len(row)] = 1
    out = model(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False)
    return out.logits


def row_stats(logits: Any, row: Sequence[int], *, calibrate: bool) -> TokenStats:
    """Statistics of row ``row`` from its slice of ``forward_rows``' logits ``(T_max, V)``."""
    import torch

    targets = torch.tensor(list(row[1:]), dtype=torch.long, device=logits.device)  # (T−1,)
    return token_stats(logits[: len(row) - 1], targets, calibrate=calibrate)


def _pad_id(tokenizer: Any) -> int:
    # Any valid id does: padded positions are masked and their outputs dropped.
    pad = getattr(tokenizer, "pad_token_id", None)
    return int(pad) if pad is not None else 0


class _Pass(NamedTuple):
    """What one scoring pass of the victim gave (``[0]`` is ``stats``, as the older tuple).

    Attributes:
        stats: statistics of x's scored tokens. lower: ``ℓ`` of lower(x).
        suffix_start: index into ``stats`` of the first suffix token.
        extra: ``ℓ`` of each extra text (PAC's word-swapped copies), in the order given.
        scored_ids: the token ids ``stats`` scores (DC-PDD; ``None`` from a server, whose
            tokenizer is not ours).
        vocab_size: the width of the victim's logits (DC-PDD's ``V``; ``None`` from a server).
    """

    stats: TokenStats
    lower: list[float]
    suffix_start: int
    extra: list[tuple[float, ...]]
    scored_ids: tuple[int, ...] | None = None
    vocab_size: int | None = None


# Receives x's row and that row's logits (T_max, V) from the signals' forward pass, so another
# measurement over the same row needs no pass of its own (probabilistic extraction's p_z).
LogitsConsumer = Callable[[Sequence[int], Any], None]


def _victim_pass(
    victim: Generator,
    piece: SplitSnippet,
    extra_texts: Sequence[str] = (),
    on_logits: LogitsConsumer | None = None,
) -> _Pass:
    """x, lower(x) and ``extra_texts`` through the victim in one forward call; ``on_logits``
    gets x's row and its logits."""
    white: Any = victim  # checked by _usable: torch_model, tokenizer and device are there
    tok = white.tokenizer
    ids, n_prefix = victim_ids(tok, piece)
    row, first = model_row(tok, ids, piece.text)
    lower_text = piece.text.lower()
    lower_row, _ = model_row(tok, tok.encode(lower_text, add_special_tokens=False), lower_text)
    same = lower_row == row  # nothing to lower-case: one row does
    extra_rows = [
        model_row(tok, tok.encode(t, add_special_tokens=False), t)[0] for t in extra_texts
    ]
    rows = ([row] if same else [row, lower_row]) + extra_rows
    logits = forward_rows(white.torch_model, rows, pad_id=_pad_id(tok), device=white.device)
    stats = row_stats(logits[0], row, calibrate=True)
    if on_logits is not None:
        on_logits(row, logits[0])
    lower = stats.log_probs if same else row_stats(logits[1], lower_row, calibrate=False).log_probs
    start = len(rows) - len(extra_rows)
    extra = [
        row_stats(logits[start + i], r, calibrate=False).log_probs for i, r in enumerate(extra_rows)
    ]
    return _Pass(
        stats,
        list(lower),
        max(n_prefix - first, 0),
        extra,
        scored_ids=tuple(row[1:]),  # row_stats scores row[1:]
        vocab_size=int(logits.shape[-1]),
    )


def _reference_nll(reference: Generator, text: str) -> float | None:
    """The reference model's total NLL of ``text``: from its weights (its own tokenizer, same
    BOS rule) or, for a black-box reference, from its server's log-probs (``None`` when that
    server cannot score a text)."""
    if not _usable(reference):
        try:
            return -sum(reference.text_logprobs([text])[0].log_probs)
        except LogprobsUnavailable as exc:  # the victim's signals stand without the ratio
            log.warning("reference ratio not measured: %s", exc)
            return None
    white: Any = reference
    tok = white.tokenizer
    row, _ = model_row(tok, tok.encode(text, add_special_tokens=False), text)
    if len(row) < 2:
        return 0.0
    logits = forward_rows(white.torch_model, [row], pad_id=_pad_id(tok), device=white.device)
    return -sum(row_stats(logits[0], row, calibrate=False).log_probs)


def _server_pass(victim: Generator, piece: SplitSnippet, extra_texts: Sequence[str] = ()) -> _Pass:
    """x, lower(x) and ``extra_texts`` scored by a black-box victim's server in one request
    batch (stats of x without μ/σ). The suffix's tokens are those starting at or after the
    prefix's length in characters (the server's tokenizer is not ours)."""
    text, lower_text = piece.text, piece.text.lower()
    texts = [text] if lower_text == text else [text, lower_text]
    scored = victim.text_logprobs([*texts, *extra_texts])
    boundary = len(piece.prefix)
    suffix_start = sum(1 for start in scored[0].offsets if start < boundary)
    lower = scored[len(texts) - 1].log_probs
    extra = [tuple(s.log_probs) for s in scored[len(texts) :]]
    return _Pass(TokenStats(scored[0].log_probs), list(lower), suffix_start, extra)


# --- the cache and the entry point ------------------------------------------------------------


class MeasureCache:
    """A small thread-safe LRU of computed measurements (signals, p_z, greedy matches).

    The five methods of an audit run on the same snippet and length, and each unit asks for the
    signals: caching makes an audit pay one victim forward per (snippet, length), not five.
    Units may run on worker threads (dashboard jobs, audits), hence the lock; two threads that
    miss the same key at once both compute it (the same value), which is cheaper than holding
    the lock across a forward pass.
    """

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                return None
            self._items.move_to_end(key)
            return dict(value)

    def put(self, key: tuple[Any, ...], value: dict[str, Any]) -> None:
        with self._lock:
            self._items[key] = dict(value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_CACHE = MeasureCache()


def clear_cache() -> None:
    """Forget every cached result (benchmarks time the computation itself)."""
    _CACHE.clear()


def model_key(model: Generator | None) -> Any:
    # A weak reference to the torch model: the cache never keeps a model alive, and a new model
    # that reuses a freed one's id() never matches the dead reference (they compare unequal).
    # Variants of one HFGenerator share the torch model and tokenizer, hence their signals.
    # A black-box model is keyed by the Generator itself (its server does the scoring).
    if model is None:
        return None
    white: Any = model
    return weakref.ref(white.torch_model if _usable(model) else model)


def _usable(model: Generator | None) -> bool:
    """Whether ``model`` is scored from its weights (a white-box model with its tokenizer)."""
    return (
        model is not None
        and model.white_box
        and getattr(model, "torch_model", None) is not None
        and model.tokenizer is not None
    )


def _scorable(model: Generator | None) -> bool:
    """Whether ``model`` can be scored at all: from its weights or by its server."""
    return model is not None and (_usable(model) or model.scores_text)


def compute_signals(
    victim: Generator,
    piece: SplitSnippet,
    options: MeasureOptions,
    reference: Generator | None = None,
    *,
    on_logits: LogitsConsumer | None = None,
) -> dict[str, Any]:
    """The membership signals of ``piece`` on ``victim`` (docs/method.md §8).

    Args:
        victim: the audited model: a white-box one (``hf``) is scored from one forward pass; a
            black-box one whose server returns a prompt's log-probs (``openai`` with ``echo``)
            is scored by its server (every signal but Min-K%++, which needs the whole
            next-token distribution).
        piece: the snippet cut at its length (by the victim's tokenizer, normally).
        options: ``signals`` on/off and ``min_k_percent``.
        reference: a second model for ``ref_ratio`` (its tokenizer may differ), scored the same
            two ways; one that can be scored neither way is skipped with a warning.
        on_logits: called with x's row and its logits when a white-box pass runs (not when
            the signals come from the cache).

    Returns:
        ``{name: value}`` for the names in ``SIGNALS`` (``ref_ratio`` only with a reference),
        plus ``tokens`` (scored tokens), ``min_k_percent`` and ``scored_by`` (``"forward"`` or
        ``"server"``); ``{"not_measured": why}`` when the victim's server turned out unable to
        score a text; ``{}`` when not measured (signals off, a black-box victim with no
        log-probs, or no token to score).
    """
    if not options.signals or not _scorable(victim):
        return {}
    if reference is not None and not _scorable(reference):
        log.warning(
            "reference model %s gives no log-probs (neither weights nor a scoring server); "
            "the reference ratio is not measured",
            getattr(reference, "model_id", reference),
        )
        reference = None
    key = (
        model_key(victim),
        model_key(reference),
        piece.text,
        piece.prefix,
        piece.prefix_ids,
        piece.suffix_ids,
        float(options.min_k_percent),
        options.recall_member_prefix,
        options.recall_nonmember_prefix,
        options.recall_prefix_ids,
        # DC-PDD: the table (its str hash is cached), its cap, and whether this snippet is one
        # of the counted non-members (scored leave-one-out); PAC's copies and k's.
        options.dc_pdd_frequencies,
        float(options.dc_pdd_cap),
        options.dc_pdd_frequencies is not None
        and piece.snippet.id in options.dc_pdd_frequencies.counted,
        options.pac_augmentations,
        float(options.pac_swap_rate),
        float(options.pac_low_percent),
        float(options.pac_high_percent),
    )
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    try:
        result = _measure(victim, piece, options, reference, on_logits)
    except LogprobsUnavailable as exc:  # the victim's server cannot score a text: say why
        log.warning("membership signals of %s not measured: %s", piece.snippet.id, exc)
        result = {"not_measured": str(exc)}
    if result:
        _CACHE.put(key, result)
    return result


def _non_finite(log_probs: Sequence[float], what: str) -> str | None:
    """Why signals computed from ``log_probs`` would mean nothing (``None``: all finite).

    A −inf (a token the model gives probability 0, or a server's ``-Infinity``) makes the loss
    infinite, and AUROC over infinities ranks ties arbitrarily; NaN poisons every mean. Such a
    text is "not measured", with the reason, rather than a number.
    """
    for position, value in enumerate(log_probs):
        if not math.isfinite(value):
            return (
                f"the victim gave token {position + 1} of {what} a log-probability of {value} "
                "(not a finite number), so its loss and every signal would be meaningless"
            )
    return None


def _measure(
    victim: Generator,
    piece: SplitSnippet,
    options: MeasureOptions,
    reference: Generator | None,
    on_logits: LogitsConsumer | None = None,
) -> dict[str, Any]:
    import torch

    with torch.inference_mode():
        white = _usable(victim)
        # PAC's word-swapped copies ride in the same forward call (or request batch).
        copies = augment(piece.text, options.pac_augmentations, options.pac_swap_rate)
        if white:
            scored = _victim_pass(victim, piece, copies, on_logits)
        else:
            scored = _server_pass(victim, piece, copies)
        stats, lower, suffix_start = scored.stats, scored.lower, scored.suffix_start
        if not stats.log_probs:
            log.warning("snippet %s: no token to score; signals not measured", piece.snippet.id)
            return {}
        broken = _non_finite(stats.log_probs, "the text") or _non_finite(lower, "its lower case")
        if broken:
            log.warning("membership signals of %s not measured: %s", piece.snippet.id, broken)
            return {"not_measured": broken}
        ref_nll = _reference_nll(reference, piece.text) if reference is not None else None
        if ref_nll is not None and not math.isfinite(ref_nll):
            log.warning(
                "reference ratio of %s not measured: its NLL is %s", piece.snippet.id, ref_nll
            )
            ref_nll = None
    out = signals_from_stats(
        stats,
        text=piece.text,
        suffix_start=suffix_start,
        min_k_percent=options.min_k_percent,
        lower_log_probs=lower,
        reference_nll=ref_nll,
    )
    if options.recall_nonmember_prefix and not is_prefix_text(options, piece.snippet.id):
        with torch.inference_mode():
            conditioned = (_conditioned_forward if white else _conditioned_server)(
                victim, piece, options
            )
        out.update(recall_scores(-out["loss"], *conditioned))
    if options.dc_pdd_frequencies is not None:
        out["dc_pdd"] = _dc_pdd(victim, piece, options, scored)
    if options.pac_augmentations:
        out["pac"] = _pac(piece, options, scored)
    out["scored_by"] = "forward" if white else "server"
    return out


_WARNED: set[str] = set()


def _not_measured(signal: str, why: str) -> None:
    """Log once per process why ``signal`` is ``None`` (every unit of a run has the same reason)."""
    message = f"{signal} not measured: {why}"
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning("%s", message)


def _dc_pdd(
    victim: Generator, piece: SplitSnippet, options: MeasureOptions, scored: _Pass
) -> float | None:
    """DC-PDD from the pass's own log-probs and token ids (docs/method.md §8); ``None``, the
    reason logged, where the table cannot be used."""
    freq = options.dc_pdd_frequencies
    assert freq is not None
    if scored.scored_ids is None or scored.vocab_size is None:
        _not_measured(
            "DC-PDD",
            "a black-box victim's server tokenizes with its own vocabulary, which the "
            "reference corpus was not counted with",
        )
        return None
    tok: Any = victim.tokenizer
    if tokenizer_name(tok) != freq.tokenizer:
        _not_measured(
            "DC-PDD",
            f"the reference corpus was counted with tokenizer {freq.tokenizer!r}, the victim's "
            f"is {tokenizer_name(tok)!r}",
        )
        return None
    # A counted non-member is scored against the other texts' counts only (leave-one-out).
    own = count_tokens(tok, [piece.snippet.text]) if piece.snippet.id in freq.counted else None
    return dc_pdd_score(
        scored.stats.log_probs,
        scored.scored_ids,
        freq.table,
        freq.total,
        scored.vocab_size,
        options.dc_pdd_cap,
        leave_out=own,
    )


def _pac(piece: SplitSnippet, options: MeasureOptions, scored: _Pass) -> float | None:
    """PAC from x's log-probs and its copies' (``None`` where one is empty or not finite)."""
    for i, lps in enumerate(scored.extra):
        if not lps or _non_finite(lps, f"PAC's copy {i + 1}"):
            _not_measured(
                "PAC", f"snippet {piece.snippet.id}: a word-swapped copy has no finite score"
            )
            return None
    return pac_score(
        scored.stats.log_probs, scored.extra, options.pac_low_percent, options.pac_high_percent
    )


def _prefixes(options: MeasureOptions, text: str) -> list[str]:
    """ReCaLL's non-member prefix, then Con-ReCall's member prefix when there is one, for
    ``text``."""
    texts = [prefix_text(options.recall_nonmember_prefix, len(text))]
    if options.recall_member_prefix:
        texts.append(prefix_text(options.recall_member_prefix, len(text)))
    return texts


def _pair(values: list[float]) -> tuple[float, float | None]:
    return values[0], values[1] if len(values) > 1 else None


def _conditioned_forward(
    victim: Generator, piece: SplitSnippet, options: MeasureOptions
) -> tuple[float, float | None]:
    """Mean log-prob of the text's tokens after each prefix, from the victim's weights: both
    prefixed rows in one forward call."""
    white: Any = victim
    tok = white.tokenizer
    ids, _ = victim_ids(tok, piece)
    prefixes = _prefixes(options, piece.text)
    rows, starts = zip(*(conditioned_row(tok, prefix, ids) for prefix in prefixes))
    logits = forward_rows(white.torch_model, rows, pad_id=_pad_id(tok), device=white.device)
    means = []
    for i, (row, start) in enumerate(zip(rows, starts)):
        scored = row_stats(logits[i], row, calibrate=False).log_probs[start - 1 :]  # x's tokens
        means.append(sum(scored) / len(scored))
    return _pair(means)


def _conditioned_server(
    victim: Generator, piece: SplitSnippet, options: MeasureOptions
) -> tuple[float, float | None]:
    """The same from a black-box victim's server: the text's tokens are those starting at or
    after the prefix's length in characters."""
    prefixes = _prefixes(options, piece.text)
    scored = victim.text_logprobs([prefix + piece.text for prefix in prefixes])
    means = []
    for prefix, result in zip(prefixes, scored):
        mine = [lp for lp, at in zip(result.log_probs, result.offsets) if at >= len(prefix)]
        means.append(sum(mine) / len(mine))
    return _pair(means)
