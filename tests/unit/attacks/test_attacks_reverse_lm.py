"""Reverse-LM: token flipping, and a tiny reversed model trained in-process proposes true prefixes."""

from __future__ import annotations

import pytest
import torch

from memprobe_core.attacks import (
    AttackOptions,
    MissingModelError,
    ModelSet,
    flip,
    propose_prefix,
    run_reverse_lm,
)
from memprobe_core.models.scripted import ScriptedGenerator
from memprobe_core.snippets.split import Snippet, split
from tests.unit.attacks.test_attacks_gcg import TinyHF, tiny_llama

SENTENCES = [
    "the quick brown fox jumps over the lazy dog near the quiet river bank today",
    "we hold these truths to be self evident that all men are created equal and free",
    "permission is hereby granted free of charge to any person obtaining a copy of this software",
    "beautiful is better than ugly explicit is better than implicit simple is better than complex",
]


def word_tokenizer(texts):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = ["<pad>", "<eos>"] + sorted({w for t in texts for w in t.split()})
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>")
    tok.name_or_path = "tiny-words"
    return tok


def train_reversed(tok, texts, steps=150):
    """Train a tiny causal LM on reversed token order (each text reversed, then <eos>)."""
    model = tiny_llama(len(tok), seed=0).train()
    rows = [flip(tok.encode(t, add_special_tokens=False)) + [tok.eos_token_id] for t in texts]
    width = max(map(len, rows))
    ids = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])
    labels = ids.masked_fill(ids == tok.pad_token_id, -100)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval(), float(loss.detach())


@pytest.fixture(scope="module")
def trained():
    tok = word_tokenizer(SENTENCES)
    model, loss = train_reversed(tok, SENTENCES)
    assert loss < 0.1, f"tiny reversed model did not fit its sentences (loss {loss:.3f})"
    return TinyHF(model, tok, "tiny-reverse"), tok


def test_flip_round_trips_and_reverses():
    ids = [5, 1, 9, 9, 2]
    assert flip(ids) == [2, 9, 9, 1, 5]
    assert flip(flip(ids)) == ids
    assert flip([]) == []


def test_reversed_model_proposes_the_true_prefixes(trained):
    reverse, tok = trained
    for text in SENTENCES:
        words = text.split()
        prefix, suffix = " ".join(words[:5]), " ".join(words[5:])
        got, ids = propose_prefix(reverse, suffix, max_new_tokens=5)
        assert got == prefix
        assert ids == tok.encode(prefix, add_special_tokens=False)


def test_generation_stops_at_the_start_of_the_text(trained):
    reverse, _ = trained
    words = SENTENCES[0].split()
    got, ids = propose_prefix(reverse, " ".join(words[3:]), max_new_tokens=10)
    assert got == " ".join(words[:3]) and len(ids) == 3  # <eos> (start of text) cut off


def test_run_reverse_lm_scores_the_victim_and_reports_dis(trained):
    reverse, tok = trained
    text = SENTENCES[2]
    sp = split(Snippet("r", text, domain="legal"), tok, len(text.split()), prefix_ratio=0.33)

    # A victim that continues only the true prefix correctly.
    parrot = ScriptedGenerator(
        lambda ask: sp.suffix if ask.request == sp.prefix else "no idea",
        model_id="parrot",
        tokenizer=None,
    )
    events = []
    res = run_reverse_lm(
        sp, ModelSet(victim=parrot, reverse=reverse), AttackOptions(), on_event=events.append
    )
    assert res.prompt == sp.prefix and res.mem == 1.0 and res.dis == 0.0
    assert res.costs.attacker_queries == 1 and res.costs.victim_queries == 1
    assert res.manifest["decoding"]["reverse"]["max_new_tokens"] == len(sp.prefix_ids)
    assert [e.kind for e in events] == [
        "round_started",
        "candidate_scored",
        "round_finished",
        "finished",
    ]


def test_reverse_lm_needs_a_white_box_reverse_model(trained):
    _, tok = trained
    sp = split(Snippet("r", SENTENCES[0]), tok, 10)

    remote = ScriptedGenerator(model_id="remote", tokenizer=None)  # no weights, no tokenizer
    with pytest.raises(MissingModelError, match="ModelSet.reverse"):
        run_reverse_lm(sp, ModelSet(victim=remote), AttackOptions())
    with pytest.raises(MissingModelError, match="weights and tokenizer"):
        run_reverse_lm(sp, ModelSet(victim=remote, reverse=remote), AttackOptions())
    assert remote.calls == []  # refused before anything was asked
