"""fake:script: answers come from the caller's script; requests are remembered."""

from __future__ import annotations

import pytest

from memprobe_core.models import load
from memprobe_core.models.base import ModelError
from memprobe_core.models.scripted import ScriptedGenerator


def test_a_list_is_consumed_one_answer_per_sequence_then_the_default():
    model = load("fake:script", outputs=["one two three", "four"], default="rest")
    out = model.generate(["q1", "q2"], n=2, max_new_tokens=2)
    assert [[c.text for c in row] for row in out] == [["one two", "four"], ["rest", "rest"]]
    assert [c.finish_reason for c in out[0]] == ["length", "stop"]
    assert model.requests == ["q1", "q2"]
    assert model.stats.sequences == 4


def test_a_function_answers_from_the_request_and_chats_are_accepted():
    model = ScriptedGenerator(lambda text: "yes" if "magic" in text else "no", chat_template=True)
    out = model.generate(["say magic", [{"role": "user", "content": "plain"}]])
    assert [row[0].text for row in out] == ["yes", "no"]
    assert model.has_chat_template and "plain" in model.requests[1]


def test_unknown_options_are_refused():
    with pytest.raises(ModelError, match="outputs="):
        load("fake:script", temperature=3)
