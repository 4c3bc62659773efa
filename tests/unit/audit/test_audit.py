"""Batch audits: unit order, errors recorded, resume after a crash, Ctrl-C, cancel, model roles."""

from __future__ import annotations

import json
import threading

import pytest

import memprobe_core.models as models_pkg
from memprobe_core.attacks.events import CandidateScored
from memprobe_core.attacks.model_set import ModelSet, has_weights
from memprobe_core.attacks.options import AttackOptions, InteractiveOptions
from memprobe_core.attacks.registry import roles_needed
from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.audit import (
    ModelNames,
    load_models,
    resume_audit,
    run_audit,
    start_audit,
)
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey
from tests.helpers.scripted_models import parrot

WORDS = " ".join(f"w{i}" for i in range(40))


class FakeRunner:
    """Stands in for ``run_method``: emits two candidates and returns a result; logs calls."""

    def __init__(
        self,
        fail_on: set[tuple[str, str]] | None = None,
        interrupt_on: tuple[str, str] | None = None,
    ) -> None:
        self.calls: list[tuple[str, str, int]] = []
        self.fail_on = fail_on or set()
        self.interrupt_on = interrupt_on

    def __call__(self, method, split, models, options, *, on_event=None, cancel=None):
        snippet_id = split.snippet.id
        self.calls.append((snippet_id, method, split.length))
        for i in range(2):
            c = Candidate(
                round=1,
                index=i,
                prompt=f"{method} {i}",
                output="o",
                mem=0.1 * i,
                lcs_p=0.0,
                objective=0.1 * i,
            )
            on_event(CandidateScored(round=1, candidate=c))
            if (snippet_id, method) == self.interrupt_on:
                raise KeyboardInterrupt
        if (snippet_id, method) in self.fail_on:
            raise RuntimeError("the attacker went away")
        mem = {"ps_base": 0.2, "ps_inst": 0.3, "interactive": 0.6}.get(method, 0.1)
        return AttackResult(
            method=method,
            snippet_id=snippet_id,
            domain=split.snippet.domain,
            length=split.length,
            prompt="p",
            output="o",
            mem=mem,
            lcs_p=0.1,
            objective=mem / 2,
            alpha=0.5,
        )


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.sqlite") as s:
        yield s


def snippets(n: int = 3, short: str | None = None) -> list[Snippet]:
    out = [Snippet(f"s{i}", WORDS, "legal") for i in range(n)]
    if short:
        out.append(Snippet(short, "only five words in here", "code"))
    return out


def models() -> ModelSet:
    said = "w14 w15 w16 w17"
    return ModelSet(
        victim=parrot("test/parrot", said),
        base=parrot("test/base", said),
        attacker=parrot("test/att", said),
    )


def test_start_audit_records_units_in_order(store):
    run_id = start_audit(
        store,
        snippets(2),
        ["ps_inst", "ps_base"],
        [20, 10],
        AttackOptions(interactive=InteractiveOptions(rounds=1, n_candidates=2)),
        ModelNames(victim="fake"),
    )
    keys = [u["key"] for u in store.units(run_id)]
    assert keys[:4] == [
        UnitKey("s0", "ps_inst", 20),
        UnitKey("s0", "ps_base", 20),
        UnitKey("s0", "ps_inst", 10),
        UnitKey("s0", "ps_base", 10),
    ]
    assert len(keys) == 8
    config = store.get_run(run_id)["config"]
    assert config["models"]["victim"] == "fake"
    assert config["models"]["base"] and config["models"]["attacker"]  # defaults filled in
    assert config["options"]["interactive"]["rounds"] == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"methods": ["ps_inst", "magic"]}, "unknown method.*magic"),
        ({"methods": []}, "no method"),
        ({"lengths": [1]}, "at least 2 tokens"),
        ({"snippets": []}, "no usable snippet"),
    ],
)
def test_start_audit_rejects_bad_input(store, kwargs, message):
    args = {"snippets": snippets(1), "methods": ["ps_inst"], "lengths": [20]} | kwargs
    with pytest.raises(ValueError, match=message):
        start_audit(store, args["snippets"], args["methods"], args["lengths"])
    assert store.list_runs() == []


def test_audit_runs_every_unit_and_records_errors(store):
    run_id = start_audit(store, snippets(2, short="tiny"), ["ps_base", "ps_inst"], [20])
    runner = FakeRunner(fail_on={("s1", "ps_inst")})
    seen = []
    summary = run_audit(store, run_id, models=models(), runner=runner, on_progress=seen.append)
    assert summary.status == "finished"
    assert (summary.done, summary.errors, summary.pending, summary.total) == (3, 3, 0, 6)
    errors = {
        (u["snippet_id"], u["method"]): u["error"] for u in store.units(run_id, status="error")
    }
    assert "the attacker went away" in errors[("s1", "ps_inst")]
    # The snippet too short for the length is reported with its id and token count.
    assert (
        "DataError" in errors[("tiny", "ps_base")]
        and "'tiny' has 5 tokens" in errors[("tiny", "ps_base")]
    )
    assert store.get_run(run_id)["status"] == "finished"
    # Progress: one report before and one after each unit, ending at total.
    assert seen[-1].done == 6 and seen[-1].total == 6 and seen[-1].errors == 3
    assert seen[0].current == UnitKey("s0", "ps_base", 20) and seen[0].done == 0
    assert all(p.rate > 0 for p in seen[2:]) and seen[-1].eta_s == 0
    assert len(store.candidates(run_id, UnitKey("s0", "ps_base", 20))) == 2


def test_resume_redoes_only_the_unit_in_flight(store):
    run_id = start_audit(store, snippets(3), ["ps_inst"], [20])
    first = FakeRunner()
    run_audit(store, run_id, models=models(), runner=first)
    # Simulate a kill during s1: its result is gone, it is still marked running, with a partial
    # candidate of the dead attempt.
    in_flight = UnitKey("s1", "ps_inst", 20)
    store.mark_unit_running(store_run := run_id, in_flight)
    store.record_candidate(store_run, in_flight, Candidate(1, 0, "stale", "", 0, 0, 0))
    store.set_run_status(run_id, "running")
    before = {u["snippet_id"]: (u["attempts"], u["finished"]) for u in store.units(run_id)}
    second = FakeRunner()
    summary = resume_audit(store, run_id, models=models(), runner=second)
    assert second.calls == [("s1", "ps_inst", 20)]  # done units are not recomputed
    assert summary.status == "finished" and summary.ran == 1
    after = {u["snippet_id"]: (u["attempts"], u["finished"]) for u in store.units(run_id)}
    assert after["s0"] == before["s0"] and after["s2"] == before["s2"]
    assert after["s1"][0] == 3  # first run, the simulated attempt, the redo
    prompts = [c["prompt"] for c in store.candidates(run_id, in_flight)]
    assert "stale" not in prompts and len(prompts) == 2
    assert len(store.results_frame(run_id)) == 3


def test_ctrl_c_interrupts_cleanly_and_resume_finishes(store):
    run_id = start_audit(store, snippets(3), ["ps_inst"], [20])
    runner = FakeRunner(interrupt_on=("s1", "ps_inst"))
    summary = run_audit(store, run_id, models=models(), runner=runner)
    assert summary.status == "interrupted" and summary.done == 1 and summary.pending == 2
    assert store.get_run(run_id)["status"] == "interrupted"
    unit = UnitKey("s1", "ps_inst", 20)
    assert store.units(run_id, status="pending")[0]["key"] == unit
    assert store.candidates(run_id, unit) == []  # partial attempt dropped
    summary = resume_audit(store, run_id, models=models(), runner=FakeRunner())
    assert summary.status == "finished" and summary.done == 3


def test_cancel_event_stops_before_the_next_unit(store):
    run_id = start_audit(store, snippets(3), ["ps_inst"], [20])
    cancel = threading.Event()

    def on_progress(progress):
        if progress.done == 1:
            cancel.set()

    summary = run_audit(
        store, run_id, models=models(), runner=FakeRunner(), cancel=cancel, on_progress=on_progress
    )
    assert summary.status == "interrupted" and summary.done == 1


def test_retry_errors_redoes_failed_units(store):
    run_id = start_audit(store, snippets(2), ["ps_inst"], [20])
    run_audit(store, run_id, models=models(), runner=FakeRunner(fail_on={("s0", "ps_inst")}))
    runner = FakeRunner()
    resume_audit(store, run_id, models=models(), runner=runner)
    assert runner.calls == []  # errors are kept by default
    resume_audit(store, run_id, models=models(), runner=runner, retry_errors=True)
    assert runner.calls == [("s0", "ps_inst", 20)]
    assert store.unit_counts(run_id)["error"] == 0


def test_real_methods_on_fake_models(store):
    """The default runner (memprobe_core.attacks.run_method) through the audit."""
    run_id = start_audit(
        store,
        snippets(1),
        ["ps_inst", "interactive"],
        [21],
        AttackOptions(alpha=0.5, interactive=InteractiveOptions(rounds=1, n_candidates=2)),
    )
    summary = run_audit(store, run_id, models=models())
    assert summary.errors == 0, store.errors_frame(run_id)
    frame = store.results_frame(run_id).set_index("method")
    # The parrot's output "w14 w15 w16 w17" is 4 of the 14 suffix words (w7..w20).
    assert frame.loc["ps_inst", "mem"] == pytest.approx(4 / 14)
    inter = store.candidates(run_id, UnitKey("s0", "interactive", 21))
    assert len(inter) == 3  # the initial prompt and 2 candidates of round 1


def test_models_factory_gets_the_config_on_resume(store):
    run_id = start_audit(store, snippets(1), ["ps_inst"], [20], models=ModelNames(victim="v1"))
    seen = []

    def factory(config):
        seen.append(config["models"]["victim"])
        return models()

    run_audit(store, run_id, models_factory=factory, runner=FakeRunner())
    assert seen == ["v1"]


def test_only_needed_models_are_loaded(monkeypatch):
    assert roles_needed(["ps_inst"]) == ["victim"]
    assert roles_needed(["ps_base"]) == ["victim", "base"]
    assert roles_needed(["interactive", "reverse_lm"]) == ["victim", "attacker", "init", "reverse"]
    loaded = []

    def fake_load(name, *, backend=None, **options):
        loaded.append(name)
        return parrot(name, "w14 w15 w16 w17")

    monkeypatch.setattr(models_pkg, "load", fake_load, raising=False)
    names = ModelNames(victim="vic", base="bas", attacker="att")
    result = load_models(names, ["ps_base", "ps_inst"])
    assert loaded == ["vic", "bas"] and result.attacker is None
    loaded.clear()
    result = load_models(names, ["interactive"])
    assert loaded == ["vic", "att"]  # init defaults to the attacker: loaded once
    assert result.init is result.attacker
    loaded.clear()
    # A named reference model (membership signals) is loaded whatever the methods.
    names.reference = "ref"
    result = load_models(names, ["ps_inst"])
    assert loaded == ["vic", "ref"] and result.reference.model_id == "ref"


def test_a_run_owned_by_a_live_process_is_not_run_twice(store):
    import socket
    import subprocess
    import sys

    from memprobe_core.audit import AuditBusyError

    run_id = start_audit(store, snippets(1), ["ps_inst"], [20])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        manifest = {"owner": {"pid": other.pid, "host": socket.gethostname()}}
        store.update_run(run_id, manifest=manifest)
        store.set_run_status(run_id, "running")
        with pytest.raises(AuditBusyError, match=f"process {other.pid}"):
            run_audit(store, run_id, models=models(), runner=FakeRunner())
    finally:
        other.kill()
        other.wait()
    # Once the owner is gone (killed, even by SIGKILL), the run can be resumed.
    summary = run_audit(store, run_id, models=models(), runner=FakeRunner())
    assert (summary.status, summary.done, summary.ran) == ("finished", 1, 1)
    summary = run_audit(store, run_id, models=models(), runner=FakeRunner())
    assert summary.status == "finished"


@pytest.mark.parametrize(
    ("method", "role"), [("acr", "victim"), ("gcg", "base"), ("verbatim", "victim")]
)
def test_a_white_box_method_with_a_model_without_weights_is_refused_before_any_unit(
    store, method, role
):
    """ACR's and verbatim-only's victim and GCG's base must expose weights: an audit that names
    an endpoint (here a scripted black-box model) there fails up front, naming the role and the
    model, with every unit still pending and no model asked anything."""
    from memprobe_core.attacks.model_set import MissingModelError

    run_id = start_audit(
        store,
        snippets(2),
        ["ps_inst", method],
        [12],
        models=ModelNames(backend="fake"),
        split_tokenizer="whitespace",
    )
    given = models()
    with pytest.raises(MissingModelError, match=f"needs the weights of its {role} model.*test/"):
        run_audit(store, run_id, models=given)
    assert {u["status"] for u in store.units(run_id)} == {"pending"}
    assert all(not getattr(m, "calls", []) for m in (given.victim, given.base))
    # Without the white-box method the same models run.
    run_id = start_audit(
        store,
        snippets(1),
        ["ps_inst"],
        [12],
        models=ModelNames(backend="fake"),
        split_tokenizer="whitespace",
    )
    assert run_audit(store, run_id, models=given).status == "finished"


def _victim_only_methods_a_fake_victim_cannot_serve() -> list[str]:
    """From the registry: each method run by the victim alone that a ``fake:victim`` cannot
    serve (no weights for a white-box victim, no chat template for a chat victim)."""
    from memprobe_core.attacks import registry
    from memprobe_core.models import load

    victim = load("fake:victim")
    names = []
    for spec in registry.specs():
        if set(spec.roles) != {"victim"}:
            continue
        no_weights = "victim" in spec.white_box_roles and not has_weights(victim)
        no_chat = "victim" in spec.chat_roles and not victim.has_chat_template
        if no_weights or no_chat:
            names.append(spec.name)
    return names


@pytest.mark.parametrize("method", _victim_only_methods_a_fake_victim_cannot_serve())
def test_a_method_the_loaded_victim_cannot_serve_is_refused_with_no_run_stored(
    method, tmp_path, capsys
):
    from memprobe_core.cli import main

    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"s{i}", "text": " ".join(f"w{i}x{j}" for j in range(60))}) + "\n"
            for i in range(3)
        ),
        encoding="utf-8",
    )
    store = tmp_path / "c.sqlite"
    argv = ["--store", str(store), "audit", str(data), "--victim", "fake:victim"]
    assert main([*argv, "--methods", method]) == 2  # as a model named unfit by its name
    err = capsys.readouterr().err
    assert "needs " in err and "'fake:victim'" in err, err
    assert not store.exists() or Store(store).list_runs() == []
