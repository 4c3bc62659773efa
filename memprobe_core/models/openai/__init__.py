"""The ``openai`` backend: any OpenAI-compatible HTTP endpoint (vLLM, llama.cpp server, OpenAI …),
or a fleet of them.

Black-box only (no tokenizer, no gradients). Modules: ``generator`` (the Generator and its
fleet-aware request loop), ``transport`` (one POST: bounded read, retries, errors), ``fleet``
(least-outstanding choice of a server, cool-off of failed ones), ``parse`` (response bodies to
Completions, every malformed shape a ``ModelError``), ``echo`` (the log-probs of a given text,
for the membership signals of a black-box victim).

Example:
    >>> from memprobe_core.models import load
    >>> gen = load("openai:my-model", base_url="http://node1:8000/v1,http://node2:8000/v1")
"""

from memprobe_core.models.openai.fleet import Fleet, Server
from memprobe_core.models.openai.generator import (
    DEFAULT_BASE_URL,
    DEFAULT_MAX_RESPONSE_BYTES,
    OpenAIGenerator,
    load_openai,
    parse_base_urls,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "Fleet",
    "OpenAIGenerator",
    "Server",
    "load_openai",
    "parse_base_urls",
]
