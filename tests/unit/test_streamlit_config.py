"""The dashboard's server settings (.streamlit/config.toml): local only, no file watcher."""

from __future__ import annotations

from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

CONFIG = Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml"


@pytest.fixture(scope="module")
def server() -> dict:
    with CONFIG.open("rb") as f:
        return tomllib.load(f)["server"]


def test_server_listens_on_this_machine_only(server):
    assert server["address"] == "127.0.0.1"  # the pages may show personal data


def test_file_watcher_is_off(server):
    # Watching the checkout (.venv included) overflowed inotify and slowed the dashboard ~3x.
    assert server["fileWatcherType"] == "none"
    assert server.get("runOnSave", False) is False
