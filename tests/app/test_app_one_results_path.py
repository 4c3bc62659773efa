"""One results path: a comparison's table on the Compare page, the run on the Runs page and the
report's CSV and JSON all read the store's results frame, so a method's own figure
(``MethodSpec.figures``) shows on each, labelled by the registry, with no other file naming it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from memprobe_core.attacks import registry
from memprobe_core.attacks.events import EventCallback
from memprobe_core.attacks.figures import Figure, Table1Entry
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.one_round import RoundPrompts, run_one_round
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.result import AttackResult
from memprobe_core.cli.main import main
from memprobe_core.snippets.split import SplitSnippet
from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, saved

NAME = "toy_echo"
LABEL = "Toy echo"
FIGURE = Figure(
    name="toy_echo_words",
    label="Toy prompt words",
    kind="int",
    table1=Table1Entry("mean", text="ToyWords", html="Toy prompt words (mean)"),
)


def run_echo(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
) -> AttackResult:
    """The true prefix as the prompt; its word count recorded as the method's own figure (on
    the shared one-round parts, as docs/adding-a-method.md builds a method)."""
    asked = RoundPrompts(
        requests=[split.prefix],
        prompts=[split.prefix],
        figures=lambda result: {FIGURE.name: len(split.prefix.split())},
    )
    return run_one_round(
        NAME, split, models, options, models.victim, asked, on_event=on_event, cancel=cancel
    )


ECHO = registry.MethodSpec(
    name=NAME,
    label=LABEL,
    run=run_echo,
    roles=("victim",),
    rank=45,
    summary="the true prefix, its words counted",
    figures=(FIGURE,),
)


@pytest.fixture
def echo() -> Iterator[None]:
    registry.register(ECHO)
    try:
        yield
    finally:
        registry.unregister(NAME)


def shown_values(at: AppTest, column: str) -> dict[str, object]:
    """{method label: value} of ``column`` in any table on the page (a wide table is drawn in
    parts, each led by the method column)."""
    for frame in at.dataframe:
        table: pd.DataFrame = frame.value
        if column in table.columns and "method" in table.columns:
            return dict(zip(table["method"], table[column]))
    return {}


def test_a_methods_figure_shows_on_compare_runs_and_the_report(echo, fake_ui, tmp_path, capsys):
    at = open_page("pages/2_Compare.py")
    at.multiselect(key="cmp_methods").set_value(["ps_inst", NAME])
    at.number_input(key="cmp_length").set_value(40)
    at.button(key="cmp_run").click()
    run_until(at, saved)
    (run,) = Store(fake_ui).list_runs()
    (unit,) = [u for u in Store(fake_ui).units(run["id"]) if u["method"] == NAME]
    words = unit["verbatim"][FIGURE.name]
    assert words > 0

    # The Compare page's table: the figure's column, labelled by the registry, the toy's value.
    # (A column with an empty cell is drawn as text: "–" where a method has no such figure.)
    compared = shown_values(at, FIGURE.label)
    assert str(compared[LABEL]) == str(words)
    assert compared["P-S-Inst"] == "–"  # not a P-S-Inst figure: empty, never 0
    assert shown_values(at, "status") == {}  # every method finished: no status column

    runs = open_page("pages/5_Runs.py")
    assert str(shown_values(runs, FIGURE.label)[LABEL]) == str(words)

    csv = tmp_path / "results.csv"
    assert main(["report", str(run["id"]), "--csv", str(csv), "--json"]) == 0
    exported = pd.read_csv(csv)
    assert exported.loc[exported["method"] == NAME, FIGURE.name].tolist() == [words]
    report = json.loads(capsys.readouterr().out)
    (toy_row,) = [r for r in report["table1"] if r["method"] == NAME]
    assert toy_row[FIGURE.name] == words


def test_a_short_label_names_whose_option_a_widget_is() -> None:
    at = open_page("pages/2_Compare.py")
    at.multiselect(key="cmp_methods").set_value(["interactive", "gcg"])
    # MethodSpec.short_label: "Ours", not the label "Ours (interactive)".
    assert at.number_input(key="cmp_rounds").label == "Ours: rounds T"


WAITING = threading.Event()  # set once the waiting toy has scored its candidate


def run_until_cancelled(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
) -> AttackResult:
    """The echo's candidate, then a wait for the user's Cancel: its partial best, cancelled."""
    result = run_echo(split, models, options, on_event=on_event, cancel=cancel)
    WAITING.set()
    assert cancel is not None and cancel.wait(60), "the test never pressed Cancel"
    result.status = "cancelled"
    return result


def test_a_cancelled_methods_partial_best_is_on_the_compare_table_marked_cancelled(
    fake_ui,
) -> None:
    waiter = registry.MethodSpec(
        name="toy_wait", label="Toy wait", run=run_until_cancelled, roles=("victim",), rank=45
    )
    registry.register(waiter)
    WAITING.clear()
    try:
        at = open_page("pages/2_Compare.py")
        at.multiselect(key="cmp_methods").set_value(["ps_inst", "toy_wait"])
        at.number_input(key="cmp_length").set_value(40)
        at.button(key="cmp_run").click()
        run_until(at, lambda _: WAITING.is_set())
        at.button(key="compare_job_cancel").click()
        run_until(at, saved)
    finally:
        registry.unregister("toy_wait")
    (run,) = Store(fake_ui).list_runs()
    assert {u["method"]: u["status"] for u in Store(fake_ui).units(run["id"])} == {
        "ps_inst": "done",
        "toy_wait": "cancelled",
    }
    assert shown_values(at, "status") == {"P-S-Inst": "finished", "Toy wait": "cancelled"}
