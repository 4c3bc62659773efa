"""The Document page in chromium: a stored extraction map drawn as a grid of windows, a click on a
window showing its true suffix beside greedy decoding's output, markup in the document shown as
text, the HTML report downloaded and escaped, and the document text coloured window by window and
by extraction cost (each token's cheapest window, its b; docs/method.md §21).

The map is of a document on the tiny random model (seconds). ``scripts/screenshots.sh`` sets
``MEMPROBE_DOCUMENT_CANARY=1``: the map is then the document canary's on its fine-tuned copy
(built on first use: minutes), the pictures in docs/screenshots/document-map.png,
document-text.png and document-cost.png.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from memprobe_core.documents import map_run
from memprobe_core.documents.windows import MapOptions
from memprobe_core.store import Store
from tests.e2e.browser_fixtures import (  # noqa: F401 - fixtures used by name
    ARTIFACTS,
    browser_context,
    download,
    fake_server,
    page,
    publish_screenshot,
    real_server,
    wait_idle,
)
from ui_common.document_view import COLOUR_BY_COST

pytestmark = [pytest.mark.browser, pytest.mark.slow]
XSS = "<img src=x onerror=alert(1)>"


def add_map(store_path: Path) -> int:
    store = Store(store_path)
    if os.environ.get("MEMPROBE_DOCUMENT_CANARY") == "1":
        from memprobe_core.documents.canary import ensure_document_canary
        from memprobe_core.models import load

        made = ensure_document_canary()
        # The control first: the embedded base has never seen the document.
        base = load("gemma-3-270m")
        control = map_run.start_map(
            store, made.text, base, name="document canary", victim_name="gemma-3-270m (base)"
        )
        map_run.run_map(store, control, base)
        victim = load(str(made.model_path))
        run_id = map_run.start_map(
            store, made.text, victim, name="document canary", victim_name="canary copy"
        )
    else:
        from tests.helpers.tiny_models import tiny_hf_generator

        text = f"{XSS} " + " ".join(["the licence of this work is granted to any person"] * 30)
        for seed, label in ((8, "other tiny"), (7, "tiny")):  # the opened map is the last
            victim = tiny_hf_generator(seed=seed, adds_bos=True)
            run_id = map_run.start_map(
                store,
                text,
                victim,
                name=f"{XSS}.md",
                victim_name=label,
                options=MapOptions(8, 8, 8, 16),
            )
            map_run.run_map(store, run_id, victim)
        return run_id
    map_run.run_map(store, run_id, victim)
    return run_id


def test_the_document_page_draws_the_map_and_shows_a_clicked_window(fake_server, page) -> None:  # noqa: F811
    run_id = add_map(Path(fake_server.store))
    page.goto(f"{fake_server.url}/Document")
    page.locator("h1").first.wait_for(timeout=60_000)
    wait_idle(page)
    page.get_by_role("tab", name="Open a document run").click()
    page.get_by_text("Written back whole").first.wait_for(timeout=60_000)
    wait_idle(page)
    assert page.get_by_test_id("stException").count() == 0
    assert page.locator("img[src='x']").count() == 0  # the markup is text
    points = page.locator(".js-plotly-plot .scatterlayer .point")
    points.first.wait_for(timeout=60_000)
    count = points.count()
    assert count > 10
    # Plotly's drag layer takes the pointer: click where the point is, as a person does.
    box = points.nth(3).bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.get_by_text("Window 3:", exact=False).first.wait_for(timeout=60_000)
    wait_idle(page)
    assert page.get_by_text("true suffix", exact=True).count() >= 1
    # The control: the same document's map on the other victim, in the table below the map.
    assert page.get_by_text("The same document on other victims").count() == 1
    report = download(page, page.get_by_role("button", name="HTML report").first, fake_server)
    html = Path(report.path()).read_text(encoding="utf-8")
    assert f"run {run_id}" in html and XSS not in html
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "document-map.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("MEMPROBE_DOCUMENT_CANARY") == "1":
        publish_screenshot(shot)
    # The Document text tab: the document itself, coloured window by window, markup as text.
    page.get_by_role("tab", name="Document text").click()
    coloured = page.locator("span[title^='window ']")
    coloured.first.wait_for(timeout=60_000)
    wait_idle(page)
    assert coloured.count() > 3
    assert page.locator("img[src='x']").count() == 0
    if os.environ.get("MEMPROBE_DOCUMENT_CANARY") != "1":
        assert page.get_by_text(XSS, exact=False).count() >= 1  # shown as the characters typed
    text_shot = ARTIFACTS / "document-text.png"
    page.screenshot(path=str(text_shot), full_page=True)
    if os.environ.get("MEMPROBE_DOCUMENT_CANARY") == "1":
        publish_screenshot(text_shot)
    # The paper's own view: each token coloured by the cheapest window holding it (its b).
    page.get_by_text(COLOUR_BY_COST, exact=True).first.click()
    priced = page.locator("span[title^='b = ']")
    priced.first.wait_for(timeout=60_000)
    wait_idle(page)
    assert priced.count() >= 1
    assert "expected tries of any decoding" in (priced.first.get_attribute("title") or "")
    assert page.locator("img[src='x']").count() == 0
    cost_shot = ARTIFACTS / "document-cost.png"
    page.screenshot(path=str(cost_shot), full_page=True)
    if os.environ.get("MEMPROBE_DOCUMENT_CANARY") == "1":
        publish_screenshot(cost_shot)


def test_a_reloaded_tab_follows_the_map_its_job_still_works_on(real_server, page) -> None:  # noqa: F811
    """A job belongs to the tab that started it: after a reload the page showed the run frozen
    at "running" and offered to resume it. Now it follows the job to its end."""
    page.goto(f"{real_server.url}/Document")
    page.locator("h1").first.wait_for(timeout=60_000)
    wait_idle(page)
    batch = page.get_by_role("spinbutton", name="Windows per batch")
    batch.fill("1")  # one window a pass: the licence's 45 windows take long enough to reload
    batch.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Map the document").click()
    page.get_by_text(re.compile(r"\b[1-9]\d* / 45 · ")).first.wait_for(timeout=180_000)
    page.reload()
    page.locator("h1").first.wait_for(timeout=60_000)
    wait_idle(page)
    page.get_by_role("tab", name="Open a document run").click()
    following = page.get_by_text("A job of this dashboard is working on this run")
    following.wait_for(timeout=60_000)
    assert page.get_by_text("document --resume").count() == 0
    # No reload from here on: the page redraws itself when the job ends.
    following.wait_for(state="detached", timeout=300_000)
    wait_idle(page)
    page.get_by_text(re.compile(r"map of apache-2.0 on .* \(run \d+, finished\)")).first.wait_for(
        timeout=60_000
    )
    assert page.get_by_test_id("stException").count() == 0
