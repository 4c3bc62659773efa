"""Property-based tests of memprobe's input boundaries (Hypothesis; docs/testing.md, "Fuzzing").

Every test here is marked ``fuzz``. A property says what must always hold for any input a
strategy draws: a clean refusal (a ``MemprobeError`` subclass, exit code 2 on the CLI, naming the
input) or a correct result; never a traceback, never a half-written run. Each failure Hypothesis
found is fixed at its cause and kept as an explicit ``@example`` beside its test.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/fuzz/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.fuzz)
