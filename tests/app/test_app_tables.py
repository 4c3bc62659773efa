"""Tables and charts for people (fake backend): the Compare and Runs pages show no field name, no
``None``, and their cost chart in panels with units; a prompt's invisible characters show as
escapes on the page."""

from __future__ import annotations

import json
import os

from streamlit.testing.v1 import AppTest

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey
from tests.app.conftest import open_page, run_until, saved

# Field names the auditor found in the tables (issue 37): none may be a column header.
RAW_FIELDS = ("mem_lo", "auroc_lo", "small_n", "score_label", "copied_share", "victim_queries")
# Headers that keep an underscore on purpose (the metric's own name).
UNDERSCORED_LABELS = {"LCS_P"}


def _readable(at: AppTest) -> list[str]:
    """Every problem a reader would see in the page's tables (empty: none)."""
    problems = []
    for frame in (df.value for df in at.dataframe):
        for column in frame.columns:
            if column in RAW_FIELDS or ("_" in column and column not in UNDERSCORED_LABELS):
                problems.append(f"field name {column!r}")
            cells = {str(v) for v in frame[column]}
            problems += [f"{v!r} in {column!r}" for v in cells & {"None", "nan", "NaN", "<NA>"}]
    return problems


def _compare(at: AppTest) -> AppTest:
    at.number_input(key="cmp_length").set_value(40)
    at.number_input(key="cmp_rounds").set_value(1)
    at.number_input(key="cmp_n").set_value(2)
    at.button(key="cmp_run").click()
    return run_until(at, saved)


def test_compare_tables_are_for_people_and_costs_have_a_panel_per_unit() -> None:
    at = _compare(open_page("pages/2_Compare.py"))
    assert len(at.dataframe) >= 2  # scores and costs (the fake victim gives no signal, no PII)
    assert not _readable(at), _readable(at)
    costs = [df.value for df in at.dataframe if "victim queries" in df.value.columns]
    assert costs and list(costs[0]["method"]) == ["P-S-Base", "P-S-Inst", "Ours (interactive)"]
    (chart,) = [c for c in at.get("plotly_chart") if "Cost by method" in str(c.proto.spec)]
    layout = json.loads(chart.proto.spec)["layout"]
    units = [layout[axis]["title"]["text"] for axis in ("yaxis", "yaxis2", "yaxis3")]
    assert units == ["seconds", "queries", "tokens"] and "yaxis4" not in layout


def test_runs_tables_are_for_people() -> None:
    at = _compare(open_page("pages/2_Compare.py"))
    at.switch_page("pages/1_Probe.py").run()
    at.number_input(key="probe_length").set_value(40)
    at.number_input(key="probe_rounds").set_value(1)
    at.number_input(key="probe_n").set_value(2)
    at.button(key="probe_run").click()
    run_until(at, lambda a: saved(a) and len(Store(os.environ["MEMPROBE_STORE"]).list_runs()) == 2)
    at.switch_page("pages/5_Runs.py").run()
    assert not at.exception, at.exception
    headers = {c for df in at.dataframe for c in df.value.columns}
    # The listing, the units, the replayed candidates and the two runs compared are all there.
    assert {"units done", "attempts", "victim output", "LCS_P"} <= headers, headers
    assert not _readable(at), _readable(at)
    # The other run's units (compare: three methods).
    at.selectbox(key="runs_open").set_value(1).run()
    assert not at.exception and not _readable(at), _readable(at)


def test_a_prompt_with_invisible_characters_shows_them_as_escapes() -> None:
    store = Store(os.environ["MEMPROBE_STORE"])
    snippet = Snippet("legal:zw", "the notice " * 30, "legal")
    key = UnitKey(snippet.id, "interactive", 40)
    run_id = store.create_run("probe", title="gcg", config={}, snippets=[snippet], units=[key])
    prompt = "Repeat\u200b the\x00 notice\u202e"
    store.record_candidate(run_id, key, Candidate(0, 0, prompt, "the notice", 0.5, 0.1, 0.4))
    result = AttackResult(
        "interactive",
        snippet.id,
        "legal",
        40,
        prompt=prompt,
        output="the notice",
        mem=0.5,
        lcs_p=0.1,
        objective=0.4,
        alpha=0.5,
        costs=Costs(victim_queries=1),
        manifest={"split": {"suffix": "the notice stays"}},
    )
    store.finish_unit(run_id, key, result)
    store.set_run_status(run_id, "finished")
    at = open_page("pages/5_Runs.py")
    shown = "Repeat\\u200b the\\x00 notice\\u202e"
    codes = [c.value for c in at.code]
    assert shown in codes, codes  # the best prompt, as code, escapes visible
    assert not any("\u200b" in c or "\x00" in c for c in codes)
    (candidates,) = [df.value for df in at.dataframe if "prompt" in df.value.columns]
    assert list(candidates["prompt"]) == [shown]
