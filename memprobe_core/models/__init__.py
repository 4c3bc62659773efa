"""Models behind one contract: ``load(name_or_path, *, backend=None, **options) -> Generator``.

Backends: ``hf`` (transformers), ``embedded`` (the offline default models), ``openai``
(OpenAI-compatible endpoints), ``vllm`` (GPU engine) and ``fake`` (tests and demos). Importing
this package imports none of torch, transformers or vllm; a backend's packages are imported when
it is first used.

Example:
    >>> from memprobe_core.models import load
    >>> victim = load("gemma-3-270m")                       # embedded, offline
    >>> victim.generate(["Licensed under the Apache License"], max_new_tokens=20)
"""

from memprobe_core.models.base import (
    Chat,
    Completion,
    GenerationStats,
    Generator,
    LoadOptions,
    LogprobsUnavailable,
    Message,
    ModelError,
    Request,
    TextLogprobs,
    chat_as_text,
)
from memprobe_core.models.registry import (
    BackendSpec,
    backend_available,
    backends,
    cached_models,
    clear_cache,
    guess_backend,
    load,
    register_backend,
)

__all__ = [
    "BackendSpec",
    "Chat",
    "Completion",
    "GenerationStats",
    "Generator",
    "LoadOptions",
    "LogprobsUnavailable",
    "Message",
    "ModelError",
    "Request",
    "TextLogprobs",
    "backend_available",
    "backends",
    "cached_models",
    "chat_as_text",
    "clear_cache",
    "guess_backend",
    "load",
    "register_backend",
]
