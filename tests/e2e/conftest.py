"""The embedded models, loaded once per pytest session for every end-to-end module.

``embedded_base`` (Gemma-3-270M base) and ``embedded_instruct`` (SmolLM2-135M-Instruct) come from
``memprobe_core.models.load``, the loader the CLI and the audits use: a module that drives the
CLI in-process (``main([...])``) gets the very same objects from its process-wide cache. A test
that needs an empty cache (to time a load) takes ``private_model_cache``, so that it cannot make
the modules after it load the models again.

Sharing is safe because the tests only read the models: they generate, score and take
``variant(...)`` copies (a new ``HFGenerator`` over the same weights). What a test does change on
a shared generator it resets itself before it reads it (``draft_stats`` in
``test_speculative_embedded.py``). Fine-tuning never touches these objects: the canary demo trains
its own copy, read from the cache folder.
"""

from __future__ import annotations

from typing import Any

import pytest

from memprobe_core.models import embedded, load
from memprobe_core.models import registry as model_registry


def _embedded(name: str) -> Any:
    if not embedded.package_installed(name):
        pytest.skip(f"{embedded.EMBEDDED[name].distribution} is not installed")
    return load(name)


@pytest.fixture(scope="session")
def embedded_base() -> Any:
    """Gemma-3-270M base (262k vocabulary, no chat template): the default victim and base."""
    return _embedded("gemma-3-270m")


@pytest.fixture(scope="session")
def embedded_instruct() -> Any:
    """SmolLM2-135M-Instruct (a chat model): the default attacker and init model."""
    return _embedded("smollm2-135m-instruct")


@pytest.fixture
def private_model_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty model cache for one test; the session's loaded models are back after it.

    ``clear_cache()`` inside the test clears only this private cache.
    """
    monkeypatch.setattr(model_registry, "_cache", {})
    monkeypatch.setattr(model_registry, "_key_locks", {})
