"""Redaction of secrets (API keys, bearer tokens) from any text that may be shown or stored."""

from __future__ import annotations

import re
from collections.abc import Iterable

_PATTERNS = [
    re.compile(r"(?i)(authorization\s*[:=]\s*)(\S+(\s+\S+)?)"),
    re.compile(r"(?i)(bearer\s+)([A-Za-z0-9._~+/=-]{8,})"),
    re.compile(r"()(sk-[A-Za-z0-9_-]{8,})"),
]
REDACTED = "[redacted]"


def redact_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the given secret values and key-shaped strings replaced by ``[redacted]``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text
