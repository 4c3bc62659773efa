"""The dashboard in a real browser: a live probe on the embedded models, CSV export, escaping, screenshots.

Runs `streamlit run app.py` on 127.0.0.1 and drives Debian's chromium with Playwright. Each test
saves screenshots under ``test-artifacts/`` only; the Probe-live, Compare and NER ones are the
README's, copied to ``docs/screenshots/`` only by ``scripts/screenshots.sh``
(``MEMPROBE_SCREENSHOTS_DIR``, :func:`tests.e2e.browser_fixtures.publish_screenshot`).
"""

from __future__ import annotations

import csv
import io
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey
from tests.e2e.browser_fixtures import (  # noqa: F401 - fixtures used by name
    ARTIFACTS,
    browser_context,
    fake_server,
    page,
    publish_screenshot,
    real_server,
    serve,
    wait_idle,
)
from tests.e2e.browser_fixtures import download as click_download

pytestmark = [pytest.mark.browser, pytest.mark.slow]

XSS = "<img src=x onerror=alert(1)>"
PAGES = {
    "Home": "",
    "Probe": "Probe",
    "Compare": "Compare",
    "Audit": "Audit",
    "NER": "NER",
    "Document": "Document",
    "Runs": "Runs",
}


def shot(page, name: str, *, readme: bool = False) -> None:  # noqa: F811
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True, timeout=90_000)
    if readme:  # into docs/screenshots/ only from scripts/screenshots.sh
        publish_screenshot(path)


def open_page(page, server, name: str) -> None:  # noqa: F811
    page.goto(f"{server.url}/{PAGES[name]}")
    page.get_by_test_id("stSidebar").wait_for(timeout=60_000)
    page.locator("h1").first.wait_for(timeout=60_000)
    wait_idle(page)


def set_number(page, label: str, value: int) -> None:  # noqa: F811
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")
    wait_idle(page)


def progress_counts(page) -> tuple[int, int] | None:  # noqa: F811
    bars = page.get_by_test_id("stProgress")
    if bars.count() == 0:
        return None
    match = re.search(r"(\d+) / (\d+)", bars.first.inner_text())
    return (int(match.group(1)), int(match.group(2))) if match else None


def writing_tokens(page) -> tuple[str, int] | None:  # noqa: F811
    """(who, longest row's tokens) from the live panel's headline ("Victim writing 4 answers ·
    12 of 20 tokens · …"), or None when no batch is being written."""
    for caption in page.get_by_test_id("stCaptionContainer").all_inner_texts():
        match = re.search(r"(\w[\w ]*?) writing \d+ \w+ · (\d+) of \d+ tokens", caption)
        if match:
            return match.group(1), int(match.group(2))
    return None


def no_exception(page) -> None:  # noqa: F811
    assert page.get_by_test_id("stException").count() == 0, page.get_by_test_id(
        "stException"
    ).first.inner_text()


# CPU generation on a shared machine can be slow: these tests get their own, longer limit.
EMBEDDED_LIMIT_S = 2400


@pytest.mark.timeout(EMBEDDED_LIMIT_S)
def test_probe_runs_live_on_the_embedded_models(real_server, page) -> None:  # noqa: F811
    """1 round × 4 candidates on Gemma-3-270M (victim) and SmolLM2 (attacker); rows appear live."""
    open_page(page, real_server, "Probe")
    set_number(page, "Length (tokens)", 30)
    set_number(page, "Rounds T", 1)
    set_number(page, "Candidates per round n", 4)
    page.get_by_text("More options").click()
    set_number(page, "Max prompt tokens", 24)
    page.get_by_role("button", name="Run probe").click()

    seen_partial = False
    writing: dict[str, set[int]] = {}  # who writes -> the token counts seen in the live panel
    deadline = time.monotonic() + EMBEDDED_LIMIT_S - 120
    while time.monotonic() < deadline:
        tokens = writing_tokens(page)
        if tokens is not None and tokens[1] not in writing.setdefault(tokens[0], set()):
            writing[tokens[0]].add(tokens[1])
            # A sequence of one round: prompts, then answers, growing token by token. The
            # picture is a by-product: a page busy redrawing may not hold still long enough.
            try:
                shot(page, f"probe-writing-{tokens[0].lower()}-{len(writing[tokens[0]])}")
            except PlaywrightTimeout:
                pass
        counts = progress_counts(page)
        if counts and 0 < counts[0] < counts[1] and page.get_by_test_id("stDataFrame").count():
            if not seen_partial:
                page.wait_for_timeout(1500)  # let the charts draw before the README screenshot
                shot(page, "probe-live", readme=True)
            seen_partial = True
        if page.get_by_text("is saved").count():
            break
        page.wait_for_timeout(
            400 if tokens is not None else 1000
        )  # look closer while a batch is written
    else:
        pytest.fail(f"probe did not finish; see {real_server.log}")
    no_exception(page)
    assert seen_partial, "no candidate was shown before the run ended"
    # Both models' rows were seen live; the victim's (30 tokens, the slower model) were seen growing.
    # The attacker's 24-token prompts can be written between two polls on a fast machine (CI saw
    # only its first frame once), so its token-by-token growth is tested in
    # tests/unit/models/test_live.py, where the reader is not a browser a second away.
    assert writing.get("Attacker") and len(writing.get("Victim", ())) >= 2, writing
    assert page.get_by_text("Best prompt so far").count() == 1
    assert page.get_by_text("true suffix", exact=True).count() == 1
    shot(page, "probe-finished")
    store = Store(real_server.store)
    (run,) = store.list_runs()
    assert run["status"] == "finished"
    assert len(store.candidates_frame(run["id"])) == 1 + 4


@pytest.mark.timeout(EMBEDDED_LIMIT_S)
def test_compare_on_the_embedded_models(real_server, page) -> None:  # noqa: F811
    open_page(page, real_server, "Compare")
    set_number(page, "Length (tokens)", 30)
    set_number(page, "Ours: rounds T", 0)
    page.get_by_role("button", name="Run comparison").click()
    page.get_by_text("is saved").wait_for(timeout=(EMBEDDED_LIMIT_S - 120) * 1000)
    no_exception(page)
    page.get_by_text("Scores by method").first.wait_for(timeout=30_000)
    page.wait_for_timeout(1500)
    # The stored results, not labels the page had before the run: every method finished, with
    # a score, and the page's score table shows those scores.
    store = Store(real_server.store)
    run = store.list_runs(kind="compare")[0]
    assert run["status"] == "finished"
    results = store.results_frame(run["id"]).set_index("method")
    assert set(results.index) == {"ps_base", "ps_inst", "interactive"}
    assert results["mem"].between(0, 1).all() and results["mem"].max() > 0
    from playwright.sync_api import expect  # imported where used, as the fixtures do

    for mem in results["mem"]:  # retried: the table may arrive after its heading when busy
        expect(page.locator("body")).to_contain_text(
            f"{mem:.3f}", use_inner_text=True, timeout=60_000
        )
    shot(page, "compare", readme=True)


def test_runs_page_downloads_safe_csv(fake_server, page) -> None:  # noqa: F811
    store = Store(fake_server.store)
    run_id = store.create_run("probe", title="csv check", config={})
    store.add_samples(run_id, [Snippet("s1", "a b c d e f", "legal")])
    unit = UnitKey("s1", "interactive", 6)
    store.add_units(run_id, [unit])
    trace = [
        Candidate(0, 0, '=HYPERLINK("http://x")', "out 0", 0.1, 0.0, 0.05),
        Candidate(1, 0, "second prompt", "out 1", 0.5, 0.1, 0.2, is_round_best=True),
        Candidate(1, 1, XSS, "out 2", 0.3, 0.2, 0.05),
    ]
    for cand in trace:
        store.record_candidate(run_id, unit, cand)
    result = AttackResult(
        "interactive", "s1", "legal", 6, "second prompt", "out 1", 0.5, 0.1, 0.2, 0.5, trace=trace
    )
    store.finish_unit(run_id, unit, result)
    store.set_run_status(run_id, "finished")

    open_page(page, fake_server, "Runs")
    no_exception(page)
    button = page.get_by_role("button", name="Raw candidates CSV")
    download = click_download(page, button)
    text = Path(download.path()).read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["prompt"] for r in rows][1:] == ["second prompt", XSS]
    assert not rows[0]["prompt"].startswith("=")  # formula neutralized for spreadsheets
    assert "HYPERLINK" in rows[0]["prompt"]
    assert [float(r["mem"]) for r in rows] == [0.1, 0.5, 0.3]
    assert {r["run_id"] for r in rows} == {str(run_id)}
    shot(page, "runs")


def test_markup_in_a_snippet_shows_as_text(fake_server, page) -> None:  # noqa: F811
    open_page(page, fake_server, "Probe")
    page.get_by_text("Paste", exact=True).click()
    page.wait_for_timeout(700)
    area = page.get_by_label("Text the model may have seen")
    area.fill(" ".join([XSS + " licensed under the terms of the license"] * 12))
    area.press("Tab")
    page.wait_for_timeout(700)
    set_number(page, "Length (tokens)", 40)
    set_number(page, "Rounds T", 1)
    set_number(page, "Candidates per round n", 2)
    page.get_by_role("button", name="Run probe").click()
    page.get_by_text("is saved").wait_for(timeout=120_000)
    no_exception(page)
    assert page.locator("img[src='x']").count() == 0
    assert page.dialogs == []
    assert page.get_by_text(XSS).count() >= 1  # shown literally in the overlap view
    shot(page, "probe-escaped")


@pytest.mark.timeout(EMBEDDED_LIMIT_S)
def test_ner_page_on_the_embedded_ner_model(real_server, page) -> None:  # noqa: F811
    """The embedded MiniLM NER model (trained on first use, then cached): M-MEM above 50 %."""
    open_page(page, real_server, "NER")
    set_number(page, "Pairs (at most)", 40)
    set_number(page, "How many", 12)
    set_number(page, "Token-importance steps", 3)
    page.get_by_role("button", name="Run NER audit").click()
    page.get_by_text("Attention of the name position").wait_for(
        timeout=(EMBEDDED_LIMIT_S - 120) * 1000
    )
    no_exception(page)
    # Streamlit sends the page in pieces: on a busy machine the export section can arrive
    # seconds after the attention charts, so wait for the button itself, not a fixed delay.
    page.get_by_role("button", name="Prompt scores CSV").wait_for(timeout=60_000)
    assert page.get_by_role("button", name="Prompt scores CSV").count() == 1
    # The number, not a label: the page's mean M-MEM of the model (e.g. "98.6 %").
    mean = float(page.get_by_test_id("stMetricValue").first.inner_text().rstrip(" %"))
    assert mean > 50, mean
    shot(page, "ner", readme=True)


@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_renders(fake_server, page, name: str) -> None:  # noqa: F811
    open_page(page, fake_server, name)
    no_exception(page)
    assert page.get_by_test_id("stSidebar").count() == 1
    shot(page, f"page-{name.lower()}")


def nav_titles(page) -> list[str]:  # noqa: F811
    """The sidebar navigation's entries: each is an icon (a Material Symbols ligature, its name
    as text) and the page title."""
    links = page.get_by_test_id("stSidebarNav").get_by_test_id("stSidebarNavLink")
    return [links.nth(i).inner_text().split("\n")[-1].strip() for i in range(links.count())]


def test_sidebar_navigation_lists_home_first_and_keeps_the_url_paths(fake_server, page) -> None:  # noqa: F811
    open_page(page, fake_server, "Compare")
    assert nav_titles(page) == list(PAGES)
    links = page.get_by_test_id("stSidebarNav").get_by_test_id("stSidebarNavLink")
    hrefs = [links.nth(i).get_attribute("href") or "" for i in range(links.count())]
    assert [href.rstrip("/").rsplit("/", 1)[-1] for href in hrefs[1:]] == list(PAGES.values())[1:]
    links.first.click()
    page.wait_for_url(f"{fake_server.url}/")
    page.get_by_role("heading", name="memprobe").first.wait_for(timeout=60_000)
    no_exception(page)


def test_a_first_visit_to_a_page_url_gets_the_titled_navigation(tmp_path, page) -> None:  # noqa: F811
    """A fresh server's first request is a deep link (no script has called st.navigation yet:
    Streamlit would run the page alone, under a legacy sidebar listing "app")."""
    with serve("deeplink", {"MEMPROBE_UI_FAKE": "1"}, tmp_path) as server:
        open_page(page, server, "Compare")
        assert page.locator("h1").first.inner_text() == "Compare methods on one snippet"
        assert nav_titles(page) == list(PAGES)
        no_exception(page)
