"""Drafting from a reference gives the tokens of plain greedy decoding, and drafts are accepted.

Random tiny models reproduce no text, so the references are built from their own greedy output:
exactly it (every draft accepted), with a token changed, shifted by two, random, or empty.
"""

from __future__ import annotations

import random

import pytest
import torch
from transformers import Gemma3ForCausalLM

from memprobe_core.models.hf_decode import BatchDecoding, decode, generate_reference
from memprobe_core.models.hf_speculative import (
    Drafter,
    DraftPolicy,
    DraftStats,
    decode_drafted,
    draft_length,
    greedy_agreement,
)
from tests.helpers.tiny_models import tiny_causal_lm, tiny_gemma3_config, tiny_hf_generator

KINDS = ("exact", "changed", "shifted", "random", "empty")


@pytest.fixture(scope="module")
def llama():
    model, _ = tiny_causal_lm()
    return model


@pytest.fixture(scope="module")
def gemma():
    """A tiny Gemma-3 whose sliding window (20) the longer runs go past."""
    _, tokenizer = tiny_causal_lm()
    with torch.random.fork_rng():
        torch.manual_seed(1)
        return Gemma3ForCausalLM(tiny_gemma3_config(len(tokenizer), sliding_window=20)).eval()


def _reference(ids: tuple[int, ...], kind: str, rng: random.Random) -> list[int]:
    out = list(ids)
    if kind == "changed" and out:
        j = rng.randrange(len(out))
        out[j] = (out[j] + 7) % 300 + 10
    elif kind == "shifted":
        out = out[2:]
    elif kind == "random":
        out = [rng.randrange(10, 300) for _ in range(20)]
    elif kind == "empty":
        out = []
    return out


def _trials(model, n: int, seed: int):
    """(prompts, references, spec, plain result) of ``n`` random batches."""
    rng = random.Random(seed)
    for trial in range(n):
        rows = rng.randint(1, 6)
        prompts = [[rng.randrange(10, 300) for _ in range(rng.randint(1, 12))] for _ in range(rows)]
        spec = BatchDecoding(
            max_new_tokens=rng.randint(1, 40),
            temperature=0.0,
            top_p=1.0,
            stop_ids=(rng.randrange(10, 300),) if trial % 2 else (),
            pad_id=0,
        )
        with torch.inference_mode():
            plain = decode(model, prompts, spec)
        references = [_reference(r.ids, rng.choice(KINDS), rng) for r in plain]
        yield prompts, references, spec, plain


@pytest.mark.parametrize("name,kept", [("llama", 200), ("gemma", 40)])
def test_same_tokens_and_stops_as_plain_greedy(name, kept, request):
    """On Gemma many runs go past its window of 20, after which no row drafts (fewer kept)."""
    model = request.getfixturevalue(name)
    stats = DraftStats()
    for prompts, references, spec, plain in _trials(model, 60, seed=3):
        with torch.inference_mode():
            drafted = decode_drafted(model, prompts, references, spec, stats=stats)
        assert drafted == plain, (prompts, references, spec)
    # The runs did draft, and most of what they drafted was kept.
    assert stats.accepted > kept and stats.accepted / stats.drafted > 0.5


def test_same_tokens_as_model_generate(llama):
    for prompts, references, spec, _ in _trials(llama, 10, seed=4):
        with torch.inference_mode():
            drafted = decode_drafted(llama, prompts, references, spec)
            theirs = generate_reference(llama, prompts, spec)
        assert drafted == theirs


def test_a_known_answer_takes_a_few_passes(llama):
    """A row whose reference is its answer is verified in a handful of passes, not one a token."""
    prompt = [[11, 12, 13, 14]]
    spec = BatchDecoding(max_new_tokens=40, temperature=0.0, top_p=1.0, stop_ids=(), pad_id=0)
    with torch.inference_mode():
        plain = decode(llama, prompt, spec)
        stats = DraftStats()
        drafted = decode_drafted(llama, prompt, [list(plain[0].ids)], spec, stats=stats)
    assert drafted == plain
    assert stats.passes <= 5 and stats.accepted == stats.drafted


def test_rows_past_the_sliding_window_stay_exact(gemma):
    """Rows accept different numbers of drafted tokens while the sequences cross the window."""
    prompts = [[20, 21, 22], [30, 31, 32, 33, 34, 35, 36, 37, 38]]
    spec = BatchDecoding(max_new_tokens=30, temperature=0.0, top_p=1.0, stop_ids=(), pad_id=0)
    with torch.inference_mode():
        plain = decode(gemma, prompts, spec)
        references = [
            list(plain[0].ids),
            list(plain[1].ids[:5]) + [7, 7, 7] + list(plain[1].ids[8:]),
        ]
        stats = DraftStats()
        drafted = decode_drafted(gemma, prompts, references, spec, stats=stats)
    assert drafted == plain
    assert 0 < stats.accepted < stats.drafted  # one row kept all, the other lost some


def test_sampling_is_refused(llama):
    spec = BatchDecoding(max_new_tokens=4, temperature=1.0, top_p=1.0, stop_ids=(), pad_id=0)
    with pytest.raises(ValueError, match="greedy"):
        decode_drafted(llama, [[1, 2]], [[3]], spec)


# --- the draft of one row -----------------------------------------------------------------------


def test_drafter_follows_the_reference_and_resynchronises_by_lookup():
    policy = DraftPolicy(ngram_sizes=(2,))
    drafter = Drafter([1, 2, 3, 4, 5, 6, 7], prompt=[9, 9], policy=policy)
    assert drafter.proposal(3) == (1, 2, 3)
    for token in (1, 2):
        drafter.observe(token)
    assert drafter.proposal(2) == (3, 4)
    drafter.observe(8)  # off the reference: nothing to look up yet ("2 8" is nowhere)
    assert drafter.proposal(3) == ()
    drafter.observe(4)
    drafter.observe(5)  # "4 5" is in the reference: go on after it
    assert drafter.proposal(3) == (6, 7)


def test_drafter_looks_in_the_prompt_too():
    drafter = Drafter([], prompt=[5, 6, 7, 8], policy=DraftPolicy(ngram_sizes=(2,)))
    assert drafter.proposal(4) == ()
    drafter.observe(5)
    drafter.observe(6)
    assert drafter.proposal(4) == (7, 8)


def test_acceptance_rate_and_draft_length():
    policy = DraftPolicy(position_cost=0.1, prior_acceptance=0.5)
    good, bad = Drafter([1] * 50, [], policy), Drafter([1] * 50, [], policy)
    good.record(40, 40)
    bad.record(40, 0)
    assert good.rate() > 0.9 > 0.1 > bad.rate()
    long_draft = (1,) * 32
    assert draft_length([long_draft], [good], 0.1) >= 8  # a row that keeps its drafts drafts long
    assert draft_length([long_draft], [bad], 0.1) == 0  # one that loses them takes plain steps
    # A batch of rows that lose their drafts does not pay for one row that keeps them.
    assert draft_length([long_draft] * 24, [good] + [bad] * 23, 0.1) == 0


# --- teacher forcing ----------------------------------------------------------------------------


def _agreement_rows(model, rng: random.Random, rows: int, new_tokens: int):
    """Random prompts, continuations built from the model's own greedy answer with one token
    changed at a random place (or none), and the run generation reproduces of each."""
    prompts, continuations, expected = [], [], []
    spec = BatchDecoding(
        max_new_tokens=new_tokens, temperature=0.0, top_p=1.0, stop_ids=(), pad_id=0
    )
    for _ in range(rows):
        prompt = [rng.randrange(10, 300) for _ in range(rng.randint(1, 10))]
        with torch.inference_mode():
            answer = list(decode(model, [prompt], spec)[0].ids)
        length = rng.randint(0, new_tokens)  # some continuations are shorter, one may be empty
        keep = rng.randint(0, length)
        continuation = answer[:length]
        if keep < length:
            continuation[keep] = (answer[keep] + 3) % 290 + 10
        prompts.append(prompt)
        continuations.append(continuation)
        expected.append(keep)
    return prompts, continuations, expected


@pytest.mark.parametrize("name", ["llama", "gemma"])
@pytest.mark.parametrize(
    "first_chunk,growth,max_positions",
    [(1, 2, 256), (3, 2, 256), (5, 4, 256), (16, 4, 256), (100, 4, 256), (16, 4, 20)],
)
def test_greedy_agreement_equals_what_generation_reproduces(
    name, first_chunk, growth, max_positions, request
):
    """Twelve rows in one batch, fed in chunks of every size (1 token and up, so rows leave the
    batch at different passes; 20 positions a pass: 1 to 3 a row); on Gemma the 45-token runs
    cross its 20-token window."""
    model = request.getfixturevalue(name)
    rng = random.Random(7)
    prompts, continuations, expected = _agreement_rows(model, rng, 12, 45)
    with torch.inference_mode():
        got = greedy_agreement(
            model,
            prompts,
            continuations,
            pad_id=0,
            first_chunk=first_chunk,
            growth=growth,
            max_positions=max_positions,
        )
    assert got == expected


def test_greedy_agreement_stops_feeding_rows_that_disagree(llama):
    """A row that disagrees at once costs one short pass; one that agrees is fed to its end."""
    rng = random.Random(3)
    prompts, continuations, _ = _agreement_rows(llama, rng, 2, 40)
    spec = BatchDecoding(max_new_tokens=40, temperature=0.0, top_p=1.0, stop_ids=(), pad_id=0)
    with torch.inference_mode():
        own = list(decode(llama, [prompts[0]], spec)[0].ids)
    wrong = [(own[0] + 3) % 290 + 10] + own[1:]
    fed: list[int] = []
    original = llama.forward

    def counting(*args, **kwargs):
        fed.append(int(kwargs["input_ids"].shape[0] * kwargs["input_ids"].shape[1]))
        return original(*args, **kwargs)

    llama.forward = counting
    try:
        with torch.inference_mode():
            assert greedy_agreement(llama, [prompts[0]], [wrong], pad_id=0, first_chunk=4) == [0]
            one_pass = sum(fed)
            fed.clear()
            assert greedy_agreement(llama, [prompts[0]], [own], pad_id=0, first_chunk=4) == [40]
    finally:
        del llama.forward
    assert one_pass == len(prompts[0]) + 3  # the prompt and the first chunk but its last token
    assert len(fed) == 3  # chunks of 4, 16 and the last 20
    assert sum(fed) == len(prompts[0]) + 39  # every token fed once: nothing recomputed


def test_greedy_agreement_refuses_bad_input(llama):
    with pytest.raises(ValueError, match="prompt token"):
        greedy_agreement(llama, [[]], [[5, 6]], pad_id=0)
    with pytest.raises(ValueError, match="growth"):
        greedy_agreement(llama, [[5]], [[5, 6]], pad_id=0, growth=1)
    assert greedy_agreement(llama, [[5], []], [[], []], pad_id=0) == [0, 0]


# --- through the hf backend ---------------------------------------------------------------------


def test_generator_drafts_only_when_asked_and_answers_the_same():
    gen = tiny_hf_generator()
    prompts = ["Licensed under the Apache", "We the People of", "def add(a, b):"]
    plain = gen.generate(prompts, max_new_tokens=24)
    references = [row[0].text for row in plain]
    drafted = gen.generate(prompts, max_new_tokens=24, references=references)
    assert drafted == plain
    assert gen.draft_stats.accepted > 0
    off = gen.variant(speculative=False)
    off.draft_stats = DraftStats()
    assert off.generate(prompts, max_new_tokens=24, references=references) == plain
    assert off.draft_stats.passes == 0
    assert gen.manifest()["speculative"] is True and off.manifest()["speculative"] is False


def test_references_must_match_the_requests():
    gen = tiny_hf_generator()
    with pytest.raises(ValueError, match="one per request"):
        gen.generate(["a", "b"], max_new_tokens=2, references=["x"])
