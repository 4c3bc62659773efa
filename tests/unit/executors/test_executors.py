"""Executors without a Ray cluster: the worker's in-memory record, the flags, Ray not installed.

The Ray worker's body (:class:`UnitWorker`) is a plain class: here it runs in this process, and
what it sends back is recorded with the driver's store exactly as the Ray executor does, so the
record can be compared row for row with the local executor's. The cluster itself is exercised in
``test_audit_ray.py`` (slow: starting Ray takes tens of seconds).
"""

from __future__ import annotations

import sys

import pytest

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.options import AttackOptions, InteractiveOptions
from memprobe_core.audit import ModelNames, run_audit, start_audit
from memprobe_core.cli.main import main
from memprobe_core.errors import OptionError, UsageError
from memprobe_core.executors import LocalExecutor, make_executor
from memprobe_core.executors.ray import (
    INSTALL_HINT,
    RayOptions,
    UnitWorker,
    import_ray,
    record_report,
    worker_count,
)
from memprobe_core.models import load
from memprobe_core.models.base import ModelError
from memprobe_core.runs.probe import RunConfig
from memprobe_core.runs.roles import models_from_config
from memprobe_core.runs.unit import SplitSpec, snippets_by_id
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.store import Store

METHODS = ["ps_base", "ps_inst", "interactive"]
FAKE = ModelNames(victim="fake", base="fake", attacker="fake", backend="fake")


def comparable(store: Store, run_id: int) -> list[dict]:
    """Every unit and candidate of a run, without ids and times (what must not differ)."""
    rows = []
    for unit in store.units(run_id):
        row = {
            k: v
            for k, v in unit.items()
            if k not in ("run_id", "started", "finished", "seconds", "attempts")
        }
        costs = row.get("costs") or {}
        # Clock and machine measurements differ between any two runs.
        measured = Costs.measured_on_the_machine()
        row["costs"] = {k: v for k, v in costs.items() if k not in measured}
        row["candidates"] = [
            {k: v for k, v in c.items() if k not in ("id", "run_id", "created")}
            for c in store.candidates(run_id, unit["key"])
        ]
        rows.append(row)
    return rows


def new_audit(tmp_path, name: str) -> tuple[Store, int]:
    store = Store(tmp_path / f"{name}.sqlite")
    run_id = start_audit(
        store,
        demo_corpus()[:2],
        METHODS,
        [40],
        AttackOptions(seed=7, interactive=InteractiveOptions(rounds=2, n_candidates=3)),
        FAKE,
        split_tokenizer="whitespace",
    )
    return store, run_id


def test_worker_record_equals_local_record(tmp_path):
    """A worker's report, recorded by the driver, gives the local executor's rows exactly."""
    local_store, local_id = new_audit(tmp_path, "local")
    run_audit(local_store, local_id, executor=LocalExecutor())

    store, run_id = new_audit(tmp_path, "worker")
    config = store.get_run(run_id)["config"]
    worker = UnitWorker(config, models_from_config, None)
    assert worker.info()["error"] is None
    run_config, snippets = RunConfig.from_dict(config), snippets_by_id(store, run_id)
    for unit in [u["key"] for u in store.units(run_id)]:
        store.mark_unit_running(run_id, unit)
        report = worker.run(
            run_id, unit, snippets[unit.snippet_id], run_config.options, run_config.split
        )
        assert report.events  # the candidates travel with the report
        assert record_report(store, run_id, report).status == "done"
    assert comparable(store, run_id) == comparable(local_store, local_id)


def test_worker_without_models_fails_units_with_the_load_error(tmp_path):
    store, run_id = new_audit(tmp_path, "broken")

    def broken(config):
        raise ModelError("victim 'nope' is not a model")

    worker = UnitWorker(store.get_run(run_id)["config"], broken, None)
    unit = store.units(run_id)[0]["key"]
    store.mark_unit_running(run_id, unit)
    report = worker.run(
        run_id, unit, snippets_by_id(store, run_id)[unit.snippet_id], AttackOptions(), SplitSpec()
    )
    assert report.load_failed
    record_report(store, run_id, report)
    row = store.units(run_id)[0]
    assert row["status"] == "error"
    assert "could not load its models" in row["error"] and "nope" in row["error"]


def test_worker_count_fits_the_cluster():
    assert worker_count(RayOptions(), {"CPU": 8.0}, units=100) == 8
    assert worker_count(RayOptions(cpus_per_worker=2), {"CPU": 8.0}, units=100) == 4
    assert worker_count(RayOptions(gpus_per_worker=1), {"CPU": 64.0, "GPU": 4.0}, units=100) == 4
    assert worker_count(RayOptions(), {"CPU": 8.0}, units=3) == 3  # never more than units
    assert worker_count(RayOptions(workers=6), {"CPU": 2.0}, units=100) == 6


def test_ray_options_reject_bad_values():
    # Library names in the message; the CLI shows its flags (test_cli_ray_flags_…).
    with pytest.raises(OptionError, match="workers=0: give 1 or more") as caught:
        RayOptions(workers=0)
    assert (caught.value.option, caught.value.value) == ("workers", 0)
    with pytest.raises(OptionError, match="max_attempts=0"):
        RayOptions(max_attempts=0)
    with pytest.raises(OptionError, match="cpus_per_worker=-1"):
        RayOptions(cpus_per_worker=-1)


def test_without_ray_installed_the_flag_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(UsageError) as caught:
        import_ray()
    assert INSTALL_HINT in str(caught.value)
    with pytest.raises(UsageError, match="pip install"):
        make_executor("ray")
    # memprobe itself (and the local executor) still work.
    assert make_executor("local").name == "local"


def test_cli_ray_without_ray_is_a_usage_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)
    code = main(
        [
            "--store",
            str(tmp_path / "runs.sqlite"),
            "audit",
            "--corpus",
            "--limit",
            "1",
            "--methods",
            "ps_base",
            "--lengths",
            "20",
            "--backend",
            "fake",
            "--victim",
            "fake",
            "--base",
            "fake",
            "--executor",
            "ray",
        ]
    )
    assert code == 2
    assert INSTALL_HINT in capsys.readouterr().err
    assert Store(tmp_path / "runs.sqlite").list_runs() == []  # refused before recording a run


def test_cli_ray_flags_need_the_ray_executor(tmp_path, capsys):
    code = main(["--store", str(tmp_path / "runs.sqlite"), "resume", "1", "--workers", "4"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--workers 4: applies to --executor 'ray' only" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--prefetch-window", "8"], "--prefetch-window 8: applies to --executor 'ray' only"),
        (["--executor", "ray", "--prefetch-window", "0"], "--prefetch-window 0: give 1 or more"),
    ],
)
def test_cli_prefetch_window_needs_ray_and_a_window_of_one_or_more(
    tmp_path, capsys, flags, message
):
    pytest.importorskip("ray")
    code = main(["--store", str(tmp_path / "runs.sqlite"), "resume", "1", *flags])
    assert code == 2
    assert message in capsys.readouterr().err


def test_unknown_executor_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown"):
        make_executor("dask")


def test_fake_latency_option():
    model = load("fake:victim", backend="fake", latency_s=0.01)
    assert model.latency_s == 0.01
    with pytest.raises(ModelError, match="latency_s"):
        load("fake:victim", backend="fake", latency_s=-1)


def test_trace_of_flags_each_rounds_best_as_the_live_recorder_does():
    from memprobe_core.attacks.events import CandidateScored, RoundFinished
    from memprobe_core.attacks.result import Candidate
    from memprobe_core.executors.ray import trace_of

    cands = [
        Candidate(
            round=r, index=i, prompt=f"p{r}{i}", output="o", mem=0.0, lcs_p=0.0, objective=0.0
        )
        for r in (1, 2)
        for i in range(3)
    ]
    events = [CandidateScored(round=c.round, candidate=c) for c in cands]
    events.insert(3, RoundFinished(round=1, best=cands[1]))
    events.append(RoundFinished(round=2, best=cands[5]))
    trace = trace_of(events)
    assert [c.prompt for c in trace] == [c.prompt for c in cands]  # in scoring order
    assert [c.is_round_best for c in trace] == [False, True, False, False, False, True]


def test_local_executor_prefetches_each_window_before_its_units(tmp_path, monkeypatch):
    """Each window of the pending units goes to prefetch_units before its first unit runs."""
    import memprobe_core.executors.local as local

    seen: list[str] = []
    windows: list[list] = []
    original_run_unit = local.run_unit

    def prefetch(units, snippets, models, options, *, split_spec):
        windows.append(list(units))
        seen.append("prefetch")

    def run_unit(*args, **kwargs):
        seen.append("run")
        return original_run_unit(*args, **kwargs)

    monkeypatch.setattr(local, "prefetch_units", prefetch)
    monkeypatch.setattr(local, "run_unit", run_unit)
    store, run_id = new_audit(tmp_path, "windows")  # 2 snippets x 3 methods: 6 units
    pending = [u["key"] for u in store.units(run_id, status="pending")]
    run_audit(store, run_id, executor=LocalExecutor(prefetch_window=4))
    assert windows == [pending[:4], pending[4:]]
    assert seen == ["prefetch", "run", "run", "run", "run", "prefetch", "run", "run"]
    assert store.unit_counts(run_id).get("done") == 6


def test_prefetch_units_groups_by_method_and_ignores_failures(caplog):
    """Only methods with a prefetch are asked, with the pieces that can be cut; its failure is
    logged, not raised (the units compute for themselves)."""
    from memprobe_core.attacks import ModelSet, registry
    from memprobe_core.attacks.registry import MethodSpec
    from memprobe_core.runs.unit import prefetch_units
    from memprobe_core.snippets.split import Snippet
    from memprobe_core.store import UnitKey

    got: list[list[str]] = []

    def prefetch(pieces, models, options):
        got.append([p.snippet.id for p in pieces])
        raise RuntimeError("out of memory")

    run = registry.get_method("ps_base").run
    toy = MethodSpec(
        name="toy_prefetch", label="Toy", run=run, roles=("victim",), rank=999, prefetch=prefetch
    )
    registry.register(toy)
    snippets = {
        "a": Snippet("a", "one two three four five six seven eight", "legal"),
        "b": Snippet("b", "too short", "legal"),
        "c": Snippet("c", "nine ten eleven twelve thirteen fourteen fifteen", "legal"),
    }
    units = [
        UnitKey("a", "toy_prefetch", 6),
        UnitKey("a", "ps_base", 6),  # no prefetch: not asked
        UnitKey("b", "toy_prefetch", 6),  # cannot be cut: left to its unit
        UnitKey("c", "toy_prefetch", 6),
    ]
    models = ModelSet(victim=load("fake", backend="fake"))
    try:
        prefetch_units(units, snippets, models, AttackOptions(), split_spec=SplitSpec("whitespace"))
    finally:
        registry.unregister("toy_prefetch")
    assert got == [["a", "c"]]
    assert "prefetch of 2 toy_prefetch unit(s) failed: RuntimeError: out of memory" in caplog.text
