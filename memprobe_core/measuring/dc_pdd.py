"""DC-PDD: token probabilities calibrated by how frequent each token is in a reference corpus
(docs/method.md §8).

Zhang et al. 2024, "Pretraining Data Detection for Large Language Models: A Divergence-based
Calibration Method" (EMNLP 2024); reference code github.com/zhang-wei-chao/DC-PDD
(``com_fre_dis.py``, ``com_det_sco.py``), also mimir's ``mimir/attacks/dc_pdd.py``. With
``p_t = exp ℓ_t`` the victim's probability of the text's ``t``-th scored token and
``f(v) = (c(v) + 1) / (C + V)`` the Laplace-smoothed frequency of token ``v`` in the reference
corpus (``c(v)`` its count, ``C`` all tokens counted, ``V`` the model's vocabulary size):

    α_t = min(p_t · log(1 / f(x_t)), a)   over the FIRST occurrence of each token of x only
    dc_pdd = mean α_t                       (higher: member; the reference reports −mean α_t)

The counts are of the victim's tokenizer (``encode(text, add_special_tokens=False)``, each
reference text's first :data:`MAX_REFERENCE_TOKENS` tokens, every occurrence counted, as
``com_fre_dis.py``) and are taken once, when an audit starts; the run's config keeps them as a
sparse ``{token id: count}`` table (:class:`TokenFrequencies`), so a resume or a Ray worker
measures with the very same frequencies without the reference texts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any

from memprobe_core.errors import UsageError
from memprobe_core.snippets.loaders import (
    MAX_FILE_BYTES,
    MAX_FILE_SNIPPETS,
    load_reference_corpus,
)
from memprobe_core.snippets.split import NONMEMBER, Snippet

DEFAULT_DC_PDD_CAP = 0.01  # a, the upper bound of α_t (com_det_sco.py's default)
MAX_REFERENCE_TOKENS = 1024  # tokens counted per reference text (com_fre_dis.py's max_tok)
SOURCES = ("corpus", "nonmembers")


@dataclass(frozen=True)
class TokenFrequencies:
    """Token counts of a reference corpus under the victim's tokenizer (stored in a run's config).

    Attributes:
        source: ``corpus`` (a file the user gave) or ``nonmembers`` (the audit's own).
        origin: what was counted, for the record (a file name, or how many non-members).
        tokenizer: the name of the tokenizer that counted (``signals.tokenizer_name``); another
            victim tokenizer cannot use the table (DC-PDD is then not measured).
        texts: reference texts counted.
        total: ``C``, tokens counted in all.
        counts: the sparse table, encoded by :func:`encode_counts` (about 2–4 bytes per distinct
            token: a 30,000-token vocabulary fits in ~100 kB).
        counted_ids: the audit's snippet ids whose texts were counted (source ``nonmembers``):
            each of them is scored against the table without its own counts (leave-one-out).
    """

    source: str
    origin: str
    tokenizer: str
    texts: int
    total: int
    counts: str
    counted_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise UsageError(
                f"DC-PDD frequency source {self.source!r} is unknown; use one of {SOURCES}"
            )
        object.__setattr__(self, "counted_ids", tuple(self.counted_ids))  # a list when stored

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TokenFrequencies:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @cached_property
    def table(self) -> dict[int, int]:
        """``{token id: count}`` (decoded once per object)."""
        return decode_counts(self.counts)

    @cached_property
    def counted(self) -> frozenset[str]:
        return frozenset(self.counted_ids)

    @property
    def digest(self) -> str:
        """A short name of the table (sha256 of its encoding), for manifests and the record."""
        return hashlib.sha256(self.counts.encode("ascii")).hexdigest()[:16]

    def summary(self) -> dict[str, Any]:
        """What a unit's manifest keeps of the table: everything but the counts themselves."""
        return {
            "source": self.source,
            "origin": self.origin,
            "tokenizer": self.tokenizer,
            "texts": self.texts,
            "total": self.total,
            "distinct": len(self.table),
            "digest": self.digest,
            "counted_ids": len(self.counted_ids),
        }


def encode_counts(counts: Mapping[int, int]) -> str:
    """A sparse count table as ASCII: ids sorted and delta-coded with their counts, as JSON,
    zlib-compressed, base64."""
    ids = sorted(int(i) for i, c in counts.items() if c > 0)
    deltas = [b - a for a, b in zip([0, *ids], ids)]
    payload = json.dumps([deltas, [int(counts[i]) for i in ids]], separators=(",", ":"))
    return base64.b64encode(zlib.compress(payload.encode("ascii"), 9)).decode("ascii")


def decode_counts(text: str) -> dict[int, int]:
    """The table :func:`encode_counts` wrote."""
    if not text:
        return {}
    deltas, counts = json.loads(zlib.decompress(base64.b64decode(text)))
    ids, at = [], 0
    for delta in deltas:
        at += int(delta)
        ids.append(at)
    return dict(zip(ids, (int(c) for c in counts)))


def reference_texts(
    path: Path,
    *,
    named: str | None = None,
    encoding: str = "utf-8",
    max_bytes: int = MAX_FILE_BYTES,
    max_texts: int = MAX_FILE_SNIPPETS,
    options: dict[str, str] | None = None,
) -> list[str]:
    """The texts of a DC-PDD reference corpus file
    (:func:`memprobe_core.snippets.loaders.load_reference_corpus`: texts only, no label read).

    Args:
        path: the file.
        named: how errors name it (the CLI gives its flag); default ``DC-PDD reference corpus
            PATH``.
        encoding / max_bytes / max_texts: how the file is read (its text encoding, the largest
            file and the most texts read).
        options: what errors call those three (default: these argument names; the CLI passes
            ``dc_pdd_encoding``, ``dc_pdd_max_bytes``, ``dc_pdd_max_texts``, shown as its flags).

    Raises:
        UsageError: the file cannot be read, or holds no text (naming it and the option that
            changes what was refused).
    """
    named = named or f"DC-PDD reference corpus {path}"
    snippets = load_reference_corpus(
        path,
        named=named,
        empty="the reference corpus has no text",
        encoding=encoding,
        max_bytes=max_bytes,
        max_texts=max_texts,
        options=options,
    )
    return [snippet.text for snippet in snippets]


def count_tokens(tokenizer: Any, texts: Iterable[str]) -> Counter[int]:
    """Every occurrence of every token in each text's first :data:`MAX_REFERENCE_TOKENS` tokens
    (``com_fre_dis.py``; the tokenizer's specials left out: a BOS is never a scored token)."""
    counts: Counter[int] = Counter()
    for text in texts:
        counts.update(
            int(i) for i in tokenizer.encode(text, add_special_tokens=False)[:MAX_REFERENCE_TOKENS]
        )
    return counts


def frequencies(
    tokenizer: Any,
    texts: Sequence[str],
    *,
    source: str,
    origin: str,
    tokenizer_name: str,
    counted_ids: Sequence[str] = (),
) -> TokenFrequencies:
    """Count ``texts`` with the victim's tokenizer into a :class:`TokenFrequencies`.

    Raises:
        UsageError: no token in any text (an empty corpus), naming ``origin``.
    """
    counts = count_tokens(tokenizer, texts)
    total = sum(counts.values())
    if total == 0:
        raise UsageError(
            f"DC-PDD reference corpus {origin}: no text in it has a token to count "
            f"({len(texts)} text(s)); give a corpus of non-empty texts"
        )
    return TokenFrequencies(
        source=source,
        origin=origin,
        tokenizer=tokenizer_name,
        texts=len(texts),
        total=total,
        counts=encode_counts(counts),
        counted_ids=tuple(counted_ids),
    )


def dc_pdd_score(
    log_probs: Sequence[float],
    token_ids: Sequence[int],
    counts: Mapping[int, int],
    total: int,
    vocab_size: int,
    cap: float,
    *,
    leave_out: Mapping[int, int] | None = None,
) -> float | None:
    """DC-PDD of one text: mean over each token's first occurrence of
    ``min(p_t · log(1 / f(x_t)), cap)``, ``f(v) = (c(v) + 1) / (C + V)``.

    Args:
        log_probs: ``ℓ_t`` of the scored tokens.
        token_ids: the scored tokens themselves (``ℓ_t`` is the log-prob of ``token_ids[t]``).
        counts / total: ``c`` and ``C``.
        vocab_size: ``V``, the model's vocabulary (its logits' width).
        cap: ``a``.
        leave_out: this text's own counts, taken out of ``c`` and ``C`` (leave-one-out: the
            text is one of the counted non-members).

    Returns:
        The score; ``None`` when no token was scored.
    """
    own = leave_out or {}
    denominator = total - sum(own.values()) + vocab_size
    seen: set[int] = set()
    alphas = []
    for lp, token in zip(log_probs, token_ids):
        if token in seen:
            continue
        seen.add(token)
        f = (counts.get(token, 0) - own.get(token, 0) + 1) / denominator
        alphas.append(min(math.exp(lp) * -math.log(f), cap))
    return sum(alphas) / len(alphas) if alphas else None


def nonmember_frequencies(
    tokenizer: Any, snippets: Sequence[Snippet], tokenizer_name: str
) -> TokenFrequencies:
    """The token counts of an audit's labelled non-members (``snippets``: the audit's).

    Raises:
        UsageError: no labelled non-member, or none with a token.
    """
    nonmembers = [s for s in snippets if s.label == NONMEMBER]
    if not nonmembers:
        raise UsageError(
            "DC-PDD's frequencies from the audit's non-members need a labelled audit with "
            f"non-members; the dataset's {len(snippets)} snippet(s) have none (give a labelled "
            "dataset, or a reference corpus file instead)"
        )
    return frequencies(
        tokenizer,
        [s.text for s in nonmembers],
        source="nonmembers",
        origin=f"the audit's {len(nonmembers)} non-member(s)",
        tokenizer_name=tokenizer_name,
        counted_ids=[s.id for s in nonmembers],
    )
