"""The diff names where each run was sent: two runs of one model name on two servers are two
models, and the comparison says which server each came from."""

from __future__ import annotations

from memprobe_core.cli import main
from memprobe_core.release.pairing import pair_runs
from memprobe_core.store import Store
from tests.unit.release.conftest import add_run

UNITS = [(f"s{i}", None, 0.1 * i, False, None) for i in range(6)]


def _served_at(store_path, run_id, url):
    with Store(store_path) as store:
        served = {"model_id": "served", "backend": "openai", "base_url": url}
        store.update_run(run_id, manifest={"models": {"victim": served}})


def test_a_diff_names_each_run_s_endpoint(store_path, capsys) -> None:
    a = add_run(store_path, "served", UNITS)
    b = add_run(store_path, "served", UNITS)
    _served_at(store_path, a, "http://10.0.0.1:8000/v1")
    _served_at(store_path, b, "http://10.0.0.2:8000/v1")
    runs = pair_runs(Store(store_path), a, b)
    assert runs.victim_a == "served at http://10.0.0.1:8000/v1"
    assert runs.victim_b == "served at http://10.0.0.2:8000/v1"
    assert main(["--store", str(store_path), "diff", str(a), str(b)]) in (0, 1)
    out = capsys.readouterr().out
    assert "(served at http://10.0.0.2:8000/v1) against run 1 (served at http://10.0.0.1" in out


def test_a_run_with_local_weights_is_named_alone(store_path) -> None:
    a = add_run(store_path, "base", UNITS)
    b = add_run(store_path, "canary", UNITS)
    runs = pair_runs(Store(store_path), a, b)
    assert (runs.victim_a, runs.victim_b) == ("base", "canary")
