"""Home page and navigation (fake backend): titled pages, and the Set-up placeholder."""

from __future__ import annotations

from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.app.conftest import APP, open_page, texts

PLACEHOLDER = "Checking the embedded models and the device…"


def test_navigation_lists_home_first_then_each_page_at_its_url_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registered: list[Any] = []
    navigation = st.navigation

    def recording(pages: list[Any], **kwargs: Any) -> Any:
        registered.extend(pages)
        return navigation(pages, **kwargs)

    monkeypatch.setattr(st, "navigation", recording)
    at = open_page()
    titles = [page.title for page in registered]
    assert titles == ["Home", "Probe", "Compare", "Audit", "NER", "Document", "Runs"]
    # Home is the root URL; the pages keep the URL paths the links and browser tests use.
    assert [page.url_path for page in registered] == ["", *titles[1:]]
    assert "Compute:" in texts(at)
    # A session whose first run is a page (a deep link): Streamlit's legacy pages/ navigation
    # runs it alone; the page reruns so that app.py's navigation serves it.
    registered.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/2_Compare.py").run()
    assert not at.exception, at.exception
    assert [page.title for page in registered] == titles
    assert at.title[0].value == "Compare methods on one snippet"


def test_the_set_up_column_shows_a_placeholder_until_the_device_check_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = open_page()
    assert PLACEHOLDER not in texts(at)  # replaced once the check returned
    assert "Compute:" in texts(at)

    def never_returns() -> str:  # stands for the slow torch import: the page stops inside it
        raise RuntimeError("device check interrupted")

    monkeypatch.setattr("ui_common.device_summary", never_returns)
    at = _open_raw()
    # What the browser showed while the check ran: the placeholder and the other column.
    assert PLACEHOLDER in [c.value for c in at.caption]
    assert "Recent runs" in [h.value for h in at.subheader]
    assert "Compute:" not in texts(at)


def _open_raw() -> Any:
    """app.py run once, an exception in the page allowed (``open_page`` asserts there is none)."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert at.exception  # its message is redacted (client.showErrorDetails)
    return at
