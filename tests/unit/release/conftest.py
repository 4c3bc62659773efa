"""Runs built straight into a store for the release tests: each unit's Mem, extraction and loss
are chosen, so every figure of a diff or a gate is known in advance.

Each snippet's text is the same for the i-th member and the i-th non-member by default, so the
report's blind baseline cannot tell the sets apart (it reads the texts alone) and voids nothing;
``text=`` gives texts that differ by label, to see it void the AUROCs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from memprobe_core.attacks.result import AttackResult
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey

# (snippet id, label, mem, extractable, loss)
Unit = tuple[str, str | None, float, bool, float | None]
# (label, index of the snippet among those of its label) -> its text
TextOf = Callable[[str | None, int], str]
# snippet id -> more keys of its units' verbatim record (p_z, the bracket's bounds)
VerbatimOf = Callable[[str], dict[str, object]]


def same_texts(label: str | None, index: int) -> str:
    """The default: the i-th snippet of each label gets the same text (nothing but the model's
    scores can separate the sets)."""
    return f"text number {index} of the audit, the same words for either label"


def texts_by_label(label: str | None, index: int) -> str:
    """Texts that tell the label apart without any model (the blind baseline separates them)."""
    words = "trained licence clause" if label == "member" else "generated invented passage"
    return f"{words} {index} {words}"


def add_run(
    path: Path,
    victim: str,
    units: Iterable[Unit],
    *,
    methods=("ps_base",),
    length: int = 40,
    status: str = "finished",
    text: TextOf = same_texts,
    verbatim: VerbatimOf | None = None,
) -> int:
    """An audit of ``units`` on ``victim`` (every method gets the same figures), ``status``;
    ``text`` gives each snippet's text, ``verbatim`` more keys of its verbatim record."""
    units = list(units)
    seen: dict[str | None, int] = {}
    snippets = []
    for s, lab, *_ in units:
        snippets.append(Snippet(s, text(lab, seen.get(lab, 0)), "code", label=lab))
        seen[lab] = seen.get(lab, 0) + 1
    with Store(path) as store:
        run = store.create_run(
            "audit",
            config={"models": {"victim": victim}},
            snippets=snippets,
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
                    verbatim={
                        "extract_k": 5,
                        "extractable": extractable,
                        **(verbatim(snippet) if verbatim is not None else {}),
                    },
                    membership={"loss": loss} if loss is not None else {},
                )
                store.finish_unit(run, UnitKey(snippet, method, length), result)
        store.set_run_status(run, status)
    return run


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "runs.sqlite"
