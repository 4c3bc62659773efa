"""Runs page, "Compare two runs" and "Open a run", with a signals-only run among the newest.

A signals-only audit (``--methods signals``) or a dataset inference measures no Mem: its result
rows have empty Mem cells. The comparison defaults to the two newest runs, so such a run used to
draw a red ``ValueError`` box on every view of the page.
"""

from __future__ import annotations

import os

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.result import AttackResult
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey
from tests.app.conftest import open_page, texts


def _run(store: Store, method: str, victim: str, mem: float) -> int:
    snippet = Snippet(f"legal:{method}", "x " * 60, "legal")
    key = UnitKey(snippet.id, method, 40)
    run_id = store.create_run(
        "audit",
        title=f"{method} run",
        config={"methods": [method]},
        snippets=[snippet],
        units=[key],
    )
    result = AttackResult(
        method,
        snippet.id,
        "legal",
        40,
        prompt="",
        output="the notice" if method != "signals" else "",
        mem=mem,
        lcs_p=0.0,
        objective=mem,
        alpha=0.5,
        costs=Costs(victim_queries=1),
        manifest={"models": {"victim": victim}, "split": {"suffix": "the notice stays"}},
        membership={"loss": 2.5} if method == "signals" else {},
    )
    store.finish_unit(run_id, key, result)
    store.set_run_status(run_id, "finished")
    return run_id


def _store() -> Store:
    return Store(os.environ["MEMPROBE_STORE"])


def test_compare_with_a_signals_only_run_shows_the_other_run_and_no_error() -> None:
    store = _store()
    _run(store, "ps_base", "gemma", 0.4)
    signals = _run(store, "signals", "gemma", 0.0)
    at = open_page("pages/5_Runs.py")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert {at.selectbox(key="runs_cmp_a").value, at.selectbox(key="runs_cmp_b").value} == {
        1,
        signals,
    }
    assert "has no extraction method (signals only)" in texts(at)
    summary = [df.value for df in at.dataframe if "Mem" in df.value.columns][0]
    assert list(summary["run"]) == ["#1"] and list(summary["Mem"]) == [0.4]
    assert any("Mean Mem" in str(c.proto.spec) for c in at.get("plotly_chart"))


def test_compare_of_two_signals_only_runs_says_there_is_no_mem() -> None:
    store = _store()
    _run(store, "signals", "gemma", 0.0)
    _run(store, "signals", "gemma", 0.0)
    at = open_page("pages/5_Runs.py")
    assert not at.exception and not at.error
    assert "Neither run has an extraction method" in texts(at)
    assert not at.get("plotly_chart")


def test_compare_warns_when_the_runs_attacked_different_victims() -> None:
    store = _store()
    _run(store, "ps_base", "gemma", 0.4)
    _run(store, "ps_base", "smollm", 0.2)
    at = open_page("pages/5_Runs.py")
    assert not at.exception
    warning = " ".join(w.value for w in at.warning)
    assert "attacked different victims" in warning and "smollm" in warning


def test_open_a_signals_only_unit_says_it_has_no_candidate_by_design() -> None:
    _run(_store(), "signals", "gemma", 0.0)
    at = open_page("pages/5_Runs.py")
    assert not at.exception
    shown = texts(at)
    assert "measures membership signals" in shown and "failed" not in shown
