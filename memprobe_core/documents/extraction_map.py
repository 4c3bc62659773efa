"""The extraction map of a document: for every window, what greedy decoding writes back and how
likely a sampler is to write the whole suffix (Cooper et al. 2025; docs/method.md §19).

Each window is scored by ONE teacher-forced forward pass over ``BOS? + prefix + suffix`` (the
machinery of the ``verbatim`` method, docs/method.md §9, and of p_z, §14):

- the argmax before each suffix token is what greedy decoding writes there given the suffix so
  far, so the leading run where argmax and suffix agree is exactly the run greedy decoding
  reproduces (``match_tokens``); the window is **extractable** when that run is the whole suffix;
- the sampler's log-probability of each suffix token, summed, is ``log10 p_z`` under the named
  scheme (transformers' own warpers), and ``n_at_p`` the samples needed.

All windows of a map have the same length, so a batch has no padding and every row computes
what it would alone. Only the suffix positions go through the vocabulary projection
(``logits_to_keep``), which matters for Gemma's 262k-token vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from memprobe_core.documents.windows import Window
from memprobe_core.membership.extraction_probability import extraction_record
from memprobe_core.membership.sampler import SamplingScheme, sampler_log_probs
from memprobe_core.records import VerbatimRecord


@dataclass(frozen=True)
class WindowScore:
    """What one window gave.

    Attributes:
        index / start: the window (its first prefix token in the document's ids).
        suffix_start: its first suffix token's index in the document's ids.
        suffix_tokens: tokens asked for.
        match_tokens: leading suffix tokens greedy decoding writes back (0 … suffix_tokens).
        extractable: all of them.
        greedy_ids: what greedy decoding writes, up to and including its first token that
            differs from the suffix (everything it writes when the window is extractable).
        pz: the window's probabilistic-extraction record (``log10_p_z``, ``n_at_p``, …,
            :func:`memprobe_core.membership.extraction_probability.extraction_record`).
    """

    index: int
    start: int
    suffix_start: int
    suffix_tokens: int
    match_tokens: int
    extractable: bool
    greedy_ids: tuple[int, ...]
    pz: VerbatimRecord

    def to_record(self) -> VerbatimRecord:
        """The unit's stored ``verbatim`` dict."""
        record: VerbatimRecord = {
            "window_start": self.start,
            "suffix_start": self.suffix_start,
            "suffix_tokens": self.suffix_tokens,
            "match_tokens": self.match_tokens,
            "extractable": self.extractable,
            "extract_k": self.suffix_tokens,
            "greedy_ids": list(self.greedy_ids),
            "teacher_forced": True,
        }
        record.update(self.pz)
        return record

    @classmethod
    def from_record(cls, index: int, record: VerbatimRecord) -> WindowScore:
        pz = {k: v for k, v in record.items() if k in _PZ_KEYS}
        ids = record.get("greedy_ids")
        return cls(
            index=index,
            start=int(record["window_start"]),  # type: ignore[arg-type]
            suffix_start=int(record["suffix_start"]),  # type: ignore[arg-type]
            suffix_tokens=int(record["suffix_tokens"]),  # type: ignore[arg-type]
            match_tokens=int(record["match_tokens"]),  # type: ignore[arg-type]
            extractable=bool(record["extractable"]),
            greedy_ids=tuple(int(i) for i in ids) if isinstance(ids, list) else (),  # type: ignore[arg-type]
            pz=pz,
        )


_PZ_KEYS = frozenset(
    extraction_record([0.0], SamplingScheme(), 0.5)  # the keys only
)


def front_ids(tokenizer: Any, text: str) -> list[int]:
    """What the tokenizer puts in front of a text by default (Gemma's BOS; nothing for
    SmolLM2), read once for the document: every window is fed as the model saw text in
    training (docs/method.md §8)."""
    from memprobe_core.snippets.split import leading_special_ids

    sample = text[:200]
    return leading_special_ids(
        tokenizer, sample, tokenizer.encode(sample, add_special_tokens=False)
    )


def score_windows(
    model: Any,
    ids: Sequence[int],
    windows: Sequence[Window],
    *,
    front: Sequence[int],
    scheme: SamplingScheme,
    discover_p: float,
) -> list[WindowScore]:
    """Score ``windows`` of the document ``ids`` in ONE forward pass (one batch).

    Args:
        model: a transformers causal LM (the victim's ``torch_model``).
        ids: the whole document's token ids.
        windows: windows of one length (one batch; the caller sizes it).
        front: tokens put before every window (:func:`front_ids`).
    """
    import torch

    if not windows:
        return []
    lengths = {(w.prefix_tokens, w.suffix_tokens) for w in windows}
    if len(lengths) != 1:
        raise ValueError(f"one batch holds windows of one shape, not {sorted(lengths)}")
    ids = list(ids)
    rows = [[*front, *ids[w.start : w.end]] for w in windows]
    suffix_n = windows[0].suffix_tokens
    device = getattr(model, "device", "cpu")
    batch = torch.tensor(rows, dtype=torch.long, device=device)
    with torch.inference_mode():
        # Positions predicting the suffix: the last suffix_n + 1 columns but the very last.
        logits = model(input_ids=batch, use_cache=False, logits_to_keep=suffix_n + 1).logits
        logits = logits[:, :-1, :].float()  # (B, S, V)
        targets = batch[:, -suffix_n:]  # (B, S)
        chosen = logits.argmax(dim=-1)  # (B, S)
        scores = []
        for b, window in enumerate(windows):
            agree = (chosen[b] == targets[b]).tolist()
            matched = agree.index(False) if False in agree else suffix_n
            log_probs = sampler_log_probs(logits[b], targets[b], scheme).tolist()
            shown = chosen[b, : min(matched + 1, suffix_n)].tolist()
            scores.append(
                WindowScore(
                    index=window.index,
                    start=window.start,
                    suffix_start=window.suffix_start,
                    suffix_tokens=suffix_n,
                    match_tokens=matched,
                    extractable=matched == suffix_n,
                    greedy_ids=tuple(int(i) for i in shown),
                    pz=extraction_record(log_probs, scheme, discover_p),
                )
            )
    return scores


@dataclass(frozen=True)
class MapSummary:
    """The map's figures (docs/method.md §19).

    Attributes:
        windows: windows scored. extractable: of them, extractable.
        extractable_share: extractable / windows.
        document_tokens: tokens of the document. asked_tokens: tokens inside some window's suffix.
        extracted_tokens: tokens inside an extractable window's suffix (written back greedily).
        extracted_share: extracted_tokens / document_tokens.
        longest_stretch: the longest run of consecutive extracted tokens.
        mean_match_share: mean over windows of match_tokens / suffix_tokens.
        median_log10_p_z: over windows with p_z > 0 (``None`` when none).
        pz_zero_share: windows whose suffix the scheme can never write (p_z = 0).
        log10_p_z_quantiles: 10th, 50th, 90th percentile of log10 p_z over windows with p_z > 0.
    """

    windows: int
    extractable: int
    extractable_share: float
    document_tokens: int
    asked_tokens: int
    extracted_tokens: int
    extracted_share: float
    longest_stretch: int
    mean_match_share: float
    median_log10_p_z: float | None
    pz_zero_share: float
    log10_p_z_quantiles: tuple[float, float, float] | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(scores: Sequence[WindowScore], document_tokens: int) -> MapSummary:
    """The map's figures from its windows' scores (any order)."""
    import numpy as np

    asked: set[int] = set()
    extracted: set[int] = set()
    for s in scores:
        span = range(s.suffix_start, s.suffix_start + s.suffix_tokens)
        asked.update(span)
        if s.extractable:
            extracted.update(span)
    n = len(scores)
    logs = [float(s.pz["log10_p_z"]) for s in scores if s.pz.get("log10_p_z") is not None]  # type: ignore[arg-type]
    zero = sum(1 for s in scores if s.pz.get("log10_p_z") is None)
    quantiles = tuple(float(q) for q in np.percentile(logs, [10, 50, 90])) if logs else None
    return MapSummary(
        windows=n,
        extractable=sum(1 for s in scores if s.extractable),
        extractable_share=sum(1 for s in scores if s.extractable) / n if n else 0.0,
        document_tokens=document_tokens,
        asked_tokens=len(asked),
        extracted_tokens=len(extracted),
        extracted_share=len(extracted) / document_tokens if document_tokens else 0.0,
        longest_stretch=_longest_run(sorted(extracted)),
        mean_match_share=(sum(s.match_tokens / s.suffix_tokens for s in scores) / n if n else 0.0),
        median_log10_p_z=quantiles[1] if quantiles else None,
        pz_zero_share=zero / n if n else 0.0,
        log10_p_z_quantiles=quantiles,  # type: ignore[arg-type]
    )


def _longest_run(positions: list[int]) -> int:
    best = run = 0
    previous = -2
    for p in positions:
        run = run + 1 if p == previous + 1 else 1
        best = max(best, run)
        previous = p
    return best if positions else 0
