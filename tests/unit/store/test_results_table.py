"""The one table the pages show of a run's results (store.frames.results_table): built from the
store's results frame, in report order, with every registered method's own figures."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from memprobe_core.attacks import registry
from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.figures import Figure
from memprobe_core.attacks.result import AttackResult
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey
from memprobe_core.store.frames import results_table, shown_columns

FIGURE = Figure(name="toy_table_hits", label="Toy hits", kind="int")
TOY = registry.MethodSpec(
    name="toy_table",
    label="Toy table",
    run=lambda *a, **k: None,  # never run: its results are written to the store by hand
    roles=("victim",),
    rank=45,
    figures=(FIGURE,),
)


@pytest.fixture
def toy() -> Iterator[None]:
    registry.register(TOY)
    try:
        yield
    finally:
        registry.unregister(TOY.name)


def result(unit: UnitKey, mem: float, verbatim: dict[str, object]) -> AttackResult:
    return AttackResult(
        method=unit.method,
        snippet_id=unit.snippet_id,
        domain="legal",
        length=unit.length,
        prompt="p",
        output="o",
        mem=mem,
        lcs_p=0.1,
        objective=mem - 0.1,
        alpha=0.5,
        costs=Costs(victim_queries=2, wall_seconds=1.25),
        pii={"copied": {"email": ["a@b.org"]}, "invented": {"url": ["x", "y", "z"]}},
        verbatim=verbatim,
    )


def test_rows_in_report_order_with_costs_pii_and_a_registered_methods_figure(toy, tmp_path) -> None:
    store = Store(tmp_path / "runs.sqlite")
    snippet = Snippet(id="s", text=" ".join(f"w{i}" for i in range(40)), domain="legal")
    units = [UnitKey("s", m, 20) for m in ("interactive", TOY.name, "ps_base", "ps_inst")]
    run_id = store.create_run("compare", snippets=[snippet], units=units)
    store.finish_unit(run_id, units[0], result(units[0], 0.6, {}))
    store.finish_unit(run_id, units[1], result(units[1], 0.3, {FIGURE.name: 7}))
    store.finish_unit(run_id, units[2], result(units[2], 0.2, {}))
    store.cancel_unit(run_id, units[3], result(units[3], 0.1, {}))

    table = results_table(store.results_frame(run_id))
    assert FIGURE.name in shown_columns() and list(table.columns) == shown_columns()
    # The registry's rank: P-S-Base (10), the toy (45), Ours (50); the cancelled unit is left out.
    assert list(table["method_label"]) == ["P-S-Base", "Toy table", "Ours (interactive)"]
    toy_row = table.iloc[1]
    assert toy_row[FIGURE.name] == 7 and pd.isna(table.iloc[0][FIGURE.name])
    assert str(table[FIGURE.name].dtype) == "Int64"  # a count, not 7.0
    assert toy_row[["mem", "victim_queries", "seconds", "pii_copied", "pii_invented"]].tolist() == [
        0.3,
        2,
        1.25,
        1,
        3,
    ]
    # The Compare page asks for the cancelled partial bests too, marked as such.
    shown = results_table(store.results_frame(run_id, cancelled=True))
    assert list(shown["method"]) == ["ps_base", "ps_inst", TOY.name, "interactive"]
    assert list(shown["status"]) == ["finished", "cancelled", "finished", "finished"]
