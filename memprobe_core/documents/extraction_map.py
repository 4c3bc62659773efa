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

import math
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from memprobe_core.documents.windows import Window
from memprobe_core.measuring.sampler import SamplingScheme, sampler_log_probs
from memprobe_core.membership.extraction_probability import extraction_record
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


_PZ_KEYS = frozenset(extraction_record([0.0], SamplingScheme(), 0.5)) | {"pz_read_tokens"}


def front_ids(tokenizer: Any, text: str) -> list[int]:
    """What the tokenizer puts in front of a text by default (Gemma's BOS; nothing for
    SmolLM2), read once for the document: every window is fed as the model saw text in
    training (docs/method.md §8)."""
    from memprobe_core.snippets.split import leading_special_ids

    sample = text[:200]
    return leading_special_ids(
        tokenizer, sample, tokenizer.encode(sample, add_special_tokens=False)
    )


# Suffix positions projected onto the vocabulary at a time. A window leaves the batch once
# greedy decoding has left its suffix AND its p_z is known to be 0 (a token the scheme can never
# draw): nothing read later changes either. Under top-k 40 (the default scheme) that is a few
# positions for most windows of text a model does not know, and the projection (262k rows for
# Gemma) and the sampler were two thirds of a window's time.
PROJECTION_CHUNK = 8


def score_windows(
    model: Any,
    ids: Sequence[int],
    windows: Sequence[Window],
    *,
    front: Sequence[int],
    scheme: SamplingScheme,
    discover_p: float,
) -> list[WindowScore]:
    """Score ``windows`` of the document ``ids`` in ONE forward pass of the model's body (one
    batch), the suffix positions projected a chunk at a time (:data:`PROJECTION_CHUNK`).

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
    suffix_n = windows[0].suffix_tokens
    device = getattr(model, "device", "cpu")
    batch = torch.tensor(
        [[*front, *ids[w.start : w.end]] for w in windows], dtype=torch.long, device=device
    )
    targets = batch[:, -suffix_n:]  # (B, S)
    with torch.inference_mode():
        reader = _SuffixLogits(model, batch, suffix_n)
        rows = [_Row(suffix_n) for _ in windows]
        live = list(range(len(windows)))
        for first in range(0, suffix_n, PROJECTION_CHUNK):
            if not live:
                break
            last = min(suffix_n, first + PROJECTION_CHUNK)
            logits = reader.chunk(live, first, last)  # (L, C, V) float32
            for j, b in enumerate(live):
                rows[b].read(logits[j], targets[b, first:last], scheme)
            live = [b for b in live if not rows[b].settled]
    return [rows[b].score(window, discover_p, scheme) for b, window in enumerate(windows)]


class _SuffixLogits:
    """The logits of a batch's suffix positions, a chunk of positions and rows at a time.

    The body runs once; its last hidden states go through the output layer (and Gemma's final
    soft-capping) only where asked. A model whose logits are not that (another final transform)
    is found by comparing, once per model, one row's logits with the model's own forward, and
    is then read from its full forward instead.
    """

    def __init__(self, model: Any, batch: Any, suffix_n: int) -> None:
        self.model, self.batch, self.suffix_n = model, batch, suffix_n
        self.hidden: Any = None
        self.full: Any = None
        if _projection_matches(model, batch[:1], suffix_n):
            decoder = model.get_decoder()
            out = decoder(input_ids=batch, use_cache=False).last_hidden_state
            self.hidden = out[:, -(suffix_n + 1) : -1, :]  # (B, S, H)
        else:
            logits = model(input_ids=batch, use_cache=False, logits_to_keep=suffix_n + 1).logits
            self.full = logits[:, :-1, :]

    def chunk(self, rows: list[int], first: int, last: int) -> Any:
        if self.full is not None:
            return self.full[rows, first:last].float()
        return _project(self.model, self.hidden[rows, first:last]).float()


def _project(model: Any, hidden: Any) -> Any:
    import torch

    logits = model.get_output_embeddings()(hidden)
    cap = getattr(getattr(model, "config", None), "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


# Per model object (weakly held): whether ``_project`` of its body's hidden states is its logits.
_PROJECTION_CHECKED: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _projection_matches(model: Any, row: Any, suffix_n: int) -> bool:
    import torch

    key = model
    if key not in _PROJECTION_CHECKED:
        try:
            expected = model(input_ids=row, use_cache=False, logits_to_keep=suffix_n + 1).logits
            hidden = model.get_decoder()(input_ids=row, use_cache=False).last_hidden_state
            got = _project(model, hidden[:, -(suffix_n + 1) :, :])
            same = bool(torch.allclose(got.float(), expected.float(), atol=1e-4, rtol=1e-4))
        except (AttributeError, TypeError, NotImplementedError):
            same = False
        _PROJECTION_CHECKED[key] = same
    return _PROJECTION_CHECKED[key]


class _Row:
    """One window's reading, chunk after chunk: greedy's choices and the sampler's log-probs."""

    def __init__(self, suffix_n: int) -> None:
        self.suffix_n = suffix_n
        self.chosen: list[int] = []
        self.log_probs: list[float] = []
        self.matched: int | None = None  # set at the first disagreement

    def read(self, logits: Any, targets: Any, scheme: SamplingScheme) -> None:
        picked = logits.argmax(dim=-1).tolist()
        wanted = targets.tolist()
        for a, b in zip(picked, wanted):
            self.chosen.append(int(a))
            if self.matched is None and a != b:
                self.matched = len(self.chosen) - 1
        self.log_probs += sampler_log_probs(logits, targets, scheme).tolist()

    @property
    def settled(self) -> bool:
        """Greedy has left the text and p_z is 0: no later position changes a figure."""
        return self.matched is not None and -math.inf in self.log_probs

    def score(self, window: Window, discover_p: float, scheme: SamplingScheme) -> WindowScore:
        matched = self.suffix_n if self.matched is None else self.matched
        pz = extraction_record(self.log_probs, scheme, discover_p)
        # A settled window was read up to its first token the scheme cannot draw: p_z is 0
        # either way; the count of such tokens covers the positions read.
        pz["pz_tokens"] = self.suffix_n
        pz["pz_read_tokens"] = len(self.log_probs)
        return WindowScore(
            index=window.index,
            start=window.start,
            suffix_start=window.suffix_start,
            suffix_tokens=self.suffix_n,
            match_tokens=matched,
            extractable=matched == self.suffix_n,
            greedy_ids=tuple(self.chosen[: min(matched + 1, self.suffix_n)]),
            pz=pz,
        )


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
