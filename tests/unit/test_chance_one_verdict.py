"""A probe's Mem reads against its chance level with ONE verdict on the Probe page (finished or
replayed) and in its HTML report (issue 54): both read the unit's stored chance columns through
:func:`memprobe_core.chance.unit_chance` / :func:`~memprobe_core.chance.from_columns`. The issue's
run: the page reckoned the level again with the loaded tokenizer ("NOT distinguishable from
chance") while the report, without that tokenizer on the machine, said "undefined"."""

from __future__ import annotations

import html

import pandas as pd

from memprobe_core.attacks.result import AttackResult
from memprobe_core.chance import NOT_ABOVE_CHANCE, chance_reading, unit_chance
from memprobe_core.report.html import html_report_for_run
from memprobe_core.store import Store
from tests.unit.test_chance_reading import ANSWER, PROMPT, SCORING, _cut, stored_probe
from ui_common.render import output_chance, probe_chance, stored_unit_chance

# A tokenizer name no machine has: the report cannot cut the built-in snippets with it.
ABSENT = "memprobe-tests/no-such-tokenizer"


def _probe(store: Store, tokenizer: str) -> tuple[int, AttackResult]:
    return stored_probe(store, "docs:pyclbr", PROMPT, ANSWER, tokenizer)


def _page_info() -> dict:
    piece, pool, source = _cut("docs:pyclbr")
    return {
        "suffix": piece.suffix,
        "suffix_tokens": piece.suffix_tokens,
        "scoring": SCORING,
        "tokenizer": None,
        "reference": pool,
        "reference_source": source,
    }


def test_the_page_and_the_report_give_one_verdict_when_the_report_has_none(tmp_path) -> None:
    with Store(tmp_path / "runs.sqlite") as store:
        run_id, result = _probe(store, ABSENT)
        report = html.unescape(html_report_for_run(store, run_id))
        stored = stored_unit_chance(store, run_id, result)
    assert stored is not None and stored.verdict is None  # undefined, and why
    assert f"the victim's tokenizer {ABSENT} is not on this machine" in (stored.note or "")
    best = pd.Series({"prompt": PROMPT, "output": ANSWER, "mem": result.mem})
    shown = probe_chance(best, result, _page_info(), stored)
    assert shown is stored
    assert f"Ours (interactive) @ 60: {chance_reading(shown)}" in report
    # The second reckoning the page made before: a verdict the report does not give.
    again = output_chance(ANSWER, result.mem, _page_info(), PROMPT)
    assert again is not None and again.verdict == NOT_ABOVE_CHANCE
    assert chance_reading(again) not in report


def test_a_defined_level_reads_the_same_on_the_page_and_in_the_report(
    tmp_path,
) -> None:
    with Store(tmp_path / "runs.sqlite") as store:
        run_id, result = _probe(store, "whitespace")
        report = html.unescape(html_report_for_run(store, run_id))
        frame = store.results_frame(run_id)
    stored = unit_chance(frame, result.snippet_id, "interactive", 60)
    assert stored is not None and stored.verdict == NOT_ABOVE_CHANCE
    best = pd.Series({"prompt": PROMPT, "output": ANSWER, "mem": result.mem})
    assert chance_reading(probe_chance(best, result, _page_info(), stored)) in report
    assert unit_chance(frame, result.snippet_id, "gcg", 60) is None  # no such unit


def test_an_output_that_is_not_the_units_result_is_reckoned_on_the_page(tmp_path) -> None:
    with Store(tmp_path / "runs.sqlite") as store:
        run_id, result = _probe(store, ABSENT)
        stored = stored_unit_chance(store, run_id, result)
    piece, _, _ = _cut("docs:pyclbr")
    earlier = pd.Series({"prompt": PROMPT, "output": piece.suffix, "mem": 1.0})  # a live round
    shown = probe_chance(earlier, result, {**_page_info(), "run_id": run_id}, stored)
    assert shown is not stored and shown is not None and shown.level is not None


def test_the_compare_page_reads_a_stored_methods_chance_as_its_report_does(tmp_path) -> None:
    from ui_common.compare_view import method_chances

    with Store(tmp_path / "runs.sqlite") as store:
        run_id, result = _probe(store, ABSENT)
        report = html.unescape(html_report_for_run(store, run_id))
        shown = method_chances({"interactive": result}, {**_page_info(), "run_id": run_id}, store)
    level = shown["interactive"]
    assert level.verdict is None and f"Ours (interactive) @ 60: {chance_reading(level)}" in report
