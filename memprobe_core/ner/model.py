"""A token-classification model wrapped for NER memorization audits.

``NerModel`` loads any Hugging Face token classifier (hub id or local folder) and computes the
paper's name confidence (docs/method.md §5)::

    C(name | prompt) = mean over the name's sub-tokens of max(P(B-PER), P(I-PER))

with the softmax taken over all labels. The name's sub-tokens are found by **character offsets**
(``return_offsets_mapping``): every token whose span overlaps the name's span, never by searching
the token list (a name's tokens depend on its neighbours). Prompts × names are scored in batches.

Attentions: transformers 5 returns *no* attentions under the default ``sdpa`` attention, silently.
Attention calls therefore run on an eager-attention copy of the model, made on first use (the loaded
model is never switched, so scoring keeps sdpa's speed: ~1.6× eager's on CPU, see
``bench/ner.py``). Load with ``attentions=True`` to use eager attention for everything instead
and avoid the copy's memory.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memprobe_core.errors import MemprobeError
from memprobe_core.ner.labels import PerLabels, find_per_labels
from memprobe_core.ner.prompts import Prompt, check_prompts, fill

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, str], None]


class NerModelError(MemprobeError, RuntimeError):
    """The NER model could not be loaded or used; the message says which and what to do."""


@dataclass
class NameAttention:
    """Attention from a name's sub-tokens to every token of one filled prompt.

    Attributes:
        tokens: the input tokens (special tokens included).
        name_mask: ``(T,)`` bool, True on the name's sub-tokens.
        weights: ``(T,)`` attention of the name's sub-tokens to each key token, averaged over
            layers, heads and the name's sub-tokens (sums to 1).
    """

    tokens: list[str]
    name_mask: np.ndarray
    weights: np.ndarray


class NerModel:
    """A token classifier with its tokenizer and its PER label ids.

    The wrapped model is put in eval mode and never modified afterwards; the object can be cached
    and shared (e.g. by ``st.cache_resource``).

    Attributes:
        model: the ``*ForTokenClassification`` torch module.
        tokenizer: its fast tokenizer (offsets are needed).
        per_labels: the PER label ids found in ``config.id2label``.
        model_id: hub id or local path it came from.
    """

    def __init__(self, model: Any, tokenizer: Any, *, model_id: str = "<in-process>") -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise NerModelError(
                f"the tokenizer of {model_id} is not a fast (Rust) tokenizer; character offsets "
                "are needed to find the name's tokens. Use a model that ships tokenizer.json."
            )
        self.model = model.eval()
        self._eager: Any = None  # eager-attention copy for attention calls, made on first use
        self._eager_lock = threading.Lock()
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.per_labels: PerLabels = find_per_labels(model.config.id2label)
        limits = [
            getattr(tokenizer, "model_max_length", None),
            getattr(model.config, "max_position_embeddings", None),
        ]
        self.max_length = min(v for v in limits + [512] if isinstance(v, int) and v > 0)

    # --- loading ------------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        model_id: str | Path,
        *,
        device: str | None = None,
        dtype: str | None = None,
        attentions: bool = False,
        revision: str | None = None,
    ) -> NerModel:
        """Load a token classifier from the hub or a local folder.

        Args:
            model_id: hub id (e.g. ``dslim/bert-base-NER``) or a local folder.
            device: ``"cuda"``, ``"cpu"`` or ``None`` (CUDA when available).
            dtype: ``"float32"`` (default), ``"bfloat16"`` or ``"float16"``.
            attentions: use eager attention for everything (slower scoring; without it, attention
                calls run on an eager copy made on first use).
            revision: hub revision.

        Raises:
            NerModelError: the model cannot be loaded (message says why and what to try).
        """
        import torch
        from transformers import AutoModelForTokenClassification, AutoTokenizer

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch_dtype = {
            "float32": torch.float32,
            "bfloat16": torch.bfloat16,
            "float16": torch.float16,
        }
        if dtype is not None and dtype not in torch_dtype:
            raise NerModelError(f"dtype {dtype!r} is unknown; use one of {sorted(torch_dtype)}")
        kwargs: dict[str, Any] = {"trust_remote_code": False, "revision": revision}
        if attentions:
            kwargs["attn_implementation"] = "eager"
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(model_id), revision=revision)
            model = AutoModelForTokenClassification.from_pretrained(
                str(model_id), dtype=torch_dtype[dtype or "float32"], **kwargs
            )
        except (OSError, ValueError) as err:
            raise NerModelError(
                f"could not load the token classifier {model_id!r}: {err}. Give a local folder "
                "with config.json, weights and tokenizer files, or a hub id when a network exists."
            ) from err
        return cls(model.to(device), tokenizer, model_id=str(model_id))

    @property
    def device(self) -> Any:
        """The torch device of the model's weights."""
        return next(self.model.parameters()).device

    @property
    def supports_attentions(self) -> bool:
        """Whether the loaded model itself runs eager attention (else a copy is made on demand)."""
        return getattr(self.model.config, "_attn_implementation", None) == "eager"

    def _attention_model(self) -> Any:
        """The model to ask for attentions: itself when eager, else an eager copy (made once)."""
        if self.supports_attentions:
            return self.model
        with self._eager_lock:
            if self._eager is None:
                eager = copy.deepcopy(self.model)
                try:
                    eager.set_attn_implementation("eager")
                except (AttributeError, ValueError) as err:
                    raise NerModelError(
                        f"cannot switch a copy of {self.model_id} to eager attention ({err}); "
                        "load it with NerModel.load(..., attentions=True)"
                    ) from err
                self._eager = eager.eval()
            return self._eager

    def manifest(self) -> dict[str, Any]:
        """What identifies this model in a run's record."""
        return {
            "model_id": self.model_id,
            "per_labels": list(self.per_labels.names),
            "scheme": self.per_labels.scheme,
            "device": str(self.device),
        }

    # --- scoring ------------------------------------------------------------------------------
    def confidences(
        self,
        prompts: Sequence[str | Prompt],
        names: Sequence[str],
        *,
        batch_size: int = 64,
        on_progress: ProgressFn | None = None,
    ) -> np.ndarray:
        """``C(name | prompt)`` for every prompt × name.

        Args:
            prompts: sentences with one ``{name}`` slot.
            names: person names to put in the slot.
            batch_size: filled prompts per forward pass.
            on_progress: ``on_progress(done, total, message)`` after each batch.

        Returns:
            ``(len(prompts), len(names))`` float array in [0, 1].
        """
        checked = check_prompts(prompts)
        texts: list[str] = []
        spans: list[tuple[int, int]] = []
        for prompt in checked:
            for name in names:
                text, start, end = fill(prompt.text, name)
                texts.append(text)
                spans.append((start, end))
        flat = self.span_confidences(texts, spans, batch_size=batch_size, on_progress=on_progress)
        return flat.reshape(len(checked), len(names))

    def span_confidences(
        self,
        texts: Sequence[str],
        spans: Sequence[tuple[int, int]],
        *,
        batch_size: int = 64,
        on_progress: ProgressFn | None = None,
    ) -> np.ndarray:
        """Mean PER probability over the sub-tokens covering ``text[start:end]``, per text.

        Raises:
            NerModelError: a span covers no token (empty name, or cut off by truncation).
        """
        out = np.empty(len(texts), dtype=np.float64)
        for index, probs, masks, _ in self._batches(texts, spans, batch_size, on_progress):
            # probs: (B, T) PER probability per token; masks: (B, T) name sub-tokens.
            out[index] = (probs * masks).sum(1) / masks.sum(1)
        return out

    def _batches(
        self,
        texts: Sequence[str],
        spans: Sequence[tuple[int, int]],
        batch_size: int,
        on_progress: ProgressFn | None,
        *,
        attentions: bool = False,
    ):
        """Yield ``(indices, per_probs (B,T), name_masks (B,T), extra)`` per batch."""
        import torch

        if len(texts) != len(spans):
            raise ValueError(f"{len(texts)} texts but {len(spans)} spans")
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be at least 1")
        model = self._attention_model() if attentions else self.model
        # Similar lengths in a batch waste less padding; results are put back in input order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        per_ids = list(self.per_labels.ids)
        total = len(order)
        for first in range(0, total, batch_size):
            index = order[first : first + batch_size]
            enc = self.tokenizer(
                [texts[i] for i in index],
                return_offsets_mapping=True,
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            offsets = enc.pop("offset_mapping").numpy()  # (B, T, 2)
            starts = np.array([spans[i][0] for i in index])[:, None]
            ends = np.array([spans[i][1] for i in index])[:, None]
            masks = (
                (offsets[..., 0] < ends)
                & (offsets[..., 1] > starts)
                & (offsets[..., 1] > offsets[..., 0])  # special and padding tokens are (0, 0)
            )
            empty = np.flatnonzero(masks.sum(1) == 0)
            if empty.size:
                bad = index[int(empty[0])]
                raise NerModelError(
                    f"the name at characters {spans[bad]} of {texts[bad]!r} covers no token "
                    f"(empty name, or beyond the model's {self.max_length}-token limit)"
                )
            enc = {k: v.to(self.device) for k, v in enc.items()}
            with torch.inference_mode():
                output = model(**enc, output_attentions=attentions)
            probs = torch.softmax(output.logits.float(), dim=-1)  # (B, T, labels)
            per = probs[..., per_ids].amax(-1).cpu().numpy()  # (B, T)
            extra = None
            if attentions:
                if not output.attentions:
                    raise NerModelError(f"{self.model_id} returned no attentions")
                stacked = torch.stack([a.float() for a in output.attentions])  # (L, B, H, T, T)
                extra = (
                    stacked.mean(dim=(0, 2)).cpu().numpy(),  # (B, T, T)
                    enc["input_ids"].cpu().numpy(),
                    enc["attention_mask"].cpu().numpy().astype(bool),
                )
            yield index, per, masks.astype(np.float64), extra
            if on_progress:
                done = min(first + batch_size, total)
                on_progress(done, total, f"scored {done}/{total} filled prompts")

    # --- attention ----------------------------------------------------------------------------
    def attentions(self, text: str) -> tuple[np.ndarray, list[str]]:
        """Raw attention weights of one text.

        Returns:
            ``(weights, tokens)``; weights has shape ``(layers, heads, T, T)``.
        """
        import torch

        model = self._attention_model()
        enc = self.tokenizer(text, truncation=True, max_length=self.max_length, return_tensors="pt")
        with torch.inference_mode():
            output = model(**{k: v.to(self.device) for k, v in enc.items()}, output_attentions=True)
        if not output.attentions:
            raise NerModelError(f"{self.model_id} returned no attentions")
        weights = torch.stack([a[0].float() for a in output.attentions]).cpu().numpy()
        return weights, self.tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())

    def name_attention(
        self,
        texts: Sequence[str],
        spans: Sequence[tuple[int, int]],
        *,
        batch_size: int = 32,
        on_progress: ProgressFn | None = None,
    ) -> list[NameAttention]:
        """Attention of each text's name sub-tokens to all tokens (layers and heads averaged)."""
        out: list[NameAttention | None] = [None] * len(texts)
        for index, _, masks, extra in self._batches(
            texts, spans, batch_size, on_progress, attentions=True
        ):
            mean_attn, input_ids, real = extra  # (B, T, T) layer/head mean; (B, T); (B, T)
            for row, i in enumerate(index):
                mask = masks[row] > 0
                keep = real[row]  # drop padding positions (keys with zero attention anyway)
                weights = mean_attn[row][mask].mean(0)[keep]
                tokens = self.tokenizer.convert_ids_to_tokens(input_ids[row][keep].tolist())
                out[i] = NameAttention(tokens, mask[keep], weights)
        return [a for a in out if a is not None]
