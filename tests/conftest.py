"""Shared test set-up: no model hub and no tokenizer threads, for every test.

Each folder's own ``conftest.py`` adds its fixtures (``tests/app``: the fake backend and a private
store per test; ``tests/faults``: fault helpers); browser tests skip without chromium except
under ``CI=true`` (``tests/e2e/browser_fixtures.require_chromium``).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Imported after the environment above is set (ruff sees no E402 here: no noqa needed).
from hypothesis import HealthCheck, settings

# Hypothesis profiles of the `fuzz` tests (docs/testing.md): "short" runs in the normal suite
# (bounded examples, no deadline: a busy 2-core CI machine must not turn into flaky failures);
# "long" is the night run, `pytest -m fuzz --hypothesis-profile long`. Neither keeps a
# database of examples in the checkout: a failure found is kept as an explicit @example.
_FUZZ_HEALTH = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
settings.register_profile(
    "short", max_examples=40, deadline=None, database=None, suppress_health_check=_FUZZ_HEALTH
)
settings.register_profile(
    "long", max_examples=3000, deadline=None, database=None, suppress_health_check=_FUZZ_HEALTH
)
settings.load_profile(os.environ.get("MEMPROBE_HYPOTHESIS_PROFILE", "short"))
