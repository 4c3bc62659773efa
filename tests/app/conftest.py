"""AppTest set-up: the fake model backend, a private store per test, helpers to drive a page."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


@pytest.fixture(autouse=True)
def fake_ui(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Fake models by default, a fresh store file and memprobe home for each test."""
    monkeypatch.setenv("MEMPROBE_UI_FAKE", "1")
    monkeypatch.setenv("MEMPROBE_STORE", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(ROOT)
    return tmp_path / "runs.sqlite"


def open_page(page: str | None = None) -> AppTest:
    """The app started from app.py (as `streamlit run app.py` does), then switched to ``page``."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    if page is not None:
        at.switch_page(page)
        at.run()
        assert not at.exception, at.exception
    return at


def run_until(at: AppTest, done: Callable[[AppTest], bool], *, timeout: float = 60.0) -> AppTest:
    """Re-run the page (as the browser's fragment timer would) until ``done`` or a timeout."""
    deadline = time.monotonic() + timeout
    while True:
        at.run()
        assert not at.exception, at.exception
        if done(at):
            return at
        if time.monotonic() > deadline:
            raise AssertionError(
                "page did not reach the expected state; errors: "
                f"{[e.value for e in at.error]}, captions: {[c.value for c in at.caption][-5:]}"
            )
        time.sleep(0.1)


def texts(at: AppTest) -> str:
    """Every text-like value on the page, joined, Markdown escapes undone (as a reader sees it)."""
    parts = []
    for kind in ("markdown", "caption", "text", "info", "success", "warning", "error", "code"):
        parts.extend(str(e.value) for e in getattr(at, kind))
    return re.sub(r"\\(.)", r"\1", "\n".join(parts))


def saved(at: AppTest) -> bool:
    return any("is saved" in s.value for s in at.success)
