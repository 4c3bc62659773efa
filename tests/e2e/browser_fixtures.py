"""Browser test fixtures: `streamlit run app.py` on 127.0.0.1 and Debian's chromium via Playwright.

Browsers are never downloaded (no ``playwright install``): Playwright drives ``/usr/bin/chromium``.
Without it the browser tests skip with the reason, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
# The browser tests write their screenshots to ARTIFACTS (ignored by git) only. The README's
# pictures in the tracked docs/screenshots/ are refreshed on purpose by scripts/screenshots.sh,
# which sets this variable to that folder (relative to the repository root, or absolute).
SCREENSHOTS_ENV = "MEMPROBE_SCREENSHOTS_DIR"
CHROMIUM = os.environ.get("MEMPROBE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Every tab keeps its timers running as a foreground tab would: the live-view test and
    # bench/dashboard.py measure what several watching tabs cost the server.
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
]


def require_chromium() -> None:
    """Skip (or, under CI=true, fail) when the browser or Playwright is missing."""
    problems = []
    if not Path(CHROMIUM).is_file():
        problems.append(
            f"Debian's chromium is not installed at {CHROMIUM} "
            "(apt-get install chromium; scripts/test.sh does it when run as root)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append("the playwright package is missing (pip install playwright)")
    if problems:
        reason = "; ".join(problems)
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests cannot run under CI=true: {reason}")
        pytest.skip(reason)


def publish_screenshot(path: Path) -> Path | None:
    """Copy the screenshot ``path`` into ``$MEMPROBE_SCREENSHOTS_DIR``, under the same name.

    Returns the copy, or None when the variable is unset or empty (a plain test run: nothing
    outside test-artifacts/ is written).
    """
    folder = os.environ.get(SCREENSHOTS_ENV, "").strip()
    if not folder:
        return None
    target = ROOT / folder  # an absolute folder stays as it is
    target.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(path, target / path.name))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    url: str
    store: Path
    log: Path
    pid: int | None = None  # the streamlit process (bench/dashboard.py reads its CPU time)


def _serve(name: str, extra_env: dict[str, str], tmp: Path) -> Iterator[Server]:
    with serve(name, extra_env, tmp) as server:
        yield server


@contextmanager
def serve(
    name: str,
    extra_env: dict[str, str],
    tmp: Path,
    *,
    root: Path = ROOT,
    extra_args: Sequence[str] = (),
) -> Iterator[Server]:
    """``streamlit run app.py`` of the tree at ``root`` on a free port, a private store in ``tmp``.

    ``extra_args`` are more ``streamlit run`` options (e.g. ``--runner.postScriptGC true``);
    the log goes to ``test-artifacts/streamlit-<name>.log``.
    """
    port = _free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / f"streamlit-{name}.log"
    env = dict(os.environ)
    env.pop("MEMPROBE_UI_FAKE", None)
    # A private store; MEMPROBE_HOME stays as it is so the converted embedded models are reused.
    env.update(
        {
            "MEMPROBE_STORE": str(tmp / "runs.sqlite"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(root),
        },
        **extra_env,
    )
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        # No file watching: the tests edit nothing, and watching .venv costs CPU.
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
        *extra_args,
    ]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log_path)
        yield Server(url, tmp / "runs.sqlite", log_path, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _wait_healthy(url: str, proc: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"streamlit did not start; see {log_path}:\n{log_path.read_text()[-3000:]}"
            )
        time.sleep(0.5)


@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The dashboard with its real defaults (the embedded models)."""
    require_chromium()
    yield from _serve("embedded", {}, tmp_path_factory.mktemp("real"))


@pytest.fixture(scope="module")
def fake_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The dashboard with the fake backend as default (fast pages, escaping, CSV)."""
    require_chromium()
    yield from _serve("fake", {"MEMPROBE_UI_FAKE": "1"}, tmp_path_factory.mktemp("fake"))


@pytest.fixture(scope="module")
def browser_context() -> Iterator[object]:
    """One headless chromium with a fresh profile folder, downloads accepted."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="memprobe-chromium-")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            accept_downloads=True,
            viewport={"width": 1440, "height": 2400},
        )
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser_context):  # type: ignore[no-untyped-def]
    """A new tab; records dialogs (an alert would mean injected script ran)."""
    tab = browser_context.new_page()
    tab.dialogs = []  # type: ignore[attr-defined]

    def on_dialog(dialog):  # type: ignore[no-untyped-def]
        tab.dialogs.append(dialog.message)  # type: ignore[attr-defined]
        dialog.dismiss()

    tab.on("dialog", on_dialog)
    yield tab
    tab.close()


# --- driving the Probe page (the live-view test and bench/dashboard.py) -----------------------


def wait_idle(page, timeout_s: float = 120.0, quiet_s: float = 1.0) -> None:  # type: ignore[no-untyped-def]
    """Wait until the page's script has not been running for ``quiet_s``.

    Streamlit marks the app root with ``data-test-script-state``, the hook its own end-to-end
    tests use.
    """
    app = page.get_by_test_id("stApp")
    deadline = time.monotonic() + timeout_s
    quiet_since = None
    while time.monotonic() < deadline:
        state = app.get_attribute("data-test-script-state") if app.count() else None
        if state == "notRunning":
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= quiet_s:
                return
        else:
            quiet_since = None
        page.wait_for_timeout(200)
    raise AssertionError("the page kept running")


def download(page, button, server: Server | None = None, timeout_s: float = 60.0):  # type: ignore[no-untyped-def]
    """Click a download ``button`` once the page is quiet and return Playwright's Download.

    A report button's file is built on the click (Streamlit's deferred download): the click
    names the file the last run registered, so a click that lands while a late rerun replaces
    the button (a chart's selection event arriving seconds later on a loaded CI runner) asks for
    a file that is gone and nothing downloads. A person clicks again, and so does this helper,
    once, after the page is quiet again; the first miss is kept with the server log's tail
    in ``test-artifacts/lost-downloads.log`` so it is seen, not hidden. A second miss fails.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    wait_idle(page, quiet_s=2.0)
    button.wait_for(timeout=30_000)
    try:
        with page.expect_download(timeout=timeout_s * 1000) as info:
            button.click()
        return info.value
    except PlaywrightTimeout:
        ARTIFACTS.mkdir(exist_ok=True)
        tail = server.log.read_text(encoding="utf-8", errors="replace")[-4000:] if server else ""
        with (ARTIFACTS / "lost-downloads.log").open("a", encoding="utf-8") as out:
            out.write(
                f"--- {time.strftime('%H:%M:%S')} {page.url}: no download after a click\n{tail}\n"
            )
    wait_idle(page, quiet_s=2.0)
    with page.expect_download(timeout=timeout_s * 1000) as info:
        button.click()
    return info.value


def start_probe(page, url: str, *, length: int, rounds: int, n: int) -> None:  # type: ignore[no-untyped-def]
    """Open the Probe page in ``page``, set length / rounds / candidates, press Run probe.

    The snippet is the page's default (the first built-in corpus snippet); the other options
    keep their defaults, as ``memprobe probe`` does.
    """
    prepare_probe(page, url, length=length, rounds=rounds, n=n)
    page.get_by_role("button", name="Run probe").click()


def prepare_probe(page, url: str, *, length: int, rounds: int, n: int) -> None:  # type: ignore[no-untyped-def]
    """:func:`start_probe` without the click: the page is open with its options set."""
    page.goto(f"{url}/Probe")
    page.get_by_test_id("stSidebar").wait_for(timeout=120_000)
    page.locator("h1").first.wait_for(timeout=120_000)
    wait_idle(page, timeout_s=300)
    for label, value in (
        ("Length (tokens)", length),
        ("Rounds T", rounds),
        ("Candidates per round n", n),
    ):
        box = page.get_by_label(label, exact=True)
        box.fill(str(value))
        box.press("Enter")
        wait_idle(page, timeout_s=300)


@contextmanager
def chromium(profile_prefix: str = "memprobe-chromium-") -> Iterator[object]:
    """A headless chromium context (fresh profile), outside pytest (bench/dashboard.py)."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix=profile_prefix)
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1440, "height": 2400},
        )
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)
