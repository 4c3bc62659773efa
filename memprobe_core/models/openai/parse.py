"""Turn an OpenAI-compatible response body into Completions, refusing every malformed shape.

A server (or a proxy in front of it) may answer 200 with anything: HTML, a list, ``choices``
as a string or null, choices without ``text`` / ``message``. Each of those is a ``ModelError``
that names the endpoint and what was wrong, never an ``AttributeError`` or ``KeyError``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from memprobe_core.bounded import MAX_DEPTH, nesting_depth
from memprobe_core.models.base import Completion, ModelError
from memprobe_core.models.token_budget import bounded_answer

# How much of an unexpected body goes into an error message.
_SHOWN_CHARS = 200
# Tells "no such key" from a key holding null.
_MISSING = object()


def _same(text: str) -> str:
    return text


def shown(value: Any, limit: int, redact: Callable[[str], str]) -> str:
    """``value`` as text for an error message: redacted first, then cut to ``limit`` chars.

    Redacting before cutting matters: a cut could leave half a key that no pattern recognises.
    """
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return redact(text)[:limit]


def decode_json(body: bytes, where: str, *, redact: Callable[[str], str] = _same) -> dict[str, Any]:
    """Parse a 200 body as a JSON object (``redact`` cleans the body quoted in an error).

    Raises:
        ModelError: not JSON, or JSON that is not an object.
    """
    # Found by fuzzing: 2,000 bytes of "[" pass the size cap yet overflow the parser's stack; the
    # depth is checked before parsing (memprobe_core.bounded); no API answer nests that deep.
    depth = nesting_depth(body)
    if depth > MAX_DEPTH:
        raise ModelError(
            f"{where} answered with JSON nested {depth:,} levels deep "
            f"({shown(body, 40, redact)!r}…); memprobe reads at most {MAX_DEPTH} levels, an "
            f"OpenAI-compatible answer needs 8: check that base_url points at an "
            "OpenAI-compatible API (…/v1)"
        )
    try:
        data = json.loads(body)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        if "integer string conversion" in str(exc):  # over sys.get_int_max_str_digits()
            raise ModelError(
                f"{where} answered with a number of more digits than memprobe reads (at most "
                f"{sys.get_int_max_str_digits():,}); check that base_url points at an "
                "OpenAI-compatible API (…/v1)"
            ) from None
        raise ModelError(
            f"{where} answered with a body that is not JSON: {shown(body, _SHOWN_CHARS, redact)!r}; "
            "check that base_url points at an OpenAI-compatible API (…/v1)"
        ) from None
    if not isinstance(data, dict):
        raise ModelError(
            f"{where} answered with a JSON {type(data).__name__} where an object with 'choices' "
            "was expected; check that base_url points at an OpenAI-compatible API (…/v1)"
        )
    return data


def parse_choices(
    body: dict[str, Any],
    chat: bool,
    max_new_tokens: int,
    where: str,
    *,
    redact: Callable[[str], str] = _same,
) -> list[Completion]:
    """The completions of one response, in ``index`` order.

    Args:
        body: the decoded JSON object.
        chat: whether it answers ``/chat/completions`` (text in ``message.content``) or
            ``/completions`` (text in ``text``).
        max_new_tokens: the cap that was asked for: each answer is cut to it and counted by
            what it holds (:mod:`memprobe_core.models.token_budget`).
        where: names the endpoint in errors.
        redact: cleans server text quoted in an error.

    Raises:
        ModelError: an error object, or ``choices`` / a choice of the wrong shape.
    """
    if "error" in body and "choices" not in body:
        raise ModelError(
            f"{where} answered with an error: {shown(body['error'], _SHOWN_CHARS, redact)}"
        )
    choices = body.get("choices")
    if not isinstance(choices, list):
        raise ModelError(
            f"{where} answered with 'choices' of type {type(choices).__name__} "
            f"({shown(choices, 80, redact)!r}); an OpenAI-compatible server sends a list"
        )
    texts, reasons, indexes = [], [], []
    for position, choice in enumerate(choices):
        texts.append(_choice_text(choice, position, chat, where))
        reasons.append("length" if choice.get("finish_reason") == "length" else "stop")
        index = choice.get("index", position)
        indexes.append(index if isinstance(index, int) else position)
    order = sorted(range(len(choices)), key=lambda i: indexes[i])
    texts = [texts[i] for i in order]
    reasons = [reasons[i] for i in order]
    usage = body.get("usage")
    total = usage.get("completion_tokens") if isinstance(usage, dict) else None
    # usage is optional bookkeeping: a missing or odd figure falls back to counting words.
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        total = None
    counts = split_tokens(total, texts, reasons, max_new_tokens)
    # A server may ignore max_tokens and under-report usage: each answer is cut to the budget
    # asked for and counted by what it holds, never by the server's figure alone.
    out = []
    for text, count, reason in zip(texts, counts, reasons):
        kept, tokens, cut = bounded_answer(text, count, max_new_tokens)
        out.append(Completion(kept, tokens, "length" if cut else reason))
    return out


def _choice_text(choice: Any, position: int, chat: bool, where: str) -> str:
    if not isinstance(choice, dict):
        raise ModelError(f"{where}: choice {position} is a {type(choice).__name__}, not an object")
    if chat:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ModelError(
                f"{where}: choice {position} has no 'message' object (a chat answer needs one)"
            )
        # content null is how OpenAI reports a refusal or a tool call: the model said nothing.
        text = message.get("content", _MISSING)
        if text is None:
            return ""
        field = "message.content"
    else:
        text = choice.get("text", _MISSING)
        field = "text"
    if text is _MISSING:
        raise ModelError(f"{where}: choice {position} has no '{field}'")
    if not isinstance(text, str):
        raise ModelError(
            f"{where}: choice {position} has '{field}' of type {type(text).__name__}, not a string"
        )
    return text


def split_tokens(
    total: int | None, texts: list[str], reasons: list[str], max_new_tokens: int
) -> list[int]:
    """Per-choice token counts from the one total the API reports.

    A choice cut by length used exactly ``max_new_tokens``; the rest of the total is shared by
    the stopped choices in proportion to their text length. Without usage figures, whitespace
    words stand in for tokens.
    """
    if total is None:
        return [
            max_new_tokens if r == "length" else min(len(t.split()), max_new_tokens)
            for t, r in zip(texts, reasons)
        ]
    counts = [max_new_tokens if r == "length" else 0 for r in reasons]
    stopped = [i for i, r in enumerate(reasons) if r == "stop"]
    rest = max(0, total - sum(counts))
    if stopped:
        weights = [max(1, len(texts[i])) for i in stopped]
        for i, w in zip(stopped, weights):
            counts[i] = min(max_new_tokens, rest * w // sum(weights))
        # the rounding remainder goes to the first stopped choices, one token each
        leftover = rest - sum(counts[i] for i in stopped)
        for i in stopped:
            if leftover <= 0:
                break
            if counts[i] < max_new_tokens:
                counts[i] += 1
                leftover -= 1
    return counts
