"""Tiny in-process NER models for tests (random weights, built in well under a second).

``tiny_ner`` is a 2-layer BERT token classifier on a 37-word WordPiece vocabulary (unit tests
compute confidences by hand on it); ``tiny_minilm_ner`` has the same shape on the MiniLM
tokenizer, so any prompt and name tokenizes (page tests run template prompts on it).
``registered_tiny_models`` adds ``tiny_minilm_ner`` models to the NER model registry under
names the page and ``run_ner_audit`` resolve, with small name lists of their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from memprobe_core.ner.model import NerModel
from memprobe_core.ner.registry import (
    NerModelEntry,
    register_ner_model,
    unregister_ner_model,
)

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "a",
    "met",
    "said",
    "did",
    "visit",
    "visited",
    "yesterday",
    "hello",
    "call",
    "tell",
    "to",
    "who",
    "with",
    "and",
    "john",
    "anna",
    "smith",
    "##son",
    "##s",
    "lee",
    "park",
    "kim",
    "maria",
    "paris",
    ".",
    ",",
    "?",
    "!",
    "(",
    ")",
    "'",
]
LABELS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}
IN_NAMES = [
    f"{a} {b}"
    for a in ("Anna", "John", "Maria", "Paul", "Rita")
    for b in ("Smith", "Lee", "Park", "Novak")
]
OUT_NAMES = [
    f"{a} {b}"
    for a in ("Kim", "Omar", "Lena", "Ivan", "Sara")
    for b in ("Cruz", "Diaz", "Khan", "Berg")
]


def _bert(
    vocab_size: int, labels: dict[int, str], seed: int, eager: bool, positions: int
) -> object:
    from transformers import BertConfig, BertForTokenClassification

    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=positions,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    with torch.random.fork_rng(devices=[]):  # seed locally; never touch the global RNG state
        torch.manual_seed(seed)
        return BertForTokenClassification._from_config(
            config, attn_implementation="eager" if eager else "sdpa"
        )


def tiny_ner(
    *, eager: bool = False, labels: dict[int, str] | None = None, seed: int = 0
) -> NerModel:
    """A 2-layer, 32-hidden BERT token classifier with a WordPiece tokenizer, built in-process."""
    from transformers import BertTokenizer

    labels = labels or LABELS
    tokenizer = BertTokenizer(vocab={w: i for i, w in enumerate(VOCAB)})
    return NerModel(_bert(len(VOCAB), labels, seed, eager, 64), tokenizer, model_id="tiny-bert")


def tiny_minilm_ner(seed: int = 0) -> NerModel:
    """The same tiny random BERT on the MiniLM tokenizer (any text tokenizes; ~50 % M-MEM)."""
    from transformers import AutoTokenizer

    from memprobe_core.ner.embedded import base_encoder_dir

    tokenizer = AutoTokenizer.from_pretrained(str(base_encoder_dir()))
    model = _bert(len(tokenizer), LABELS, seed, True, 128)
    return NerModel(model, tokenizer, model_id=f"tiny-random-bert:{seed}")


@contextmanager
def registered_tiny_models(*names: str) -> Iterator[list[str]]:
    """Register ``tiny_minilm_ner(seed=i)`` under each of ``names`` (removed on exit)."""
    for seed, name in enumerate(names):
        register_ner_model(
            NerModelEntry(
                name,
                f"tiny random BERT (test, seed {seed})",
                lambda device, on_progress, seed=seed: tiny_minilm_ner(seed),
                lambda: (list(IN_NAMES), list(OUT_NAMES)),
            )
        )
    try:
        yield list(names)
    finally:
        for name in names:
            unregister_ner_model(name)
