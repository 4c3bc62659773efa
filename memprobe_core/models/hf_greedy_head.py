"""Greedy choices of a float32 model, its vocabulary projection screened in bfloat16.

Verifying drafted tokens (:mod:`hf_speculative`) needs, at every drafted position, only the
argmax of the logits, and for the embedded Gemma the 262,144 × 640 vocabulary projection is
most of a forward pass. On a CPU that computes bfloat16 natively the same projection in
bfloat16 is about 3.5× faster (32 positions on a 2-core AVX512-BF16 machine), but a bfloat16
victim changes greedy answers (docs/benchmarks.md). So bfloat16 only *screens*, and float32
decides (docs/method.md §9):

1. ``s = W_bf16 · h_bf16``, every vocabulary entry. Rounding ``h`` and ``W`` to bfloat16 (unit
   roundoff 2⁻⁸), float32 accumulation and the bfloat16 result move each logit by at most
   ``3·2⁻⁸ · Σ|h_i||w_i|`` ≤ ``ε · ‖h‖ · max‖w‖`` with ``ε = 2⁻⁶`` (Cauchy–Schwarz; the room
   left covers float32's own rounding, ``d · 2⁻²⁴`` relative).
2. The float32 argmax is among the entries with ``s ≥ max s − 2ε‖h‖ max‖w‖``: only its
   screened value can be that close to the top (on the embedded Gemma a median of a dozen
   entries, a few hundred at most, of 262,144).
3. Those entries' float32 logits decide. When the top two are within float32's own rounding of
   each other (``4 · d · 2⁻²⁴ · ‖h‖ · max‖w‖``), the full float32 row decides instead, so a
   near tie goes the way it goes without screening.

The choices are therefore those of ``argmax(lm_head(h))`` in float32. A model is screened
only when a first check shows its logits are its output embedding applied to its decoder's
last hidden state (no soft-capping, no bias, no scaling) and the bound holds there;
otherwise, and on GPUs (where the projection is cheap), the plain forward pass runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from memprobe_core.models.dtypes import cpu_has_bf16

log = logging.getLogger(__name__)

SCREEN_EPS = 2.0**-6
FLOAT32_UNIT = 2.0**-24
# Rows screened at once: bounds the (rows × vocabulary) bfloat16 scores held (64 × 262,144 ×
# 2 bytes = 32 MiB for Gemma).
CHUNK_ROWS = 64
# Below this vocabulary the projection is too small a share of a pass to be worth screening.
MIN_VOCABULARY = 16_384
# More distinct candidates than this in one chunk: its rows take the full float32 projection.
MAX_CANDIDATES = 8_192
# Where the head is kept on the model (``False``: the model was checked and is not screened).
_ATTRIBUTE = "_memprobe_screened_head"


@dataclass
class ScreenStats:
    """What screening did (tests and ``bench/probe.py`` read it)."""

    positions: int = 0
    candidates: int = 0  # float32 logits computed for the screened positions
    full_rows: int = 0  # positions decided by the full float32 row (near ties, overflow)


@dataclass
class ScreenedHead:
    """The argmax of ``weight · h`` in float32, screened in bfloat16 (module docstring).

    Attributes:
        weight: the output embedding, (vocabulary, hidden), float32.
        low: its bfloat16 copy (half the weight's memory again).
        row_norm_max: ``max‖w‖`` over the vocabulary.
        version: the weight's in-place version counter when ``low`` was made.
        stats: counts since the head was made.
    """

    weight: Any
    low: Any = None
    row_norm_max: float = 0.0
    version: int = -1
    stats: ScreenStats = field(default_factory=ScreenStats)

    def __post_init__(self) -> None:
        import torch

        if self.low is None:
            self.version = self.weight._version
            self.low = self.weight.detach().to(torch.bfloat16)
        if not self.row_norm_max:
            self.row_norm_max = float(self.weight.detach().norm(dim=1).max())

    def matches(self, weight: Any) -> bool:
        """Whether ``low`` is still a copy of ``weight`` (the same tensor, not changed in place
        since, as a training step would)."""
        return weight is self.weight and weight._version == self.version

    def argmax(self, hidden: Any) -> Any:
        """The float32 greedy choice at every position of ``hidden`` (..., hidden size)."""
        import torch

        shape = hidden.shape[:-1]
        flat = hidden.reshape(-1, hidden.shape[-1]).float()
        choices = torch.empty(flat.shape[0], dtype=torch.long, device=flat.device)
        with torch.no_grad():
            for start in range(0, flat.shape[0], CHUNK_ROWS):
                choices[start : start + CHUNK_ROWS] = self._chunk(flat[start : start + CHUNK_ROWS])
        return choices.reshape(shape)

    def _chunk(self, h: Any) -> Any:
        import torch
        import torch.nn.functional as F

        self.stats.positions += h.shape[0]
        scale = h.norm(dim=1) * self.row_norm_max  # ‖h‖ · max‖w‖, per row
        screened = F.linear(h.to(torch.bfloat16), self.low)  # (rows, V)
        top = screened.max(dim=1).values.float()
        candidate = screened >= (top - 2 * SCREEN_EPS * scale)[:, None]
        columns = torch.unique(candidate.nonzero(as_tuple=True)[1])  # sorted: ties keep order
        broken = ~torch.isfinite(scale) | ~torch.isfinite(top)
        if columns.numel() > MAX_CANDIDATES or columns.numel() == 0:
            return self._full(h)
        exact = F.linear(h, self.weight[columns]).masked_fill(~candidate[:, columns], -torch.inf)
        best = exact.topk(min(2, columns.numel()), dim=1)
        choices = columns[best.indices[:, 0]]
        self.stats.candidates += int(candidate.sum())
        # Float32 rounds each logit by at most d · 2⁻²⁴ · ‖h‖ · max‖w‖, here and in a full
        # projection alike: a gap under twice both is a near tie the full row decides.
        tie_margin = 4 * h.shape[1] * FLOAT32_UNIT * scale
        gap = best.values[:, 0] - (best.values[:, 1] if best.values.shape[1] > 1 else -torch.inf)
        redo = broken | ~(gap > tie_margin)
        if bool(redo.any()):
            choices[redo] = self._full(h[redo])
        return choices

    def _full(self, h: Any) -> Any:
        import torch
        import torch.nn.functional as F

        self.stats.full_rows += h.shape[0]
        return torch.argmax(F.linear(h, self.weight), dim=-1)


def screened_head(model: Any) -> ScreenedHead | None:
    """``model``'s screened head, made and checked on first use; ``None`` where the plain
    forward pass must run (see the module docstring for when)."""
    head = getattr(model, _ATTRIBUTE, None)
    if isinstance(head, ScreenedHead) and not head.matches(model.get_output_embeddings().weight):
        head = None  # the weights changed since the copy: check and copy again
    if head is None:
        head = _make_head(model) or False
        setattr(model, _ATTRIBUTE, head)
    return head if isinstance(head, ScreenedHead) else None


def screening_applies(model: Any) -> bool:
    """Whether ``model`` is one this module screens, before its first check (a float32 model
    on a CPU with native bfloat16, a plain output projection of at least ``MIN_VOCABULARY``
    entries); the manifest records it."""
    import torch

    embeddings = _plain_output_embeddings(model)
    if embeddings is None or not cpu_has_bf16():
        return False
    weight = embeddings.weight
    return (
        weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and weight.shape[0] >= MIN_VOCABULARY
    )


def _make_head(model: Any) -> ScreenedHead | None:
    if not screening_applies(model):
        return None
    head = ScreenedHead(model.get_output_embeddings().weight)
    if _agrees_with_model(model, head):
        head.stats = ScreenStats()  # count use, not the check
        return head
    log.info("%s: its logits are not a plain projection; greedy choices unscreened", type(model))
    return None


def _plain_output_embeddings(model: Any) -> Any:
    """The output projection when it is a bias-free linear layer on the decoder, else ``None``."""
    import torch

    config = getattr(model, "config", None)
    if getattr(config, "final_logit_softcapping", None) is not None:
        return None  # tanh capping can make distinct logits equal in float32
    try:
        embeddings = model.get_output_embeddings()
        model.get_decoder()
    except (AttributeError, NotImplementedError, ValueError):
        return None
    if not isinstance(embeddings, torch.nn.Linear) or embeddings.bias is not None:
        return None
    return embeddings


def _agrees_with_model(model: Any, head: ScreenedHead) -> bool:
    """Whether the model's own logits are the head applied to its decoder's last hidden state,
    on a short input, and the screened choices equal the model's (a model that scales or
    shifts its logits in its own forward, or a kernel outside the bound, fails here)."""
    import torch
    import torch.nn.functional as F

    ids = torch.arange(2, 18, device=head.weight.device)[None] % head.weight.shape[0]
    try:
        with torch.no_grad():
            logits = model(input_ids=ids, use_cache=False).logits.float()
            hidden = model.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return False
    if hidden.shape[-1] != head.weight.shape[1]:
        return False
    own = F.linear(hidden.float(), head.weight)
    if not torch.allclose(own, logits, rtol=1e-5, atol=1e-5):
        return False
    screened = F.linear(hidden.float().to(torch.bfloat16), head.low).float()
    bound = SCREEN_EPS * hidden.float().norm(dim=-1, keepdim=True) * head.row_norm_max
    if not bool(((screened - own).abs() <= bound).all()):
        return False
    return bool(torch.equal(head.argmax(hidden), torch.argmax(logits, dim=-1)))


def greedy_pass(
    model: Any, kwargs: dict[str, Any], keep: int, params: frozenset[str], *, screen: bool = True
) -> Any:
    """One forward pass; the greedy choice at each of the last ``keep`` positions, (B, keep),
    and the model output's cache.

    ``kwargs`` are the model call's (``input_ids``, ``cache``, mask, positions); ``params``
    the model's forward parameters; ``screen=False`` never screens. The choices are float32
    argmaxes, as ``hf_decode``'s loop compares them, whether or not the model is screened.
    """
    import torch

    head = screened_head(model) if screen else None
    if head is not None:
        try:
            out = model.get_decoder()(**kwargs, return_dict=True)
        except TypeError:
            # A decoder that takes other arguments than its model (the first check passes no
            # cache): refused before it ran, so the plain pass below starts from the same state.
            log.info("%s: its decoder refused the pass; greedy choices unscreened", type(model))
            setattr(model, _ATTRIBUTE, False)
        else:
            return head.argmax(out.last_hidden_state[:, -keep:]), out.cache
    call = dict(kwargs)
    if "logits_to_keep" in params:
        call["logits_to_keep"] = keep
    out = model(**call, return_dict=True)
    return torch.argmax(out.logits[:, -keep:].float(), dim=-1), out.cache
