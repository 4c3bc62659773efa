"""Keep secrets out of text that leaves a component: errors, log lines, stored rows.

``redact_secrets`` replaces the secret values it is given, and anything shaped like a credential
(``Bearer …`` tokens, ``Authorization:`` / ``api-key`` header values, ``sk-…`` keys, passwords in
``scheme://user:password@host`` URLs, credentials in a URL's query or fragment such as
``?key=…``, ``&token=…``, ``#access_token=…``), with ``[redacted]``. Servers echo requests back
in their error bodies, so an error message built from a response can hold the very key that was
sent.

Example:
    >>> redact_secrets('401: bad header "Authorization: Bearer abc123"')
    '401: bad header "Authorization: [redacted]"'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from urllib.parse import quote

REDACTED = "[redacted]"

# Each pattern keeps its first group (the label) and replaces the rest with REDACTED.
_PATTERNS: tuple[re.Pattern[str], ...] = (
    # Authorization headers, as text or JSON (`Authorization: Basic x`, `"authorization": "x"`).
    # The value may hold spaces (`Bearer x`): it runs to the end of the line or a delimiter.
    re.compile(
        r"""(\b(?:proxy-)?authorization\b["']?\s*[:=]\s*["']?)[^"'\r\n,;&}]+""", re.IGNORECASE
    ),
    # API-key headers and parameters (`x-api-key: x`, `api_key=x`, `"api-key": "x"`).
    re.compile(r"""(\b(?:x-)?api[-_]?key\b["']?\s*[:=]\s*["']?)[^\s"',;&}]+""", re.IGNORECASE),
    # A bare bearer token anywhere (`… sent Bearer abc123 …`).
    re.compile(r"(\bbearer\s+)(?!\[redacted\])[^\s\"',;}]+", re.IGNORECASE),
    # OpenAI/Anthropic style keys: sk-…, sk-proj-…, sk-ant-…
    re.compile(r"()\bsk-[A-Za-z0-9_\-]{8,}"),
    # A password in a URL's userinfo: http://user:password@host
    re.compile(r"(://[^/\s:@]+:)[^/\s@]+(?=@)"),
    # A credential in a URL's query or fragment (`?key=x`, `&token=x`, `?access_token=x`,
    # `#key=x`, `?sig=x`, `?X-Amz-Signature=x`): a parameter named key / token / secret /
    # password / signature / auth / credential, alone or as the last part of a name
    # (`client_secret`, `id-token`). `max_tokens=` is not one: the name must end there.
    re.compile(
        r"([?&#;](?:[\w.-]*[_.-]|api)?"
        r"(?:key|token|secret|password|passwd|pwd|pass|signature|sig|auth|credentials?)"
        r"=)[^&#\s\"'<>]+",
        re.IGNORECASE,
    ),
)


def redact_secrets(text: str, secrets: Iterable[str] = (), *, patterns: bool = True) -> str:
    """Return ``text`` with secrets and credential-shaped strings replaced by ``[redacted]``.

    Args:
        text: any text about to leave a component (error message, log line, stored value).
        secrets: exact values to remove wherever they occur (API keys, passwords). Empty values
            are ignored. Their JSON-escaped and URL-quoted forms are removed too, since a server
            may echo a key inside a JSON string or a query.
        patterns: also replace credential-shaped strings (bearer tokens, ``Authorization`` and
            ``api-key`` values, ``sk-…`` keys, URL passwords, ``?key=`` / ``&token=``-style
            URL parameters). ``False`` removes only the given
            values: for model outputs, where a recited ``sk-…`` key is a finding to keep.

    Returns:
        The redacted text (``text`` itself when nothing matched).
    """
    if not isinstance(text, str):
        text = str(text)
    values = _variants(secrets)
    if values:
        # One pass over one alternation, longest first: replacing values one by one could
        # rewrite part of an earlier "[redacted]" when a secret is a substring of it.
        pattern = re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))
        text = pattern.sub(REDACTED, text)
    for pattern in _PATTERNS if patterns else ():
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def _variants(secrets: Iterable[str]) -> set[str]:
    values: set[str] = set()
    for secret in secrets:
        if not isinstance(secret, str) or not secret:
            continue
        values.add(secret)
        values.add(json.dumps(secret)[1:-1])  # as it appears inside a JSON string
        values.add(quote(secret, safe=""))  # as it appears in a URL
    values.discard("")
    return values
