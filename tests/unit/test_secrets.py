"""redact_secrets: given values and credential-shaped strings become [redacted], the rest stays."""

from __future__ import annotations

import pytest

from memprobe_core.secrets import REDACTED, redact_secrets


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "HTTP 400: you sent Authorization: Bearer abc.def-123",
            "HTTP 400: you sent Authorization: [redacted]",
        ),
        (
            '{"authorization": "Basic dXNlcjpwYXNz", "x": 1}',
            '{"authorization": "[redacted]", "x": 1}',
        ),
        ("proxy-authorization=Token zz9 end", "proxy-authorization=[redacted]"),
        (
            "the server saw bearer tok_3n.x and gave up",
            "the server saw bearer [redacted] and gave up",
        ),
        ("x-api-key: k-987 other", "x-api-key: [redacted] other"),
        ('{"api_key": "abc", "n": 2}', '{"api_key": "[redacted]", "n": 2}'),
        ("GET /v1?api-key=abc&n=2", "GET /v1?api-key=[redacted]&n=2"),
        ("invalid key sk-proj-AbC123_xyz-789 given", "invalid key [redacted] given"),
        ("ant key sk-ant-api03-abcdefgh", "ant key [redacted]"),
        ("http://bob:hunter2@node1:8000/v1 down", "http://bob:[redacted]@node1:8000/v1 down"),
    ],
)
def test_credential_shapes_are_redacted(text, expected):
    assert redact_secrets(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "set a valid key in the environment variable OPENAI_API_KEY",
        "model 'sk-short' answered",  # too short to be a key
        "task-12345678 finished",  # 'sk-' inside a word is not a key
        "http://node1:8000/v1 refused the connection",
        "Licensed under the Apache License, Version 2.0",
    ],
)
def test_ordinary_text_is_kept(text):
    assert redact_secrets(text) == text


def test_given_values_are_redacted_in_every_form():
    secret = 'pl@in "secret"/42'
    text = f'raw {secret} json {{"k": "pl@in \\"secret\\"/42"}} url ?k=pl%40in%20%22secret%22%2F42'
    out = redact_secrets(text, [secret])
    assert "secret" not in out
    assert out.count(REDACTED) == 3


def test_a_secret_inside_another_is_redacted_in_one_pass():
    # Replacing values one by one would rewrite the "d"s of the "[redacted]" put for "1d2".
    out = redact_secrets("T: 1d2 | d", ["1d2", "d"])
    assert out == f"T: {REDACTED} | {REDACTED}"


def test_empty_and_non_string_secrets_are_ignored():
    assert redact_secrets("nothing to hide", ["", None]) == "nothing to hide"  # type: ignore[list-item]


def test_patterns_off_keeps_credential_shapes_but_removes_values():
    text = "recited sk-live-abcdefgh1234 and my-own-key"
    assert (
        redact_secrets(text, ["my-own-key"], patterns=False)
        == f"recited sk-live-abcdefgh1234 and {REDACTED}"
    )
