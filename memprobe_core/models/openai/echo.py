"""Log-probs of a given text from an OpenAI-compatible server: ``/completions`` with ``echo``.

This is how the legacy completions API scores a prompt (lm-evaluation-harness' ``loglikelihood``
and the membership-inference toolkits use it): ``prompt`` is the text, ``echo: true`` and
``logprobs: 1`` ask for the log-prob of every prompt token, ``max_tokens: 1`` because vLLM
refuses 0 (the one generated token is dropped), ``temperature: 0``. The answer's ``logprobs``
lists the prompt's tokens (``tokens``, ``token_logprobs``, ``text_offset``), then the generated
one; the first prompt token has ``null`` (nothing before it to predict it from).

Servers differ, and each difference is handled here rather than trusted:

- vLLM puts the BOS token in front (``null``, its text e.g. ``<s>``), which shifts every
  ``text_offset`` by that text's length: the shift is read off the generated token, which
  starts right after the prompt.
- ``usage.prompt_tokens`` says where the prompt ends; without it, the generated tokens
  (``usage.completion_tokens``, else the one asked for) are cut from the end.
- A server that ignores ``echo`` (llama.cpp at the time of writing) returns only the generated
  token: that is :class:`LogprobsUnavailable`, never a one-token "text".
- Chat-only APIs refuse the request (HTTP 400/404): also :class:`LogprobsUnavailable`.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from memprobe_core.models.base import LogprobsUnavailable, ModelError, TextLogprobs


def echo_payload(model: str, text: str) -> dict[str, Any]:
    """The request that asks for the log-probs of ``text``'s own tokens."""
    return {
        "model": model,
        "prompt": text,
        "echo": True,
        "logprobs": 1,
        "max_tokens": 1,
        "temperature": 0.0,
    }


def parse_echo(body: dict[str, Any], text: str, where: str) -> TextLogprobs:
    """The scored prompt tokens of an ``echo`` answer for ``text``.

    Raises:
        LogprobsUnavailable: the answer carries no prompt log-probs (``echo`` ignored or refused).
        ModelError: log-probs of the wrong shape (not numbers, lists of different lengths).
    """
    entries = _logprobs_object(body, where)
    values = _list(entries, "token_logprobs", where)
    if values is None:
        raise LogprobsUnavailable(f"{where} returned no 'token_logprobs'")
    tokens = _list(entries, "tokens", where)
    offsets = _list(entries, "text_offset", where)
    for name, other in (("tokens", tokens), ("text_offset", offsets)):
        if other is not None and len(other) != len(values):
            raise ModelError(
                f"{where}: 'logprobs.{name}' has {len(other)} entries, 'token_logprobs' "
                f"{len(values)}; the server's answer is inconsistent"
            )
    n_prompt = _prompt_entries(body.get("usage"), len(values))
    if n_prompt < 2:
        raise LogprobsUnavailable(
            f"{where} did not return the prompt's log-probs (it answered {len(values)} token(s) "
            "for an echo request)"
        )
    starts = _starts(tokens, offsets, n_prompt, len(text), where)
    scored = [
        (float(v), start)
        for v, start in zip(values[:n_prompt], starts)
        if v is not None and _number(v, where)
    ]
    if not scored:
        raise LogprobsUnavailable(f"{where} returned no log-prob for any token of the text")
    return TextLogprobs(tuple(v for v, _ in scored), tuple(s for _, s in scored))


def _logprobs_object(body: dict[str, Any], where: str) -> dict[str, Any]:
    choices = body.get("choices")
    if "error" in body and not choices:
        raise LogprobsUnavailable(f"{where} refused to score a text: {str(body['error'])[:200]}")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelError(f"{where} answered an echo request without a list of choices")
    entries = choices[0].get("logprobs")
    if not isinstance(entries, dict):
        raise LogprobsUnavailable(f"{where} answered an echo request without 'logprobs'")
    return entries


def _list(entries: dict[str, Any], name: str, where: str) -> list[Any] | None:
    value = entries.get(name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise ModelError(f"{where}: 'logprobs.{name}' is a {type(value).__name__}, not a list")
    return value


def _number(value: Any, where: str) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelError(f"{where}: a token log-prob is {value!r}, not a number")
    if isinstance(value, int) and not _FLOAT_MIN <= value <= _FLOAT_MAX:
        # Found by fuzzing: JSON holds integers of any size, and one past a float's range
        # (1 followed by 400 zeros) escaped from math.isnan and float() as OverflowError.
        raise ModelError(
            f"{where}: a token log-prob is a whole number of {value.bit_length()} bits, too large "
            "for a float (not a log-prob); the server's answer is broken"
        )
    if math.isnan(value):
        raise ModelError(f"{where}: a token log-prob is {value!r}, not a number")
    if value > 1e-6:  # a log-prob is at most 0; a little above is rounding
        raise ModelError(f"{where}: a token log-prob is {value!r}, above 0 (not a log-prob)")
    return True


# The whole numbers a float can hold (roughly): a JSON integer past them is no log-prob.
_FLOAT_MAX = int(sys.float_info.max)
_FLOAT_MIN = -_FLOAT_MAX


def _prompt_entries(usage: Any, total: int) -> int:
    """How many of ``total`` entries are the prompt's (the rest were generated)."""
    usage = usage if isinstance(usage, dict) else {}
    prompt = usage.get("prompt_tokens")
    if _count(prompt) and prompt <= total:
        return int(prompt)
    generated = usage.get("completion_tokens")
    if _count(generated) and generated < total:
        return total - int(generated)
    return total - 1  # the one token asked for


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _starts(
    tokens: list[Any] | None, offsets: list[Any] | None, n_prompt: int, text_len: int, where: str
) -> list[int]:
    """Where each prompt token starts in the text sent (offsets corrected for a BOS in front)."""
    if offsets is not None:
        if not all(_count(o) for o in offsets):
            raise ModelError(f"{where}: 'logprobs.text_offset' holds something other than offsets")
        starts = [int(o) for o in offsets]
    elif tokens is not None and all(isinstance(t, str) for t in tokens):
        starts, at = [], 0
        for token in tokens:
            starts.append(at)
            at += len(token)
    else:
        raise LogprobsUnavailable(
            f"{where} returned log-probs without tokens or text offsets; cannot tell the prefix "
            "from the suffix"
        )
    # The first generated token starts right after the prompt: anything before the text (a
    # BOS token's text, which vLLM counts) shows as its offset minus the text's length.
    if len(starts) > n_prompt:
        lead = max(0, starts[n_prompt] - text_len)
    elif tokens is not None and isinstance(tokens[n_prompt - 1], str):
        lead = max(0, starts[n_prompt - 1] + len(tokens[n_prompt - 1]) - text_len)
    else:
        lead = 0
    return [max(0, s - lead) for s in starts[:n_prompt]]
