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
