"""An extraction map on Ray workers: batches spread over two actors that load the victim by its
path, every window's figures identical to the local map, and a killed driver's map resumed."""

from __future__ import annotations

import pytest

from memprobe_core.documents import map_run
from memprobe_core.documents.windows import MapOptions
from memprobe_core.executors.ray import RayOptions
from memprobe_core.executors.ray_map import ray_scorer
from memprobe_core.models import load
from memprobe_core.store import Store
from tests.helpers.tiny_models import tiny_causal_lm

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

TEXT = " ".join(["the licence of this work is granted to any person who asks"] * 20)
OPTIONS = MapOptions(8, 8, 8, batch_windows=4)


@pytest.fixture(scope="module")
def victim_path(tmp_path_factory):
    """The tiny model saved as a folder: Ray workers load it by path, as a real victim."""
    model, tok = tiny_causal_lm(seed=9, adds_bos=True)
    folder = tmp_path_factory.mktemp("tiny-victim")
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return str(folder)


@pytest.fixture(scope="module")
def cluster():
    context = ray.init(
        address="local",
        num_cpus=2,
        _node_ip_address="127.0.0.1",
        include_dashboard=False,
        log_to_driver=False,
    )
    yield context
    ray.shutdown()


def records(stored):
    return [(s.index, s.match_tokens, s.greedy_ids, s.pz.get("log10_p_z")) for s in stored.scores]


def test_windows_spread_over_ray_workers_give_the_local_figures(tmp_path, victim_path, cluster):
    victim = load(victim_path)
    store = Store(tmp_path / "runs.sqlite")
    local_id = map_run.start_map(
        store, TEXT, victim, name="doc", victim_name=victim_path, options=OPTIONS
    )
    local = map_run.run_map(store, local_id, victim)
    ray_id = map_run.start_map(
        store, TEXT, victim, name="doc", victim_name=victim_path, options=OPTIONS
    )
    scorer = ray_scorer(
        RayOptions(workers=2),
        victim=victim_path,
        load_options={},
        text=TEXT,
        pz=map_run.PzSetting(),
    )
    spread = map_run.run_map(store, ray_id, victim, scorer=scorer)
    assert spread.status == "finished" and len(spread.scores) == spread.windows_total > 8
    got, want = records(spread), records(local)
    assert [r[:3] for r in got] == [r[:3] for r in want]
    for a, b in zip(got, want):
        assert (a[3] is None) == (b[3] is None)
        if a[3] is not None:
            assert a[3] == pytest.approx(b[3], abs=1e-4)


def test_a_map_interrupted_on_ray_resumes_with_the_windows_left(tmp_path, victim_path, cluster):
    import threading

    victim = load(victim_path)
    store = Store(tmp_path / "runs.sqlite")
    run_id = map_run.start_map(
        store, TEXT, victim, name="doc", victim_name=victim_path, options=OPTIONS
    )
    scorer = ray_scorer(
        RayOptions(workers=2),
        victim=victim_path,
        load_options={},
        text=TEXT,
        pz=map_run.PzSetting(),
    )
    cancel = threading.Event()
    first = map_run.run_map(
        store, run_id, victim, scorer=scorer, cancel=cancel, on_progress=lambda p: cancel.set()
    )
    assert first.status == "interrupted" and 0 < len(first.scores) < first.windows_total
    done = map_run.run_map(store, run_id, victim, scorer=scorer)
    assert [s.index for s in done.scores] == list(range(done.windows_total))
    assert {u["attempts"] for u in store.units(run_id)} == {0}  # each window written once
