"""Runs built straight into a store for the release tests: each unit's Mem, extraction and loss
are chosen, so every figure of a diff or a gate is known in advance."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from memprobe_core.attacks.result import AttackResult
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey

# (snippet id, label, mem, extractable, loss)
Unit = tuple[str, str | None, float, bool, float | None]


def add_run(
    path: Path,
    victim: str,
    units: Iterable[Unit],
    *,
    methods=("ps_base",),
    length: int = 40,
    status: str = "finished",
) -> int:
    """An audit of ``units`` on ``victim`` (every method gets the same figures), ``status``."""
    units = list(units)
    with Store(path) as store:
        run = store.create_run(
            "audit",
            config={"models": {"victim": victim}},
            snippets=[Snippet(s, f"text of {s}", "code", label=lab) for s, lab, *_ in units],
            units=[UnitKey(s, m, length) for s, *_ in units for m in methods],
        )
        for snippet, _, mem, extractable, loss in units:
            for method in methods:
                result = AttackResult(
                    method=method,
                    snippet_id=snippet,
                    domain="code",
                    length=length,
                    prompt="p",
                    output=f"output of {snippet} by {victim}",
                    mem=mem,
                    lcs_p=0.0,
                    objective=mem,
                    alpha=1.0,
                    verbatim={"extract_k": 5, "extractable": extractable},
                    membership={"loss": loss} if loss is not None else {},
                )
                store.finish_unit(run, UnitKey(snippet, method, length), result)
        store.set_run_status(run, status)
    return run


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "runs.sqlite"
