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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
SCREENSHOTS = ROOT / "docs" / "screenshots"
CHROMIUM = os.environ.get("MEMPROBE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def require_chromium() -> None:
    """Skip (or, under CI=true, fail) when the browser or Playwright is missing."""
    problems = []
    if not Path(CHROMIUM).is_file():
        problems.append(f"Debian's chromium is not installed at {CHROMIUM} "
                        "(apt-get install chromium; scripts/test.sh does it when run as root)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append("the playwright package is missing (pip install playwright)")
    if problems:
        reason = "; ".join(problems)
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests cannot run under CI=true: {reason}")
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    url: str
    store: Path
    log: Path


def _serve(name: str, extra_env: dict[str, str], tmp: Path) -> Iterator[Server]:
    port = _free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / f"streamlit-{name}.log"
    env = dict(os.environ)
    env.pop("MEMPROBE_UI_FAKE", None)
    # A private store; MEMPROBE_HOME stays as it is so the converted embedded models are reused.
    env.update({"MEMPROBE_STORE": str(tmp / "runs.sqlite"), "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}, **extra_env)
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true",
           "--browser.gatherUsageStats", "false",
           # No file watching: the tests edit nothing, and watching .venv costs CPU.
           "--server.fileWatcherType", "none", "--server.runOnSave", "false"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not start; see {log_path}:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield Server(url, tmp / "runs.sqlite", log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


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
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            accept_downloads=True, viewport={"width": 1440, "height": 2400},
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
