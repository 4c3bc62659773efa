"""A sampling method on the shared parts: ``victim_decoding`` with sampling fields, and
``run_one_round`` / ``answer_requests`` taking that decoding (k answers per prompt, best by the
objective). Greedy stays the default, with the manifests and candidates it always had."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from memprobe_core.attacks import AttackOptions, ModelSet, run_method
from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.one_round import RoundPrompts, run_one_round
from memprobe_core.attacks.registry import MethodSpec, register, unregister
from memprobe_core.attacks.victim import answer_requests, victim_decoding
from memprobe_core.models.scripted import Ask, ScriptedGenerator
from memprobe_core.snippets.split import Snippet, split
from tests.helpers.tiny_models import tiny_hf_generator

WORDS = ["one", "two", "three", "alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
K = 4


def run_sampled(split, models, options, **kw: Any):
    """The method: the true prefix, K samples at temperature 1, the best by the objective."""
    # As docs/adding-a-method.md writes it.
    decoding = victim_decoding(split, options, temperature=1.0, top_k=40, n=K, seed=options.seed)
    asked = RoundPrompts(requests=[split.prefix], prompts=[split.prefix])
    return run_one_round(
        "ps_sampled", split, models, options, models.victim, asked, decoding=decoding, **kw
    )


@pytest.fixture
def sampled_method():
    register(
        MethodSpec(
            name="ps_sampled",
            label="P-S-Sampled (test)",
            run=run_sampled,
            roles=("victim",),
            rank=990,
            samples=True,
            summary="the true prefix, K samples, the best by Mem",
        )
    )
    yield "ps_sampled"
    unregister("ps_sampled")


def sp():
    return split(Snippet("x", " ".join(WORDS), domain="cc"), "whitespace", 9, prefix_ratio=1 / 3)


def graded_victim() -> ScriptedGenerator:
    """Sample i reproduces the first i + 1 suffix words (then filler): sample 3 is the best."""

    def answer(ask: Ask) -> str:
        if ask.call.temperature == 0:
            return "nothing remembered at all here"
        return " ".join(WORDS[3 : 4 + ask.index] + ["zzz"] * (5 - ask.index))

    return ScriptedGenerator(answer, model_id="victim")


def test_a_sampled_method_on_the_shared_parts_is_a_few_lines():
    body = inspect.getsource(run_sampled).splitlines()
    assert len(body) <= 8, "\n".join(body)


def test_the_sampled_method_asks_k_samples_and_keeps_the_best_by_mem(sampled_method):
    victim = graded_victim()
    options = AttackOptions(seed=11)
    result = run_method(sampled_method, sp(), ModelSet(victim=victim), options)
    (call,) = victim.calls  # one batched call for the K samples
    assert (call.n, call.temperature, call.seed, call.max_new_tokens) == (K, 1.0, 11, 6)
    assert call.references is None  # drafting verifies greedy choices: none when sampling
    assert [c.extra["sample"] for c in result.trace] == [0, 1, 2, 3]
    mems = [c.mem for c in result.trace]
    assert mems == sorted(mems) and mems[0] < mems[-1]
    assert result.mem == max(mems) == pytest.approx(4 / 6)
    assert result.output == "alpha bravo charlie delta zzz zzz"
    assert result.costs.victim_queries == K
    assert result.manifest["samples_per_request"] == K
    assert result.manifest["decoding"]["model"]["do_sample"] is True
    assert result.manifest["decoding"]["model"]["temperature"] == 1.0


def test_greedy_stays_the_default_with_the_manifest_it_had():
    victim = graded_victim()
    asked = RoundPrompts(requests=[sp().prefix], prompts=[sp().prefix])
    result = run_one_round("ps_inst", sp(), ModelSet(victim=victim), AttackOptions(), victim, asked)
    (call,) = victim.calls
    assert (call.n, call.temperature, call.top_k) == (1, 0.0, 0)
    assert "samples_per_request" not in result.manifest
    assert [c.extra for c in result.trace] == [{}]
    assert result.manifest["decoding"]["model"] == {
        "temperature": 0.0,
        "top_p": 1.0,
        "do_sample": False,
        "max_new_tokens": 6,
    }


def test_answer_requests_returns_n_answers_per_request_in_request_order():
    victim = ScriptedGenerator(lambda ask: f"{ask.text} sample {ask.index}")
    decoding = victim_decoding(sp(), AttackOptions(), temperature=1.0, n=2, seed=0)
    answers = answer_requests(
        CostMeter(), victim, ["a", "b"], sp(), AttackOptions(), decoding=decoding
    )
    assert [a.text for a in answers] == ["a sample 0", "a sample 1", "b sample 0", "b sample 1"]


def test_top_k_of_one_on_the_tiny_model_samples_the_greedy_answer(sampled_method):
    """Through a real decode loop: K top-1 samples are K copies of P-S-Inst's greedy answer."""
    victim = tiny_hf_generator()
    text = "Licensed under the Apache License, Version 2.0 (the License); you may not use this"
    piece = split(Snippet("t", text, domain="code"), victim.tokenizer, 16, prefix_ratio=0.5)
    options, models = AttackOptions(seed=3), ModelSet(victim=victim)
    asked = RoundPrompts(requests=[piece.prefix], prompts=[piece.prefix])
    greedy = run_one_round("ps_inst", piece, models, options, victim, asked)
    decoding = victim_decoding(piece, options, temperature=1.0, top_k=1, n=K, seed=3)
    top1 = run_one_round("ps_sampled", piece, models, options, victim, asked, decoding=decoding)
    assert [c.output for c in top1.trace] == [greedy.output] * K
    assert greedy.output  # something was written
    assert top1.manifest["decoding"]["model"]["top_k"] == 1
