"""Fixtures of the fault-injection suite (helpers: ``tests.faults.helpers``)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "runs.sqlite"
