"""The HTML audit report in a real browser, from a file URL with the network blocked.

Every http(s) request is aborted and recorded: the report must not try one. The plotly charts
must draw from the embedded plotly.js, and a snippet holding ``<script>window.__pwned=1</script>``
must show as text without running. The first test saves the README's screenshot
(``test-artifacts/html-report.png``; ``scripts/screenshots.sh`` also copies it to
``docs/screenshots/``); the second downloads the report from the Runs page of ``streamlit run``
first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memprobe_core.report.build import report_for_run
from memprobe_core.report.html import render_html
from memprobe_core.store import Store
from tests.e2e.browser_fixtures import (  # noqa: F401 - fixtures used by name
    ARTIFACTS,
    browser_context,
    fake_server,
    page,
    publish_screenshot,
    wait_idle,
)
from tests.e2e.browser_fixtures import download as click_download
from tests.helpers.labelled_run import PWN, SCRIPT, labelled_run, with_membership

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def open_offline(page, path: Path) -> list[str]:  # noqa: F811
    """Open ``path`` as a file URL with every network request aborted; returns those tried."""
    tried: list[str] = []

    def block(route) -> None:  # type: ignore[no-untyped-def]
        url = route.request.url
        if url.startswith("file:"):
            route.continue_()
        else:
            tried.append(url)
            route.abort()

    page.route("**/*", block)
    page.on("request", lambda r: None if r.url.startswith("file:") else tried.append(r.url))
    page.problems = []  # type: ignore[attr-defined]
    page.on("pageerror", lambda e: page.problems.append(str(e)))  # type: ignore[attr-defined]
    page.on(
        "console",
        lambda m: page.problems.append(m.text) if m.type == "error" else None,  # type: ignore[attr-defined]
    )
    page.goto(path.as_uri())
    page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
    page.wait_for_timeout(1000)  # every chart drawn
    return tried


def check_report(page, tried: list[str], charts: int) -> None:  # noqa: F811
    """No request tried, ``charts`` plotly charts drawn, the snippets' markup shown as text."""
    assert tried == [], f"the report tried the network: {tried}"
    assert page.locator(".js-plotly-plot .main-svg").count() > 0
    assert page.locator(".js-plotly-plot").count() == charts
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.dialogs == []  # no alert() from a prompt, an output or an error message
    shown = page.get_by_text(PWN, exact=False).first
    assert shown.is_visible()
    assert page.get_by_text(f"labelled {SCRIPT}").first.is_visible()
    assert page.locator("img").count() == 0
    assert page.problems == [], page.problems  # no CSP violation, no script error


def test_report_opens_offline_draws_charts_and_shows_markup_as_text(
    tmp_path,
    page,  # noqa: F811
) -> None:
    store, run_id = labelled_run(tmp_path / "runs.sqlite")
    path = tmp_path / "report.html"
    report = with_membership(report_for_run(store, run_id))
    path.write_text(render_html(report, store, run_id), encoding="utf-8")
    check_report(page, open_offline(page, path), charts=2)  # Mem by domain, ROC
    check_figures_drawn_in_colour(page)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "html-report-full.png"), full_page=True)
    # The README's picture: the top of the report (manifest, Table 1, the first chart).
    page.set_viewport_size({"width": 1280, "height": 1500})
    page.locator("#table1").scroll_into_view_if_needed()
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(ARTIFACTS / "html-report.png"))
    publish_screenshot(ARTIFACTS / "html-report.png")  # docs/screenshots/: scripts/screenshots.sh


# Per plot: each trace's drawn colour, and whether every y tick label lies inside the figure.
_DRAWN = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => {
  const box = gd.getBoundingClientRect();
  const ticks = [...gd.querySelectorAll('.ytick text')].map(t => t.getBoundingClientRect());
  return {
    colours: gd._fullData.filter(t => t.name !== 'chance')
      .map(t => (t.type === 'bar' ? t.marker.color : t.line.color)),
    ticks_inside: ticks.length > 0 && ticks.every(r => r.left >= box.left - 0.5),
  };
})"""


def _brightness(colour: str) -> float:
    """Mean of the red, green and blue channels (0-255) of ``#rrggbb`` or ``rgb(r, g, b)``."""
    if colour.startswith("#") and len(colour) == 7:
        channels = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    else:
        channels = [float(v) for v in colour[colour.index("(") + 1 : -1].split(",")[:3]]
    return sum(channels) / 3


def check_figures_drawn_in_colour(page) -> None:  # noqa: F811
    """Distinct colours per trace (none black) and tick labels inside every figure."""
    for plot in page.evaluate(_DRAWN):
        colours = plot["colours"]
        assert len(set(colours)) == len(colours), colours
        # Streamlit's placeholders (#000001 …) are distinct strings that all draw black.
        assert all(_brightness(str(c)) > 60 for c in colours), colours
        assert plot["ticks_inside"], "a y tick label is clipped at the figure's left edge"


def test_runs_page_download_opens_offline(fake_server, page, tmp_path) -> None:  # noqa: F811
    _, run_id = labelled_run(fake_server.store)
    page.goto(f"{fake_server.url}/Runs")
    page.get_by_test_id("stSidebar").wait_for(timeout=60_000)
    wait_idle(page)
    button = page.get_by_role("button", name="Download HTML report")
    download = click_download(page, button)
    assert download.suggested_filename == f"memprobe-run{run_id}-report.html"
    path = tmp_path / download.suggested_filename
    download.save_as(str(path))
    report_tab = page.context.new_page()
    report_tab.dialogs = []  # type: ignore[attr-defined]
    report_tab.on("dialog", lambda d: (report_tab.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
    try:
        # Mem by domain; the server's report has a ROC chart once build_report fills it.
        charts = 1 + (len(report_for_run(Store(fake_server.store), run_id).roc) > 0)
        check_report(report_tab, open_offline(report_tab, path), charts=charts)
        # Built in the dashboard's process, where Streamlit's plotly template is the default.
        check_figures_drawn_in_colour(report_tab)
        report_tab.set_viewport_size({"width": 1280, "height": 1500})
        report_tab.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
        ARTIFACTS.mkdir(exist_ok=True)
        report_tab.screenshot(path=str(ARTIFACTS / "html-report-dashboard.png"))
        publish_screenshot(ARTIFACTS / "html-report-dashboard.png")
    finally:
        report_tab.close()
