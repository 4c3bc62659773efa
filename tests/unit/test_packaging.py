"""What the wheel is built from: pyproject.toml's [tool.setuptools] with setup.py's package list.

Read through setuptools' own configuration step (no build); tests/e2e/test_wheel_dashboard.py
builds the wheel and lists its files.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dist():  # type: ignore[no-untyped-def]
    with pytest.MonkeyPatch.context() as patch:
        # Importing setuptools puts its _vendor folder on sys.path: its vendored distributions
        # would then join importlib.metadata's for the later tests of this process (the built-in
        # corpus reads their licences, and chance levels changed with it).
        patch.setattr(sys, "path", list(sys.path))
        from distutils.core import run_setup  # setuptools' copy of distutils

        patch.chdir(ROOT)  # setup.py finds the packages below the working directory
        return run_setup("setup.py", stop_after="config")


def test_every_package_of_the_library_ships_with_the_dashboard(dist) -> None:
    # Found, not listed: a package added to memprobe_core later ships with no edit.
    from setuptools import find_packages  # imported by the fixture, sys.path kept

    found = set(find_packages(str(ROOT), include=["memprobe_core*", "ui_common*"]))
    assert found >= {"memprobe_core", "memprobe_core.cli", "ui_common"}
    assert set(dist.packages) == found | {"memprobe_dashboard", "memprobe_dashboard.pages"}


def test_the_dashboard_package_is_the_root_with_its_pages_and_settings_only(dist) -> None:
    assert dist.package_dir == {"memprobe_dashboard": "."}
    assert dist.package_data == {"memprobe_dashboard": [".streamlit/config.toml"]}
    # No data files beyond those listed: the mapped root also holds README.md, pyproject.toml …
    assert dist.include_package_data is False
