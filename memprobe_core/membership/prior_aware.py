"""The prior-aware check's teacher-forced passes on a white-box victim (the statistic, its
thresholds and verdicts: :mod:`memprobe_core.measuring.prior_aware`; docs/method.md,
"Prior-aware check").

The unrelated prefixes are the first as many tokens as the own prefix of other built-in snippets
of the snippet's domain (every domain when it has too few), so every row of a check has one
length: no padding, and only the positions that predict a suffix token go through the
vocabulary projection. The check of a snippet and length is the same for every method of a
unit: it is measured once per victim.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any

from memprobe_core.measuring.prior_aware import PAM_MIN_PREFIXES, PriorAwareCheck
from memprobe_core.membership.scoring_pass import model_row, victim_ids
from memprobe_core.models.base import Generator
from memprobe_core.models.measure_cache import MeasureCache, from_weights, model_key
from memprobe_core.records import VerbatimRecord
from memprobe_core.secrets import redact_secrets
from memprobe_core.snippets.split import SplitSnippet

log = logging.getLogger(__name__)

# Rows per forward call: with a 262k vocabulary, 8 rows of 50 suffix positions keep the logits
# under half a gigabyte in float32.
_ROWS_PER_CALL = 8

BLACK_BOX = (
    "the victim exposes no weights: the check needs the suffix's log-probs after unrelated "
    "prefixes, which its server does not score"
)

_CACHE = MeasureCache()


def clear_cache() -> None:
    """Forget every cached check (benchmarks time the computation itself)."""
    _CACHE.clear()


def suffix_log_likelihoods(
    model: Any, rows: Sequence[Sequence[int]], n_suffix: int, *, device: Any = None
) -> list[float]:
    """``log P(suffix | row's prefix)`` of each row, where every row has the same length and ends
    in the same ``n_suffix`` suffix tokens (so no padding, and only the positions predicting a
    suffix token go through the vocabulary projection), in calls of :data:`_ROWS_PER_CALL` rows."""
    import torch

    out: list[float] = []
    for first in range(0, len(rows), _ROWS_PER_CALL):
        batch = torch.tensor([list(r) for r in rows[first : first + _ROWS_PER_CALL]], device=device)
        with torch.inference_mode():
            logits = model(
                input_ids=batch[:, :-1], use_cache=False, logits_to_keep=n_suffix
            ).logits[:, -n_suffix:]  # (B, n, V): position i predicts suffix token i
        log_probs = logits.float().log_softmax(-1)
        targets = batch[:, -n_suffix:].to(log_probs.device)  # (B, n)
        picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, n)
        out += [float(v) for v in picked.sum(-1).cpu()]
    return out


def check_rows(
    front: Sequence[int],
    own_prefix: Sequence[int],
    suffix: Sequence[int],
    unrelated_prefixes: Sequence[Sequence[int]],
) -> list[list[int]]:
    """The rows of one check: ``front`` (what the tokenizer puts before a text: a BOS, or
    nothing), a prefix, the suffix; the own prefix's row first, then one per unrelated prefix.

    Raises:
        ValueError: no suffix token, or an unrelated prefix whose length differs from the own
            prefix's (the rows must have one length: no padding).
    """
    if not suffix or not (front or own_prefix):
        raise ValueError("the check needs a suffix token with something before it")
    for prefix in unrelated_prefixes:
        if len(prefix) != len(own_prefix):
            raise ValueError(
                f"an unrelated prefix has {len(prefix)} tokens, the own prefix {len(own_prefix)}: "
                "cut every unrelated prefix to the own prefix's length"
            )
    return [[*front, *prefix, *suffix] for prefix in [own_prefix, *unrelated_prefixes]]


def prior_aware_check(
    model: Any,
    front: Sequence[int],
    own_prefix: Sequence[int],
    suffix: Sequence[int],
    unrelated_prefixes: Sequence[Sequence[int]],
    *,
    device: Any = None,
) -> PriorAwareCheck:
    """The check of ``suffix`` after ``own_prefix`` against after each of ``unrelated_prefixes``
    (each as long as the own prefix), from teacher-forced passes of ``model``.

    Raises:
        ValueError: no unrelated prefix (see also :func:`check_rows`).
    """
    if not unrelated_prefixes:
        raise ValueError("the check needs at least one unrelated prefix")
    rows = check_rows(front, own_prefix, suffix, unrelated_prefixes)
    values = suffix_log_likelihoods(model, rows, len(suffix), device=device)
    return PriorAwareCheck(own=values[0], unrelated=tuple(values[1:]), tokens=len(suffix))


def unrelated_prefixes(
    tokenizer: Any, piece: SplitSnippet, prefix_len: int, k: int
) -> tuple[list[list[int]], str]:
    """The first ``prefix_len`` tokens of up to ``k`` built-in snippets of ``piece``'s domain
    other than it (every domain when the domain has fewer than ``k`` long enough), a sample
    seeded by the snippet's id; and a line saying where they came from."""
    from memprobe_core.snippets.corpus import demo_corpus  # the corpus is read only when asked

    own = piece.snippet
    domain = own.domain

    def heads(snippets: Sequence[Any]) -> list[list[int]]:
        found = []
        for snippet in snippets:
            if snippet.id == own.id or snippet.text == own.text:
                continue  # a duplicate of the snippet is not an unrelated prefix
            ids = tokenizer.encode(snippet.text, add_special_tokens=False)
            if len(ids) >= prefix_len:
                found.append(list(ids[:prefix_len]))
        return found

    corpus = demo_corpus()
    pool = heads([s for s in corpus if s.domain == domain])
    source = f"built-in {domain} snippets"
    if len(pool) < k:
        pool = heads(corpus)
        source = f"built-in snippets of every domain (too few of domain {domain})"
    if len(pool) > k:
        kept = sorted(random.Random(own.id).sample(range(len(pool)), k))
        pool = [pool[i] for i in kept]
    return pool, f"{len(pool)} {source}"


def measure_prior_aware(victim: Generator, piece: SplitSnippet, k: int) -> VerbatimRecord:
    """The ``pam_*`` keys for ``piece`` on ``victim`` with ``k`` unrelated prefixes.

    Not measurable (a black-box victim, too few unrelated prefixes, no suffix token) or failed
    (e.g. out of memory): ``{"pam_not_measured": why}``, logged; a side measurement never costs
    the unit its result. The same snippet and length on the same victim is measured once.
    """
    if not from_weights(victim):
        return {"pam_not_measured": BLACK_BOX}
    key = (model_key(victim), piece.text, piece.prefix_ids, piece.suffix_ids, k)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    try:
        record = _measure(victim, piece, k)
    except Exception as exc:  # recorded: the unit's result stands without the check
        message = redact_secrets(f"{type(exc).__name__}: {exc}")
        log.warning("prior-aware check of %s not measured: %s", piece.snippet.id, message)
        return {"pam_not_measured": message}
    if "pam_not_measured" not in record:
        _CACHE.put(key, record)
    return record


def _measure(victim: Any, piece: SplitSnippet, k: int) -> VerbatimRecord:
    tokenizer = victim.tokenizer
    # p_z's row: the split's own ids, a BOS in front where the tokenizer puts one.
    ids, n_prefix = victim_ids(tokenizer, piece)
    row, _ = model_row(tokenizer, ids, piece.text)
    front = row[: len(row) - len(ids)]
    if n_prefix <= 0 or n_prefix >= len(ids):
        return {"pam_not_measured": "the split has no prefix token or no suffix token"}
    prefixes, source = unrelated_prefixes(tokenizer, piece, n_prefix, k)
    if len(prefixes) < PAM_MIN_PREFIXES:
        return {
            "pam_not_measured": f"fewer than {PAM_MIN_PREFIXES} built-in snippets have the "
            f"{n_prefix} tokens of an unrelated prefix"
        }
    check = prior_aware_check(
        victim.torch_model,
        front,
        ids[:n_prefix],
        ids[n_prefix:],
        prefixes,
        device=victim.device,
    )
    return check.to_record(source)
