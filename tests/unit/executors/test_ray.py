"""Audits on a real local Ray instance (127.0.0.1, 2 CPUs), started once for the module.

Every audit here is the same small fake-backend audit, so each test compares its rows, unit by
unit and candidate by candidate, with the local executor's: a difference means a unit was lost,
recorded twice, or scored differently on a worker. Slow: starting Ray takes tens of seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memprobe_core.attacks import ModelSet, run_method
from memprobe_core.attacks.options import AttackOptions, InteractiveOptions
from memprobe_core.audit import ModelNames, resume_audit, run_audit, start_audit
from memprobe_core.executors.local import LocalExecutor
from memprobe_core.executors.ray import RayExecutor, RayOptions
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.models.base import ModelError
from memprobe_core.runs.roles import models_from_config
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store
from tests.unit.executors.test_executors import comparable

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
METHODS = ["ps_base", "ps_inst", "interactive"]
OPTIONS = AttackOptions(seed=11, interactive=InteractiveOptions(rounds=2, n_candidates=3))


def names(latency_s: float = 0.0) -> ModelNames:
    return ModelNames(
        victim="fake",
        base="fake",
        attacker="fake",
        backend="fake",
        load_options={"latency_s": latency_s} if latency_s else {},
    )


def new_audit(path: Path, latency_s: float = 0.0) -> tuple[Store, int]:
    store = Store(path)
    run_id = start_audit(
        store,
        demo_corpus()[:3],
        METHODS,
        [40],
        OPTIONS,
        names(latency_s),
        split_tokenizer="whitespace",
    )
    return store, run_id


@pytest.fixture(scope="module")
def cluster():
    """A local Ray instance for the module; yields its GCS address (for other processes)."""
    # Functions defined in this module reach the workers by value (they cannot import tests/).
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    context = ray.init(
        address="local",
        num_cpus=2,
        _node_ip_address="127.0.0.1",
        include_dashboard=False,
        log_to_driver=False,
    )
    yield context.address_info["gcs_address"]
    ray.shutdown()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def local_rows(tmp_path_factory):
    """The reference: the same audit run by the local executor."""
    store, run_id = new_audit(tmp_path_factory.mktemp("local") / "runs.sqlite")
    summary = run_audit(store, run_id, executor=LocalExecutor())
    assert summary.done == len(store.units(run_id))
    return comparable(store, run_id)


def test_ray_audit_gives_the_local_rows(cluster, local_rows, tmp_path):
    store, run_id = new_audit(tmp_path / "runs.sqlite")
    summary = run_audit(store, run_id, executor=RayExecutor(RayOptions(workers=2)))
    assert summary.status == "finished" and summary.errors == 0
    assert comparable(store, run_id) == local_rows
    session = store.get_run(run_id)["manifest"]["sessions"][-1]
    assert session["executor"] == "ray" and session["models"]["victim"]["backend"] == "fake"


def test_killed_workers_lose_and_duplicate_nothing(cluster, local_rows, tmp_path):
    store, run_id = new_audit(tmp_path / "runs.sqlite", latency_s=0.2)
    killed = []

    def kill_both_workers_once(progress):
        if progress.done >= 1 and not killed:
            for index in range(2):  # the first two actors of this session (see _Driver._spawn)
                actor = ray.get_actor(f"memprobe-{os.getpid()}-{run_id}-{index}")
                ray.kill(actor)
                killed.append(index)

    executor = RayExecutor(RayOptions(workers=2))
    summary = run_audit(store, run_id, on_progress=kill_both_workers_once, executor=executor)
    assert killed == [0, 1]
    states = executor.worker_states()  # what the dashboard shows
    assert [s["state"] for s in states].count("died") >= 1
    assert sum(s["units"] for s in states) == len(local_rows)
    assert summary.status == "finished" and summary.errors == 0
    assert comparable(store, run_id) == local_rows  # nothing lost, nothing twice
    assert max(u["attempts"] for u in store.units(run_id)) == 2  # the unit in flight was redone


def test_cancel_leaves_units_pending_and_a_local_resume_finishes(cluster, local_rows, tmp_path):
    """The cancel event (the dashboard's Stop; Ctrl-C takes the same path) mid-audit on Ray."""
    store, run_id = new_audit(tmp_path / "runs.sqlite", latency_s=0.2)
    cancel = threading.Event()

    def stop_after_two(progress):
        if progress.done >= 2:
            cancel.set()

    summary = run_audit(
        store,
        run_id,
        on_progress=stop_after_two,
        cancel=cancel,
        executor=RayExecutor(RayOptions(workers=2)),
    )
    assert summary.status == "interrupted"
    counts = store.unit_counts(run_id)
    assert counts["running"] == 0 and counts["pending"] > 0
    assert store.get_run(run_id)["status"] == "interrupted"

    summary = resume_audit(store, run_id, executor=LocalExecutor())
    assert summary.status == "finished"
    assert comparable(store, run_id) == local_rows


class DiesOn:
    """A runner whose worker process dies (as an OOM kill would) on one method."""

    def __init__(self, method: str) -> None:
        self.method = method

    def __call__(self, method, split, models, options, **kwargs):
        if method == self.method:
            os._exit(1)
        return run_method(method, split, models, options, **kwargs)


def test_unit_whose_worker_always_dies_fails_after_max_attempts(cluster, tmp_path):
    store, run_id = new_audit(tmp_path / "runs.sqlite")
    summary = run_audit(
        store,
        run_id,
        runner=DiesOn("ps_inst"),
        executor=RayExecutor(RayOptions(workers=2, max_attempts=2)),
    )
    assert summary.status == "finished"
    units = store.units(run_id)
    failed = [u for u in units if u["status"] == "error"]
    assert {u["key"].method for u in failed} == {"ps_inst"} and len(failed) == 3
    assert all("died" in u["error"] and "2 attempt(s)" in u["error"] for u in failed)
    assert all(u["attempts"] == 2 for u in failed)
    assert all(u["status"] == "done" for u in units if u["key"].method != "ps_inst")


def first_time(flag: Path) -> bool:
    """True for the one call, in any process, that creates ``flag`` (workers share no memory)."""
    try:
        os.close(os.open(flag, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def fails_first_load(flag: Path):
    def factory(config):
        if not first_time(flag):
            return models_from_config(config)
        raise ModelError("victim 'fake' could not be loaded: no space left on device")

    return factory


def test_worker_that_cannot_load_takes_no_unit_and_the_audit_goes_on(
    cluster, local_rows, tmp_path, caplog
):
    store, run_id = new_audit(tmp_path / "runs.sqlite")
    executor = RayExecutor(RayOptions(workers=2))
    summary = run_audit(
        store, run_id, models_factory=fails_first_load(tmp_path / "flag"), executor=executor
    )
    assert summary.status == "finished" and summary.errors == 0
    assert comparable(store, run_id) == local_rows  # the other worker ran every unit
    states = executor.worker_states()
    assert sorted(s["state"] for s in states) == ["no models", "stopped"]
    assert "no space left on device" in caplog.text  # the clear error, in the log


def test_no_worker_can_load_is_a_model_error(cluster, tmp_path):
    store, run_id = new_audit(tmp_path / "runs.sqlite")

    def never(config):
        raise ModelError("victim 'fake' could not be loaded")

    with pytest.raises(ModelError, match=r"no Ray worker could load the models: .*could not be"):
        run_audit(store, run_id, models_factory=never, executor=RayExecutor(RayOptions(workers=2)))
    assert store.get_run(run_id)["status"] == "failed"
    assert store.unit_counts(run_id)["pending"] == len(store.units(run_id))  # all resumable


DRIVER = r"""
import sys
from memprobe_core.audit import run_audit
from memprobe_core.executors.ray import RayExecutor, RayOptions
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.store import Store
summary = run_audit(Store(sys.argv[1]), int(sys.argv[2]),
                    executor=RayExecutor(RayOptions(address=sys.argv[3], workers=2)))
print(summary.status, flush=True)
"""


def cli(*args: str) -> subprocess.CompletedProcess:
    code = "from memprobe_core.cli.main import main; raise SystemExit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        capture_output=True,
        check=False,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def start_driver(path: Path, run_id: int, cluster: str) -> subprocess.Popen:
    """A driver process running the audit on the cluster; returns once units are in flight."""
    store = Store(path)
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(path), str(run_id), cluster],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C's default action, as under a terminal: a shell starting jobs in the
        # background (CI may) hands them SIGINT ignored, and Python then keeps ignoring it.
        preexec_fn=_default_sigint,
    )
    deadline = time.time() + 300
    while store.unit_counts(run_id)["done"] < 2 or not store.units(run_id, status="running"):
        if driver.poll() is not None or time.time() > deadline:
            driver.kill()
            raise AssertionError(f"the driver never got going: {driver.communicate()}")
        time.sleep(0.05)
    return driver


def test_driver_ctrl_c_leaves_units_pending(cluster, tmp_path):
    path = tmp_path / "runs.sqlite"
    store, run_id = new_audit(path, latency_s=0.3)
    driver = start_driver(path, run_id, cluster)
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 0, err
    assert out.split()[-1] == "interrupted"
    counts = store.unit_counts(run_id)
    assert counts["running"] == 0 and counts["pending"] > 0
    assert not [
        c for u in store.units(run_id, status="pending") for c in store.candidates(run_id, u["key"])
    ]


def test_driver_sigkill_then_resume_on_ray_completes(cluster, local_rows, tmp_path):
    path = tmp_path / "runs.sqlite"
    store, run_id = new_audit(path, latency_s=0.3)
    driver = start_driver(path, run_id, cluster)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait(timeout=60)
    assert driver.returncode == -signal.SIGKILL
    in_flight = {u["key"] for u in store.units(run_id, status="running")}
    assert in_flight  # the kill left units in flight
    assert store.unit_counts(run_id)["done"] < len(local_rows)

    done = cli(
        "--store",
        str(path),
        "resume",
        str(run_id),
        "--executor",
        "ray",
        "--ray-address",
        cluster,
        "--workers",
        "2",
    )
    assert done.returncode == 0, done.stderr
    assert comparable(store, run_id) == local_rows
    assert store.get_run(run_id)["status"] == "finished"
    attempts = {u["key"]: u["attempts"] for u in store.units(run_id)}
    assert all(attempts[key] == 2 for key in in_flight)  # in flight at the kill: redone once


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def chat_victim(config):
    """A chat victim that gives back a passage of the first demo snippet after the word."""
    from memprobe_core.attacks.model_set import ModelSet
    from memprobe_core.models.scripted import ScriptedGenerator

    passage = " ".join(demo_corpus()[0].text.split()[10:30])
    return ModelSet(
        victim=ScriptedGenerator(lambda ask: f"poem poem {passage}", chat_template=True)
    )


def test_a_ray_worker_reads_the_audited_dataset_of_divergence_from_the_store_file(
    cluster, tmp_path
):
    """The unit runner on the worker prepares the method: it reads the audited snippets from
    the store file the config names (the method itself never opens the store), and every
    unit finds the passage of the first snippet in it."""
    from memprobe_core.attacks.divergence import DivergenceOptions
    from memprobe_core.store import UnitKey

    store = Store(tmp_path / "runs.sqlite")
    snippets = demo_corpus()[:3]
    divergence = DivergenceOptions(samples=1, max_new_tokens=64, min_span_tokens=5)
    run_id = start_audit(
        store,
        snippets,
        ["divergence"],
        [40],
        AttackOptions(method_options={"divergence": divergence}),
        ModelNames(victim="test/chat", backend="fake"),
        split_tokenizer="whitespace",
    )
    summary = run_audit(
        store, run_id, models_factory=chat_victim, executor=RayExecutor(RayOptions(workers=1))
    )
    assert summary.status == "finished" and (summary.done, summary.errors) == (3, 0)
    for snippet in snippets:
        result = store.result(run_id, UnitKey(snippet.id, "divergence", 40))
        assert result is not None
        corpus = result.manifest["divergence"]["corpus"]
        assert corpus["docs"] == 3 and corpus["audited_dataset"]["run"] == run_id
        # Found in the dataset whatever the unit's own snippet: the worker read all three.
        assert result.verbatim["divergence_matches"]


# --- batched methods: windows of units, their passes computed ahead (--verbatim-only) ----------

VERBATIM_OPTIONS = AttackOptions(measure=MeasureOptions(signals=False, pz=False))


def tiny_victim_models(config):
    """The same tiny random Llama in every process (seeded), as victim: teacher forcing needs
    weights, and the fake backend has none."""
    from tests.helpers.tiny_models import tiny_hf_generator

    return ModelSet(victim=tiny_hf_generator(seed=5, model_id="tiny-victim"))


def verbatim_snippets() -> list[Snippet]:
    """Demo texts, and texts the tiny victim wrote itself: with this seed two of them give
    greedy matches of 8 and 27 tokens (most of its texts do not survive decoding and encoding:
    a random model writes partial UTF-8 bytes)."""
    victim = tiny_victim_models({}).victim
    own = []
    for index, opening in enumerate(["Licensed under", "Union", "We the People"]):
        answer = victim.generate([opening], max_new_tokens=48)[0][0]
        own.append(Snippet(id=f"own-{index}", text=opening + answer.text))
    return [*own, *demo_corpus()[:5]]


def verbatim_audit(path: Path) -> tuple[Store, int]:
    store = Store(path)
    run_id = start_audit(
        store, verbatim_snippets(), ["verbatim"], [40], VERBATIM_OPTIONS, ModelNames()
    )
    return store, run_id


@pytest.fixture(scope="module")
def verbatim_local_rows(tmp_path_factory):
    store, run_id = verbatim_audit(tmp_path_factory.mktemp("verbatim") / "runs.sqlite")
    summary = run_audit(store, run_id, models_factory=tiny_victim_models, executor=LocalExecutor())
    assert summary.status == "finished" and summary.errors == 0
    rows = comparable(store, run_id)
    assert max(row["verbatim"]["match_tokens"] for row in rows) > 5  # not all zeros
    return rows


@pytest.fixture
def tiny_models_by_value():
    """The workers cannot import tests/: the tiny-model helpers travel by value."""
    import cloudpickle

    from tests.helpers import tiny_models

    cloudpickle.register_pickle_by_value(tiny_models)
    yield
    cloudpickle.unregister_pickle_by_value(tiny_models)


@pytest.mark.parametrize(("window", "batched"), [(16, 8), (3, 8), (1, 0)])
def test_a_worker_batches_a_window_of_verbatim_units_and_gives_the_local_rows(
    cluster, tiny_models_by_value, verbatim_local_rows, tmp_path, window, batched
):
    """One worker takes the 8 units in windows of ``window`` (16: all at once; 3: 3 + 3 + 2),
    computing each window's passes with its first unit; 1: every unit alone, as before."""
    store, run_id = verbatim_audit(tmp_path / "runs.sqlite")
    executor = RayExecutor(RayOptions(workers=1, prefetch_window=window))
    summary = run_audit(store, run_id, models_factory=tiny_victim_models, executor=executor)
    assert summary.status == "finished" and summary.errors == 0
    assert comparable(store, run_id) == verbatim_local_rows
    assert [s["batched"] for s in executor.worker_states()] == [batched]


def test_two_workers_share_the_verbatim_units_in_windows(
    cluster, tiny_models_by_value, verbatim_local_rows, tmp_path
):
    store, run_id = verbatim_audit(tmp_path / "runs.sqlite")
    executor = RayExecutor(RayOptions(workers=2))
    summary = run_audit(store, run_id, models_factory=tiny_victim_models, executor=executor)
    assert summary.status == "finished" and summary.errors == 0
    assert comparable(store, run_id) == verbatim_local_rows
    assert sum(s["units"] for s in executor.worker_states()) == len(verbatim_local_rows)


class DiesOnceOn:
    """A runner whose worker process dies the first time it runs one snippet's unit."""

    def __init__(self, snippet_id: str, flag: Path) -> None:
        self.snippet_id, self.flag = snippet_id, flag

    def __call__(self, method, split, models, options, **kwargs):
        if split.snippet.id == self.snippet_id and first_time(self.flag):
            os._exit(1)
        return run_method(method, split, models, options, **kwargs)


def test_a_worker_dying_inside_its_window_gives_the_unsent_units_back(
    cluster, tiny_models_by_value, verbatim_local_rows, tmp_path
):
    """The worker holding all 8 units dies on the second: that unit is redone, and the six it
    had not been sent go back to the queue and run on its replacement; nothing lost or twice."""
    store, run_id = verbatim_audit(tmp_path / "runs.sqlite")
    executor = RayExecutor(RayOptions(workers=1))
    summary = run_audit(
        store,
        run_id,
        models_factory=tiny_victim_models,
        runner=DiesOnceOn("own-1", tmp_path / "died"),
        executor=executor,
    )
    assert summary.status == "finished" and summary.errors == 0
    assert comparable(store, run_id) == verbatim_local_rows
    states = executor.worker_states()
    assert [s["state"] for s in states] == ["died", "stopped"]
    assert [s["units"] for s in states] == [1, 7]
    assert [u["attempts"] for u in store.units(run_id)].count(2) == 1
