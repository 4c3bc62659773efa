"""Tiny in-process causal LMs with a real HF tokenizer, for fast tests (no download, no files).

``tiny_causal_lm`` trains a byte-level BPE tokenizer on a built-in text (so any text
round-trips) and builds a 2-layer random Llama around it; ``tiny_hf_generator`` wraps it in the
``hf`` backend's ``HFGenerator``; ``tiny_gemma3_config`` is a 2-layer Gemma-3 (the embedded
victim's family: sliding-window and full attention layers). Both are deterministic for a given seed and leave torch's global
random state untouched.
"""

from __future__ import annotations

from typing import Any

TRAINING_TEXT = (
    'Licensed under the Apache License, Version 2.0 (the "License"); you may not use this file '
    "except in compliance with the License. You may obtain a copy of the License at "
    "http://www.apache.org/licenses/LICENSE-2.0 Unless required by applicable law or agreed to in "
    'writing, software distributed under the License is distributed on an "AS IS" BASIS, WITHOUT '
    "WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the License for the "
    "specific language governing permissions and limitations under the License. "
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software "
    "and associated documentation files, to deal in the Software without restriction. "
    "def add(a, b):\n    return a + b\n\nWe the People of the United States, in Order to form a "
    "more perfect Union, establish Justice, insure domestic Tranquility."
)
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>", "<|user|>", "<|assistant|>", "<|system|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tiny_tokenizer(vocab: int = 384, *, chat_template: bool = True, adds_bos: bool = False) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` of about ``vocab`` tokens.

    Args:
        vocab: target vocabulary size (at least 256 bytes + the special tokens).
        chat_template: give it a small chat template (``has_chat_template`` becomes true).
        adds_bos: put ``<s>`` in front of every encoded text by default, as Llama's and
            Gemma's tokenizers do; without it the tokenizer defines a BOS it never adds, as
            GPT-2's and SmolLM2's do.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab < 256 + len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab={vocab}: a byte-level tokenizer needs at least {256 + len(SPECIAL_TOKENS)}"
        )
    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator([TRAINING_TEXT] * 4, trainer=trainer)
    if adds_bos:
        bos = ("<s>", core.token_to_id("<s>"))
        core.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[bos]
        )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        name_or_path=f"tiny-bpe-{vocab}",
    )
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tiny_gemma3_config(vocab_size: int, *, sliding_window: int, **overrides: Any) -> Any:
    """A 2-layer Gemma-3 text config (hidden 64, 4 heads of 16, one sliding-window layer then
    one full layer); ``overrides`` replace any field (``layer_types=None``: Gemma's default)."""
    from transformers import Gemma3TextConfig

    fields: dict[str, Any] = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=256,
        sliding_window=sliding_window,
        layer_types=["sliding_attention", "full_attention"],
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    fields.update(overrides)
    return Gemma3TextConfig(**fields)


def tiny_causal_lm(
    vocab: int = 384, seed: int = 0, *, chat_template: bool = True, adds_bos: bool = False
) -> tuple[Any, Any]:
    """A random 2-layer Llama (hidden 64) and its tokenizer.

    Args:
        vocab: target tokenizer size (the model's vocabulary matches the tokenizer's).
        seed: weight initialisation seed (global torch RNG state is restored afterwards).
        chat_template: whether the tokenizer has a chat template.
        adds_bos: whether the tokenizer puts its BOS in front of a text (``tiny_tokenizer``).

    Returns:
        ``(model, tokenizer)``; the model is in eval mode on the CPU, float32.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer(vocab, chat_template=chat_template, adds_bos=adds_bos)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def tiny_hf_generator(
    vocab: int = 384,
    seed: int = 0,
    *,
    chat_template: bool = True,
    adds_bos: bool = False,
    model_id: str = "tiny-llama",
    **kwargs: Any,
) -> Any:
    """An ``HFGenerator`` around ``tiny_causal_lm`` (kwargs go to ``HFGenerator``)."""
    from memprobe_core.models.hf import HFGenerator

    model, tokenizer = tiny_causal_lm(vocab, seed, chat_template=chat_template, adds_bos=adds_bos)
    return HFGenerator(model, tokenizer, model_id=model_id, **kwargs)
