"""The victim's scoring pass over one snippet: the rows fed to a model and one forward call.

A white-box victim scores ``x``, ``lower(x)`` and any extra texts (PAC's word-swapped copies)
in ONE forward call, right-padded with an attention mask (one row when lower-casing changes
nothing); a reference model gets one call of its own. A black-box victim's server
(``Generator.scores_text``: ``/completions`` with ``echo`` and ``logprobs``) scores the same
texts in one request batch; its tokenizer is not ours, so the suffix's tokens are those that
start at or after the prefix's last character.

Conventions (docs/method.md §8):

- **First token.** When the tokenizer puts a BOS in front of a text it is kept and every token
  of ``x`` is scored (the model saw BOS-led text in training). Without one, the first token has
  no context and is not scored (:func:`model_row`).
- **Tokens.** ``x`` is ``piece.prefix_ids + piece.suffix_ids`` when the victim's tokenizer cut
  the piece; otherwise (a whitespace split) ``piece.text`` is tokenized again and the suffix
  starts after the tokens of ``piece.prefix`` (an approximate boundary, :func:`victim_ids`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from memprobe_core.membership.token_stats import TokenStats, token_stats
from memprobe_core.models import threads
from memprobe_core.models.base import Generator, LogprobsUnavailable
from memprobe_core.models.measure_cache import from_weights, tokenizer_name
from memprobe_core.snippets.split import SplitSnippet, leading_special_ids

log = logging.getLogger(__name__)


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

    threads.adapt()  # each call is one batch: torch's threads from the cores free now
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


def pad_token_id(tokenizer: Any) -> int:
    # Any valid id does: padded positions are masked and their outputs dropped.
    pad = getattr(tokenizer, "pad_token_id", None)
    return int(pad) if pad is not None else 0


class ScoringPass(NamedTuple):
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


def victim_pass(
    victim: Generator,
    piece: SplitSnippet,
    extra_texts: Sequence[str] = (),
    on_logits: LogitsConsumer | None = None,
) -> ScoringPass:
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
    logits = forward_rows(white.torch_model, rows, pad_id=pad_token_id(tok), device=white.device)
    stats = row_stats(logits[0], row, calibrate=True)
    if on_logits is not None:
        on_logits(row, logits[0])
    lower = stats.log_probs if same else row_stats(logits[1], lower_row, calibrate=False).log_probs
    start = len(rows) - len(extra_rows)
    extra = [
        row_stats(logits[start + i], r, calibrate=False).log_probs for i, r in enumerate(extra_rows)
    ]
    return ScoringPass(
        stats,
        list(lower),
        max(n_prefix - first, 0),
        extra,
        scored_ids=tuple(row[1:]),  # row_stats scores row[1:]
        vocab_size=int(logits.shape[-1]),
    )


def reference_nll(reference: Generator, text: str) -> float | None:
    """The reference model's total NLL of ``text``: from its weights (its own tokenizer, same
    BOS rule) or, for a black-box reference, from its server's log-probs (``None`` when that
    server cannot score a text)."""
    if not from_weights(reference):
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
    logits = forward_rows(white.torch_model, [row], pad_id=pad_token_id(tok), device=white.device)
    return -sum(row_stats(logits[0], row, calibrate=False).log_probs)


def server_pass(
    victim: Generator, piece: SplitSnippet, extra_texts: Sequence[str] = ()
) -> ScoringPass:
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
    return ScoringPass(TokenStats(scored[0].log_probs), list(lower), suffix_start, extra)
