"""Audit page: the executor choice (local / Ray) and the Ray workers shown while it runs."""

from __future__ import annotations

import sys

import pytest

from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, texts


def _small_audit(at) -> None:
    at.number_input(key="audit_limit").set_value(1)
    at.multiselect(key="audit_methods").set_value(["ps_inst", "interactive"])
    at.multiselect(key="audit_lengths").set_value([50])
    at.number_input(key="audit_rounds").set_value(1)
    at.number_input(key="audit_n").set_value(2)


def test_ray_without_ray_installed_says_how_and_blocks_start(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    at = open_page("pages/3_Audit.py")
    assert at.radio(key="audit_executor").value == "local"
    at.radio(key="audit_executor").set_value("ray").run()
    assert any("pip install" in e.value for e in at.error)
    assert at.button(key="audit_start").disabled


@pytest.mark.slow
def test_audit_on_ray_shows_its_workers(fake_ui) -> None:
    pytest.importorskip("ray")
    at = open_page("pages/3_Audit.py")
    _small_audit(at)
    at.radio(key="audit_executor").set_value("ray").run()
    at.number_input(key="audit_ray_workers").set_value(2)
    at.button(key="audit_start").click()
    run_until(at, lambda a: "state: finished" in texts(a), timeout=400)
    (run,) = Store(fake_ui).list_runs()
    assert run["units_done"] == run["units_total"] == 6
    workers = [df.value for df in at.dataframe if "worker" in df.value.columns]
    assert workers and sorted(workers[0]["worker"]) == [0, 1]
    assert workers[0]["units"].sum() == 6
