"""Parsing an ``echo`` + ``logprobs`` answer into a text's token log-probs, on hand-made bodies
shaped like vLLM's, OpenAI's and a server's that ignores ``echo``."""

from __future__ import annotations

import math

import pytest

from memprobe_core.models.base import LogprobsUnavailable, ModelError
from memprobe_core.models.openai.echo import echo_payload, parse_echo

WHERE = "endpoint test"
TEXT = "ab cd"  # tokens "ab", " cd"


def body(tokens, values, offsets=None, usage=None):
    logprobs = {"tokens": tokens, "token_logprobs": values}
    if offsets is not None:
        logprobs["text_offset"] = offsets
    out = {"choices": [{"index": 0, "text": TEXT + "!", "logprobs": logprobs}]}
    if usage is not None:
        out["usage"] = usage
    return out


def test_the_request_asks_for_the_prompt_log_probs_and_one_token():
    payload = echo_payload("m", TEXT)
    assert payload == {
        "model": "m",
        "prompt": TEXT,
        "echo": True,
        "logprobs": 1,
        "max_tokens": 1,
        "temperature": 0.0,
    }


def test_vllm_shape_with_bos_in_front_shifts_offsets_back():
    # vLLM: "<s>" (null) counted in the offsets, then the prompt, then the generated "!".
    got = parse_echo(
        body(
            ["<s>", "ab", " cd", "!"],
            [None, -1.5, -0.25, -3.0],
            offsets=[0, 3, 5, 8],
            usage={"prompt_tokens": 3, "completion_tokens": 1},
        ),
        TEXT,
        WHERE,
    )
    assert got.log_probs == (-1.5, -0.25)  # BOS unscored, generated token dropped
    assert got.offsets == (0, 2)  # shifted back by len("<s>") = 3


def test_openai_shape_without_bos_leaves_the_first_token_unscored():
    got = parse_echo(
        body(["ab", " cd", "!"], [None, -0.5, -2.0], offsets=[0, 2, 5], usage={}), TEXT, WHERE
    )
    assert got.log_probs == (-0.5,)
    assert got.offsets == (2,)


def test_without_offsets_the_token_texts_give_them():
    got = parse_echo(body(["<s>", "ab", " cd", "!"], [None, -1.0, -2.0, -3.0]), TEXT, WHERE)
    assert got.log_probs == (-1.0, -2.0)
    assert got.offsets == (0, 2)


def test_completion_tokens_say_where_the_prompt_ends_without_prompt_tokens():
    got = parse_echo(
        body(
            ["ab", " cd", "!", "?"],
            [None, -0.5, -2.0, -1.0],
            offsets=[0, 2, 5, 6],
            usage={"completion_tokens": 2},
        ),
        TEXT,
        WHERE,
    )
    assert got.log_probs == (-0.5,)


def test_a_server_that_ignores_echo_cannot_score():
    with pytest.raises(LogprobsUnavailable, match="did not return the prompt's log-probs"):
        parse_echo(body(["!"], [-3.0], offsets=[5], usage={"completion_tokens": 1}), TEXT, WHERE)


def test_no_logprobs_object_cannot_score():
    with pytest.raises(LogprobsUnavailable, match="without 'logprobs'"):
        parse_echo({"choices": [{"index": 0, "text": TEXT}]}, TEXT, WHERE)


@pytest.mark.parametrize(
    ("values", "offsets", "message"),
    [
        ([None, 0.7, -1.0], [0, 2, 5], "above 0"),
        ([None, math.nan, -1.0], [0, 2, 5], "not a number"),
        ([None, "x", -1.0], [0, 2, 5], "not a number"),
        ([None, -0.5, -1.0], [0, 2], "inconsistent"),
        ([None, -0.5, -1.0], [0, "two", 5], "other than offsets"),
    ],
)
def test_malformed_log_probs_are_model_errors(values, offsets, message):
    with pytest.raises(ModelError, match=message) as info:
        parse_echo(body(["ab", " cd", "!"], values, offsets=offsets), TEXT, WHERE)
    assert not isinstance(info.value, LogprobsUnavailable)


def test_choices_of_the_wrong_shape_are_model_errors():
    with pytest.raises(ModelError, match="list of choices"):
        parse_echo({"choices": "nope"}, TEXT, WHERE)
