"""The Runs page's "Compare two models" tab in chromium: two runs of the same units on two
models, the paired diff drawn, a victim name with markup shown as text, the HTML diff downloaded
and escaped (docs/ci.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.browser_fixtures import (  # noqa: F401 - fixtures used by name
    ARTIFACTS,
    browser_context,
    fake_server,
    page,
    wait_idle,
)
from tests.e2e.browser_fixtures import download as click_download
from tests.unit.release.conftest import add_run
from tests.unit.release.test_diff import BASE, CANDIDATE

pytestmark = [pytest.mark.browser, pytest.mark.slow]
XSS = "<img src=x onerror=alert(1)>"


def test_compare_two_models_draws_the_paired_diff(fake_server, page) -> None:  # noqa: F811
    add_run(Path(fake_server.store), "base model", BASE)
    add_run(Path(fake_server.store), XSS, CANDIDATE)
    page.goto(f"{fake_server.url}/Runs")
    page.locator("h1").first.wait_for(timeout=60_000)
    wait_idle(page)
    page.get_by_role("tab", name="Compare two models").click()
    summary = page.get_by_text("paired units", exact=False)
    summary.first.wait_for(timeout=60_000)
    wait_idle(page)
    assert page.get_by_test_id("stException").count() == 0
    text = summary.first.inner_text()
    assert XSS in text and "24 paired units" in text  # the markup is text, not an image
    assert page.locator("img[src='x']").count() == 0
    page.get_by_text("Units whose Mem changed most").wait_for(timeout=30_000)
    diff_file = click_download(page, page.get_by_role("button", name="Download the diff (HTML)"))
    html = Path(diff_file.path()).read_text(encoding="utf-8")
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and XSS not in html
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "runs-compare-models.png"), full_page=True)
