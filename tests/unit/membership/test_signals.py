"""Membership signals (docs/method.md §8): hand-computed cases on a bigram model with known log-probs,
an independent check against transformers' own loss on a tiny random Llama, padding invariance,
the one-forward cost and the cache."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from memprobe_core.membership import SIGNALS, MeasureOptions
from memprobe_core.membership import scoring_pass as sp
from memprobe_core.membership import signals as sig
from memprobe_core.membership import token_stats as ts
from memprobe_core.models import load
from memprobe_core.models import measure_cache as mc
from memprobe_core.models.base import Generator
from memprobe_core.snippets.split import Snippet, split
from tests.helpers.tiny_models import tiny_hf_generator

LN2 = math.log(2.0)
SIGMA = math.sqrt(0.6875)  # σ of the log-probs of (1/2, 1/4, 1/8, 1/8), in units of ln 2 (below)

# --- a bigram "model" with known log-probs --------------------------------------------------------
# Vocabulary: 0 'a', 1 'b', 2 'A', 3 '<s>' (BOS). Every row of next-token probabilities is a
# permutation of (1/2, 1/4, 1/8, 1/8), so every position has the same
#   μ = −(1/2·1 + 1/4·2 + 1/8·3 + 1/8·3) ln2 = −1.75 ln2
#   E[(log p)²] = (1/2·1 + 1/4·4 + 1/8·9 + 1/8·9) ln²2 = 3.75 ln²2
#   σ = sqrt(3.75 − 1.75²) ln2 = sqrt(0.6875) ln2.
CHARS = "abA"
BOS = 3
NEXT = {  # previous token -> probabilities of (a, b, A, <s>)
    BOS: (1 / 2, 1 / 4, 1 / 8, 1 / 8),
    0: (1 / 4, 1 / 2, 1 / 8, 1 / 8),  # after 'a': 'b' is likely
    1: (1 / 4, 1 / 8, 1 / 2, 1 / 8),  # after 'b': 'A' is likely
    2: (1 / 2, 1 / 4, 1 / 8, 1 / 8),  # after 'A': 'a' is likely
}
TEXT = "abAAb"
# With BOS, ℓ_t / ln2 of "abAAb":  a|<s> = −1, b|a = −1, A|b = −1, A|A = −3, b|A = −2  (sum −8)
# lower("abAAb") = "abaab":        a|<s> = −1, b|a = −1, a|b = −2, a|a = −2, b|a = −1  (sum −7)
# The split at length 5 (prefix ratio 0.33 → round(1.65) = 2): prefix "ab", suffix "AAb".


class CharTokenizer:
    """One id per character of ``CHARS``; BOS optional."""

    def __init__(self, bos: bool = True, name: str = "chars") -> None:
        self.bos_token_id = BOS if bos else None
        self.pad_token_id = None
        self.name_or_path = name

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = [CHARS.index(c) for c in text]
        return [BOS, *ids] if add_special_tokens and self.bos_token_id is not None else ids

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        return "".join(CHARS[i] for i in ids if i != BOS)


class Bigram(torch.nn.Module):
    """Logits at position t depend only on token t: ``log NEXT[token]``."""

    def __init__(self) -> None:
        super().__init__()
        table = torch.tensor([NEXT[i] for i in range(4)], dtype=torch.float64).log()
        self.register_buffer("table", table.float())  # (V, V)

    def forward(self, input_ids: Any, attention_mask: Any = None, **_: Any) -> Any:
        return SimpleNamespace(logits=self.table[input_ids])  # (B, T, V)


class WhiteBox(Generator):
    """A white-box Generator over any torch module and tokenizer (never generates)."""

    backend = "test"

    def __init__(self, model: Any, tokenizer: Any, model_id: str = "bigram") -> None:
        super().__init__()
        self.model_id = model_id
        self._model, self._tok = model, tokenizer

    @property
    def white_box(self) -> bool:
        return True

    @property
    def tokenizer(self) -> Any:
        return self._tok

    @property
    def torch_model(self) -> Any:
        return self._model

    @property
    def device(self) -> Any:
        return torch.device("cpu")

    def _generate(self, requests, decoding, references=None):  # pragma: no cover - never called
        raise AssertionError("signals must not generate")


def counted(model: torch.nn.Module) -> list[int]:
    """A list whose length is the number of forward calls of ``model`` from now on."""
    calls: list[int] = []
    model.register_forward_hook(lambda *_: calls.append(1))
    return calls


@pytest.fixture(autouse=True)
def fresh_cache():
    sig.clear_cache()
    yield
    sig.clear_cache()


def bigram_victim(bos: bool = True) -> WhiteBox:
    return WhiteBox(Bigram(), CharTokenizer(bos=bos))


def piece_of(victim: Generator, text: str = TEXT, length: int = 5) -> Any:
    return split(Snippet("s1", text), victim.tokenizer, length)


# --- hand-computed values ---------------------------------------------------------------------


def test_hand_computed_signals_with_bos():
    victim = bigram_victim()
    piece = piece_of(victim)
    assert piece.prefix_ids == (0, 1) and piece.suffix_ids == (2, 2, 1)
    out = sig.compute_signals(victim, piece, MeasureOptions(min_k_percent=40))
    assert set(out) == {
        s.name
        for s in SIGNALS
        if not (s.needs_reference or s.needs_prefixes or s.needs_samples or s.needs_option)
    } | {
        "tokens",
        "min_k_percent",
        "scored_by",
    }
    assert out["scored_by"] == "forward"
    assert out["tokens"] == 5  # BOS in front: all five characters are scored
    assert out["loss"] == pytest.approx(8 / 5 * LN2, rel=1e-6)  # −(−8 ln2)/5
    assert out["ppl"] == pytest.approx(2**1.6, rel=1e-6)  # exp(1.6 ln2)
    assert out["suffix_loss"] == pytest.approx(2 * LN2, rel=1e-6)  # "AAb": (1 + 3 + 2)/3 ln2
    # k = 40 %: floor(5 · 0.4) = 2 lowest ℓ: −3 ln2 (A|A) and −2 ln2 (b|A)
    assert out["min_k"] == pytest.approx(-2.5 * LN2, rel=1e-6)
    # (ℓ − μ)/σ of those two: (−3 + 1.75)/SIGMA and (−2 + 1.75)/SIGMA; the others are
    # (−1 + 1.75)/SIGMA > 0. Mean: (−1.25 − 0.25)/2/SIGMA = −0.75/SIGMA = −0.9045
    assert out["min_k_pp"] == pytest.approx(-0.75 / SIGMA, rel=1e-5)
    assert out["lowercase"] == pytest.approx(8 / 7, rel=1e-6)  # (8/5 ln2) / (7/5 ln2)
    # zlib.compress(b"abAAb") is 13 bytes (2 header + 7 deflate + 4 Adler-32) = 104 bits
    assert out["zlib"] == pytest.approx(8 / 5 * LN2 / 104, rel=1e-6)
    assert out["min_k_percent"] == 40.0


def test_default_k_takes_one_token_of_five():
    # k = 20 %: floor(5 · 0.2) = 1: the single lowest ℓ, −3 ln2
    out = sig.compute_signals(bigram_victim(), piece_of(bigram_victim()), MeasureOptions())
    assert out["min_k"] == pytest.approx(-3 * LN2, rel=1e-6)
    assert out["min_k_pp"] == pytest.approx(-1.25 / SIGMA, rel=1e-5)


def test_without_bos_the_first_token_is_not_scored():
    victim = bigram_victim(bos=False)
    out = sig.compute_signals(victim, piece_of(victim), MeasureOptions(min_k_percent=40))
    assert out["tokens"] == 4  # b|a, A|b, A|A, b|A: −1, −1, −3, −2 (ln2)
    assert out["loss"] == pytest.approx(7 / 4 * LN2, rel=1e-6)
    assert out["suffix_loss"] == pytest.approx(2 * LN2, rel=1e-6)  # suffix unchanged: AAb
    # floor(4 · 0.4) = 1 lowest: −3 ln2
    assert out["min_k"] == pytest.approx(-3 * LN2, rel=1e-6)
    # lower: b|a, a|b, a|a, b|a = −1, −2, −2, −1 → loss 6/4 ln2; ratio (7/4)/(6/4) = 7/6
    assert out["lowercase"] == pytest.approx(7 / 6, rel=1e-6)


def test_reference_ratio_per_byte_across_tokenizers():
    # The victim's tokenizer has no BOS: it scores b|a, A|b, A|A, b|A, total NLL 7 ln2.
    # The reference (same probabilities, another tokenizer with BOS) scores all five
    # characters: total NLL 8 ln2. Per UTF-8 byte of "abAAb" (5 bytes, vs 4 victim tokens):
    # (7 ln2 − 8 ln2) / 5 = −0.2 ln2
    victim = bigram_victim(bos=False)
    reference = WhiteBox(Bigram(), CharTokenizer(bos=True, name="other"), "reference")
    out = sig.compute_signals(victim, piece_of(victim), MeasureOptions(), reference)
    assert out["ref_ratio"] == pytest.approx(-0.2 * LN2, rel=1e-6)
    names = [s.name for s in SIGNALS if not (s.needs_prefixes or s.needs_samples or s.needs_option)]
    assert names[:8] == ["loss", "ppl", "suffix_loss", "zlib", "lowercase", "min_k"] + [
        "min_k_pp",
        "ref_ratio",
    ]  # memprobe's own first; a plugin's signals (docs/adding-a-signal.md) follow
    assert [k for k in out if k in names] == names  # in SIGNALS order


def test_min_k_count_is_floor_and_at_least_one():
    assert ts.min_k_count(5, 20) == 1
    assert ts.min_k_count(3, 20) == 1  # floor(0.6) = 0 → at least one
    assert ts.min_k_count(10, 20) == 2
    assert ts.min_k_count(200, 20) == 40
    assert ts.min_k_count(199, 20) == 39  # floor(39.8)
    assert ts.min_k_count(7, 100) == 7


def test_token_stats_mu_sigma_by_hand_and_masked_vocabulary():
    logits = torch.tensor([[1 / 2, 1 / 4, 1 / 8, 1 / 8]]).log()  # (T=1, V=4)
    stats = ts.token_stats(logits, torch.tensor([1]))
    assert stats.log_probs[0] == pytest.approx(-2 * LN2, rel=1e-6)  # log 1/4
    assert stats.mu[0] == pytest.approx(-1.75 * LN2, rel=1e-6)
    assert stats.sigma[0] == pytest.approx(SIGMA * LN2, rel=1e-5)
    # A masked entry (−inf) has p = 0: it adds nothing, and nothing is NaN.
    # p = (1/2, 1/2, 0): μ = −ln2, σ = 0; the calibrated score of a σ = 0 token is 0.
    masked = ts.token_stats(torch.tensor([[0.0, 0.0, -math.inf]]), torch.tensor([0]))
    assert masked.mu[0] == pytest.approx(-LN2, rel=1e-6)
    assert masked.sigma[0] == pytest.approx(0.0, abs=1e-6)
    assert ts.calibrated(ts.TokenStats((-LN2,), (-LN2,), (0.0,))) == [0.0]


def test_token_stats_in_chunks_equals_one_block(monkeypatch):
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(10, 7, generator=gen)
    targets = torch.randint(0, 7, (10,), generator=gen)
    whole = ts.token_stats(logits, targets)
    monkeypatch.setattr(ts, "_STATS_CHUNK", 3)
    chunked = ts.token_stats(logits, targets)
    assert chunked.log_probs == pytest.approx(whole.log_probs, abs=1e-6)
    assert chunked.sigma == pytest.approx(whole.sigma, abs=1e-6)


# --- not measured -----------------------------------------------------------------------------


def test_black_box_victim_or_signals_off_give_nothing():
    fake = load("fake:victim")
    piece = split(Snippet("s1", "some words of text here"), "whitespace", 4)
    assert sig.compute_signals(fake, piece, MeasureOptions()) == {}
    victim = bigram_victim()
    calls = counted(victim.torch_model)
    assert sig.compute_signals(victim, piece_of(victim), MeasureOptions(signals=False)) == {}
    assert calls == []


def test_black_box_reference_is_skipped_with_the_rest_measured():
    victim = bigram_victim()
    out = sig.compute_signals(victim, piece_of(victim), MeasureOptions(), load("fake:victim"))
    assert "ref_ratio" not in out and out["loss"] == pytest.approx(8 / 5 * LN2, rel=1e-6)


# --- cost and cache ---------------------------------------------------------------------------


def test_one_victim_forward_and_one_reference_forward_per_snippet():
    victim = bigram_victim()
    reference = WhiteBox(Bigram(), CharTokenizer(bos=False, name="other"), "reference")
    v_calls, r_calls = counted(victim.torch_model), counted(reference.torch_model)
    sig.compute_signals(victim, piece_of(victim), MeasureOptions(), reference)
    assert (len(v_calls), len(r_calls)) == (1, 1)  # x and lower(x) in the same call


def test_cache_skips_the_model_on_the_second_call():
    victim = bigram_victim()
    calls = counted(victim.torch_model)
    first = sig.compute_signals(victim, piece_of(victim), MeasureOptions())
    second = sig.compute_signals(victim, piece_of(victim), MeasureOptions())
    assert len(calls) == 1
    assert second == first
    first["loss"] = second["loss"] = -1.0  # callers editing their copies do not change the cache
    third = sig.compute_signals(victim, piece_of(victim), MeasureOptions())
    assert third["loss"] == pytest.approx(8 / 5 * LN2, rel=1e-6)
    sig.compute_signals(victim, piece_of(victim), MeasureOptions(min_k_percent=50))
    other = bigram_victim()
    sig.compute_signals(other, piece_of(other), MeasureOptions())
    assert len(calls) == 2  # another k is computed again; another model runs itself
    sig.clear_cache()
    sig.compute_signals(victim, piece_of(victim), MeasureOptions())
    assert len(calls) == 3


def test_cache_is_bounded_lru():
    cache = mc.MeasureCache(size=2)
    cache.put(("a",), {"v": 1})
    cache.put(("b",), {"v": 2})
    assert cache.get(("a",)) == {"v": 1}  # 'a' is now the most recent
    cache.put(("c",), {"v": 3})
    assert cache.get(("b",)) is None and cache.get(("a",)) == {"v": 1}


# --- a real (tiny, random) transformers model ---------------------------------------------------

LICENCE = (
    "Licensed under the Apache License, Version 2.0 (the License); you may not use this file "
    "except in compliance with the License. You may obtain a copy of the License at"
)


@pytest.fixture(
    scope="module",
    params=[False, True],
    ids=["defines-a-bos-it-never-adds (GPT-2, SmolLM2)", "adds-a-bos (Llama, Gemma)"],
)
def tiny(request) -> Any:
    return tiny_hf_generator(adds_bos=request.param)


def _hf_loss(model: Any, row: list[int], n_unscored: int = 0) -> float:
    """transformers' own mean NLL of ``row`` (labels = inputs; the first n_unscored ignored)."""
    ids = torch.tensor([row])
    labels = ids.clone()
    labels[0, : n_unscored + 1] = -100  # position 0 is never predicted; + the prefix
    with torch.inference_mode():
        return float(model(input_ids=ids, labels=labels).loss)


def test_loss_suffix_loss_and_mu_match_transformers(tiny):
    piece = split(Snippet("lic", LICENCE), tiny.tokenizer, 30)
    out = sig.compute_signals(tiny, piece, MeasureOptions())
    row = tiny.tokenizer.encode(piece.text)  # what the tokenizer puts in front by default
    n_front = len(row) - 30  # 1 with a BOS added, else 0
    model = tiny.torch_model
    assert out["tokens"] == len(row) - 1  # every token that has something before it
    assert out["loss"] == pytest.approx(_hf_loss(model, row), abs=1e-5)
    # the suffix given the prefix: ignore the labels of what is in front and of the prefix
    assert out["suffix_loss"] == pytest.approx(
        _hf_loss(model, row, n_front + len(piece.prefix_ids) - 1), abs=1e-5
    )
    # μ_t = −entropy of the next-token distribution (torch's Categorical, independently)
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([row])).logits[0, :-1]
    stats = ts.token_stats(logits, torch.tensor(row[1:]))
    entropy = torch.distributions.Categorical(logits=logits.double()).entropy()
    assert stats.mu == pytest.approx((-entropy).tolist(), abs=1e-5)
    logp = torch.log_softmax(logits.double(), -1)  # σ_t in float64, the two-pass way
    centred = logp - (logp.exp() * logp).sum(-1, keepdim=True)
    sigma = (logp.exp() * centred * centred).sum(-1).sqrt()
    assert stats.sigma == pytest.approx(sigma.tolist(), abs=1e-4)
    z = sorted(ts.calibrated(stats))[: ts.min_k_count(len(row) - 1, 20)]
    # z divides by σ (itself good to 1e-4 between a padded batch and one row): 1e-4 here too.
    assert out["min_k_pp"] == pytest.approx(sum(z) / len(z), abs=1e-4)


def test_padded_rows_score_as_unpadded(tiny):
    tok = tiny.tokenizer
    short_text = "Licensed under"
    short, _ = sp.model_row(tok, tok.encode(short_text, add_special_tokens=False), short_text)
    long, _ = sp.model_row(tok, tok.encode(LICENCE, add_special_tokens=False), LICENCE)
    model = tiny.torch_model
    with torch.inference_mode():
        alone = sp.row_stats(
            sp.forward_rows(model, [short], pad_id=0, device="cpu")[0], short, calibrate=True
        )
        batch = sp.forward_rows(model, [short, long], pad_id=0, device="cpu")
        padded = sp.row_stats(batch[0], short, calibrate=True)
        long_alone = sp.row_stats(
            sp.forward_rows(model, [long], pad_id=0, device="cpu")[0], long, calibrate=True
        )
        long_batched = sp.row_stats(batch[1], long, calibrate=True)
    assert len(short) < len(long)  # the short row really was padded
    assert padded.log_probs == pytest.approx(alone.log_probs, abs=1e-5)
    assert padded.mu == pytest.approx(alone.mu, abs=1e-5)
    assert padded.sigma == pytest.approx(alone.sigma, abs=1e-5)
    assert long_batched.log_probs == pytest.approx(long_alone.log_probs, abs=1e-5)


def test_lowercase_in_the_batch_equals_lower_text_alone(tiny):
    piece = split(Snippet("lic", LICENCE), tiny.tokenizer, 30)
    calls = counted(tiny.torch_model)
    out = sig.compute_signals(tiny, piece, MeasureOptions())
    assert len(calls) == 1
    tok = tiny.tokenizer
    lower_text = piece.text.lower()
    lower_row, _ = sp.model_row(tok, tok.encode(lower_text, add_special_tokens=False), lower_text)
    assert len(lower_row) != len(tok.encode(piece.text))  # one of x, lower(x) was padded
    lower_loss = _hf_loss(tiny.torch_model, lower_row)
    assert out["lowercase"] == pytest.approx(out["loss"] / lower_loss, rel=1e-5)


def test_whitespace_split_is_tokenized_again(tiny):
    piece = split(Snippet("lic", LICENCE), "whitespace", 12)
    out = sig.compute_signals(tiny, piece, MeasureOptions())
    tok = tiny.tokenizer
    ids = tok.encode(piece.text, add_special_tokens=False)
    assert len(ids) in (out["tokens"], out["tokens"] + 1)
    row = tok.encode(piece.text)
    assert out["tokens"] == len(row) - 1
    assert out["loss"] == pytest.approx(_hf_loss(tiny.torch_model, row), abs=1e-5)


def test_loss_and_min_k_equal_mimirs_formulas_on_a_tokenizer_that_adds_no_bos():
    """mimir's ``attacks/loss.py`` and ``attacks/min_k.py``, written out here: the text goes
    through ``tokenizer.encode(text)`` (its own default, no BOS for SmolLM2-style tokenizers),
    loss is transformers' mean NLL with ``labels = input_ids``, Min-K% the mean of the lowest
    ``int(k · n)`` token log-probs, negated. memprobe's Min-K% has the opposite sign; the
    values are otherwise equal (prepending the defined BOS changed loss by up to 0.50)."""
    import numpy as np

    victim = tiny_hf_generator(seed=5, adds_bos=False)
    tok, model = victim.tokenizer, victim.torch_model
    assert tok.bos_token_id is not None  # it defines one ...
    piece = split(Snippet("lic", LICENCE), tok, 40)
    input_ids = torch.tensor([tok.encode(piece.text)])
    assert int(input_ids[0, 0]) != tok.bos_token_id  # ... and never adds it
    with torch.inference_mode():
        mimir_loss = float(model(input_ids, labels=input_ids).loss)
        logits = model(input_ids).logits
    log_probs = torch.nn.functional.log_softmax(logits[0, :-1], dim=-1)
    token_log_probs = log_probs.gather(-1, input_ids[0][1:].unsqueeze(-1)).squeeze(-1).numpy()
    k_length = int(len(token_log_probs) * 0.2)
    mimir_min_k = -np.mean(np.sort(token_log_probs)[:k_length])
    out = sig.compute_signals(victim, piece, MeasureOptions(min_k_percent=20))
    assert out["loss"] == pytest.approx(mimir_loss, abs=1e-5)
    assert out["min_k"] == pytest.approx(-mimir_min_k, abs=1e-5)
