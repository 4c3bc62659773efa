"""What an OpenAI-compatible base URL may hold: the one check the CLI (before a run is stored)
and the endpoint backend (for library and dashboard callers) both apply.

No message repeats the URL: a key may be in it.
"""

from __future__ import annotations

import re

# Whitespace and C0/C1 control characters: a CR/LF in a URL would otherwise reach httpx, which
# refuses it with a traceback after the run was already stored as failed (and an older client
# could have put a header of the user's into the request).
_BREAK = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")


def base_url_problem(url: str) -> str | None:
    """Why ``url`` (one server's base URL, already stripped) cannot be used, or ``None``.

    The sentences name ``base_url``; the CLI shows that as ``--base-url``.
    """
    if _BREAK.search(url):
        return (
            "base_url holds a line break, a space or another control character; give each "
            "server's URL on its own, comma-separated, e.g. http://127.0.0.1:8000/v1"
        )
    if "?" in url or "#" in url:
        # The query is where a key would be (`?api-key=…`). Request paths are appended to the
        # base URL, so a query would also end up in the middle of each path.
        return (
            "base_url holds a query string or a fragment (after ? or #); an OpenAI-compatible "
            "base URL has none: give it up to its path, e.g. http://127.0.0.1:8000/v1, and put a "
            "key in an environment variable named by api_key_env"
        )
    return None
