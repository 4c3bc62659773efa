"""fake:script: answers come from the caller's script; calls and requests are remembered."""

from __future__ import annotations

import pytest

import memprobe_core.models.scripted as scripted
from memprobe_core.models import load
from memprobe_core.models.base import Completion, ModelError
from memprobe_core.models.scripted import Ask, ScriptedCall, ScriptedGenerator


def test_a_list_is_consumed_one_answer_per_sequence_then_the_default():
    model = load("fake:script", outputs=["one two three", "four"], default="rest")
    out = model.generate(["q1", "q2"], n=2, max_new_tokens=2)
    assert [[c.text for c in row] for row in out] == [["one two", "four"], ["rest", "rest"]]
    assert [c.finish_reason for c in out[0]] == ["length", "stop"]
    assert model.requests == ["q1", "q2"]
    assert model.stats.sequences == 4


def test_a_function_answers_from_the_request_and_chats_are_accepted():
    model = ScriptedGenerator(
        lambda ask: "yes" if "magic" in ask.text else "no", chat_template=True
    )
    out = model.generate(["say magic", [{"role": "user", "content": "plain"}]])
    assert [row[0].text for row in out] == ["yes", "no"]
    assert model.has_chat_template and "plain" in model.requests[1]


def test_the_function_sees_the_request_the_sample_and_the_calls_settings():
    asks: list[Ask] = []

    def answer(ask: Ask) -> str:
        asks.append(ask)
        return f"{ask.content} {ask.index}"

    model = ScriptedGenerator(answer)
    chat = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    out = model.generate(["plain", chat], n=2, max_new_tokens=7, temperature=0.5, seed=4)
    assert [[c.text for c in row] for row in out] == [["plain 0", "plain 1"], ["hi 0", "hi 1"]]
    assert [(a.request, a.index) for a in asks] == [
        ("plain", 0),
        ("plain", 1),
        (chat, 0),
        (chat, 1),
    ]
    assert asks[2].text.startswith("System: be brief") and asks[2].text.endswith("Assistant:")
    assert model.calls == [ScriptedCall(["plain", chat], 2, 7, 0.5, 1.0, 4)]
    assert all(a.call is asks[0].call for a in asks)


def test_the_random_generator_follows_the_seed_and_differs_between_samples():
    def sample(seed: int | None) -> list[str]:
        model = ScriptedGenerator(lambda ask: str(ask.rng.random()))
        return [c.text for row in model.generate(["a", "b"], n=3, seed=seed) for c in row]

    first = sample(7)
    assert first == sample(7) and first != sample(8)
    assert len(set(first)) == 6  # one stream per call, drawn in order by every sequence


def test_a_scripted_completion_is_returned_as_is():
    done = Completion("a b c d", 99, "length", [1, 2, 3])
    model = ScriptedGenerator([done, "x y z"])
    out = model.generate(["q"], n=2, max_new_tokens=2)
    assert out[0][0] is done and model.stats.generated_tokens == 99 + 2
    assert (out[0][1].text, out[0][1].token_ids) == ("x y", None)


def test_tokenizer_whitespace_none_or_the_tests_own():
    assert ScriptedGenerator().tokenizer.encode("a b a") == [0, 1, 0]
    assert ScriptedGenerator(tokenizer=None).tokenizer is None
    own = object()
    assert ScriptedGenerator(tokenizer=own).tokenizer is own  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="tokenizer 'words'"):
        ScriptedGenerator(tokenizer="words")  # type: ignore[arg-type]


def test_latency_sleeps_once_per_call(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(scripted.time, "sleep", slept.append)
    model = load("fake:script", outputs=["a"], latency_s=0.25)
    model.generate(["q1", "q2"], n=3)
    model.generate(["q3"])
    assert slept == [0.25, 0.25]
    ScriptedGenerator().generate(["q"])
    assert slept == [0.25, 0.25]  # no latency: no sleep at all
    with pytest.raises(ModelError, match="latency_s -1"):
        ScriptedGenerator(latency_s=-1)


def test_unknown_options_are_refused():
    with pytest.raises(ModelError, match="outputs="):
        load("fake:script", temperature=3)
