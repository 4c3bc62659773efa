"""A new auditor's first use, in a real browser, on the fake backend (fast, no model loaded).

Home → Probe (quick preset) → Compare → Audit report of a labelled audit → the HTML report →
dataset inference on the built-in demo split → Runs export. At every step: no traceback and no
error box; the tables show no literal ``None`` and no raw field name; the verdicts lead, and
Compare draws Mem's chance level. A screenshot of each step goes to ``test-artifacts/``
(``walkthrough-*.png``); ``scripts/screenshots.sh`` copies them to ``docs/screenshots/``.

The ETA's behaviour over a real run is measured by ``bench/eta_trace.py`` (the fake backend
finishes before a second ETA reading).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from tests.e2e.browser_fixtures import (  # noqa: F401 - fixtures used by name
    ARTIFACTS,
    browser_context,
    fake_server,
    page,
    publish_screenshot,
    wait_idle,
)
from tests.e2e.browser_fixtures import download as click_download
from tests.helpers.labelled_run import labelled_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Field names a reader should never see as a column header (issue 37).
RAW_NAMES = ("mem_lo", "auroc_lo", "small_n", "score_label", "copied_share", "victim_queries")


def step(page, name: str) -> None:  # noqa: F811
    """Screenshot the step; fail on a traceback or an error box."""
    wait_idle(page, timeout_s=180)
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"walkthrough-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    publish_screenshot(path)
    assert page.get_by_test_id("stException").count() == 0, name
    errors = page.get_by_test_id("stAlertContentError")
    assert errors.count() == 0, f"{name}: {errors.first.inner_text()}"


def table_texts(page) -> list[str]:  # noqa: F811
    """Headers and visible cells of every dataframe (the grid's accessible table)."""
    cells = page.locator("[data-testid='stDataFrame'] table th, [data-testid='stDataFrame'] td")
    return [cells.nth(i).inner_text().strip() for i in range(cells.count())]


def tables_read_as_text(page, name: str) -> None:  # noqa: F811
    shown = table_texts(page)
    assert "None" not in shown, f"{name}: a table shows None"
    raw = sorted({t for t in shown if t in RAW_NAMES})
    assert not raw, f"{name}: raw field names {raw}"


def go(page, server, path: str) -> None:  # noqa: F811
    page.goto(f"{server.url}/{path}")
    page.get_by_test_id("stSidebar").wait_for(timeout=60_000)
    page.locator("h1").first.wait_for(timeout=60_000)
    wait_idle(page)


def test_first_use_from_home_to_the_runs_export(fake_server, page) -> None:  # noqa: F811
    go(page, fake_server, "")
    step(page, "home")

    # Probe: the quick preset is the default on a CPU; the cut and the victim are named.
    go(page, fake_server, "Probe")
    assert page.get_by_role("radio", name="Quick (CPU)").is_checked()
    assert page.get_by_label("Length (tokens)", exact=True).input_value() == "60"
    assert page.get_by_text("Victim (answers every candidate", exact=False).count() == 1
    page.get_by_role("button", name="Run probe").click()
    page.get_by_text("is saved").wait_for(timeout=120_000)
    assert page.get_by_text("Cut: prefix", exact=False).count() >= 1
    step(page, "probe")
    tables_read_as_text(page, "probe")

    # Compare: Mem's chance level as a column, a line on the scores chart and a caption.
    go(page, fake_server, "Compare")
    page.get_by_role("button", name="Run comparison").click()
    page.get_by_text("is saved").wait_for(timeout=180_000)
    wait_idle(page)
    assert page.locator(".js-plotly-plot").get_by_text("chance level of Mem").count() >= 1
    assert page.get_by_text("Chance level of Mem", exact=False).count() >= 1
    step(page, "compare")
    tables_read_as_text(page, "compare")

    # A labelled audit's report: the membership verdict leads (2 vs 2 texts: too few).
    _, run_id = labelled_run(fake_server.store)
    go(page, fake_server, "Audit")
    page.get_by_role("tab", name="Report").click()
    wait_idle(page)
    picker = page.get_by_test_id("stSelectbox").filter(has_text="Audit")
    if picker.count():
        picker.first.click()
        page.get_by_role("option").filter(has_text=f"#{run_id}").first.click()
        wait_idle(page)
    verdict = page.get_by_text(re.compile(r"inconclusive: too few texts"))
    verdict.first.wait_for(timeout=60_000)
    step(page, "audit-report")
    tables_read_as_text(page, "audit-report")

    # Dataset inference on the built-in demo split (the fake backend measures no signal: the
    # verdict says the test did not run, and the page still ends with the run's box).
    page.get_by_role("tab", name="Dataset inference").click()
    page.get_by_text("Built-in demo split", exact=True).click()
    wait_idle(page)
    page.get_by_role("button", name="Start dataset inference").click()
    page.get_by_text("is saved").first.wait_for(timeout=180_000)
    step(page, "dataset-inference")

    # Runs: the results export carries ISO times and each row's prefix and true suffix.
    go(page, fake_server, "Runs")
    step(page, "runs")
    tables_read_as_text(page, "runs")
    page.get_by_test_id("stSelectbox").first.click()
    page.get_by_role("option").filter(has_text="compare").first.click()
    wait_idle(page)
    button = page.get_by_role("button", name="Results CSV")
    csv_file = click_download(page, button)
    rows = list(csv.DictReader(io.StringIO(Path(csv_file.path()).read_text("utf-8"))))
    assert rows and {"prompt", "output", "prefix", "suffix"} <= set(rows[0])
    assert all(r["suffix"] for r in rows)
