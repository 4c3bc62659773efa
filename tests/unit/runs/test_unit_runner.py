"""The one unit runner: every way a unit can end, as the store records it."""

from __future__ import annotations

import threading

import pytest

from memprobe_core.attacks.events import CandidateScored, RoundFinished, RoundStarted
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions, InteractiveOptions
from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.membership.near_verbatim import NO_WEIGHTS as NEAR_VERBATIM_NO_WEIGHTS
from memprobe_core.models import load
from memprobe_core.runs.probe import RunConfig, run_probe, start_probe
from memprobe_core.runs.unit import SplitSpec, run_unit
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey

SNIPPET = Snippet("s", " ".join(f"w{i}" for i in range(60)), "legal")
SPEC = SplitSpec("whitespace")


def scripted(
    n: int = 3,
    *,
    cancel_after: int | None = None,
    fail: Exception | None = None,
    interrupt: bool = False,
):
    """A method that scores ``n`` candidates (emitting each) and then ends as told."""

    def method(name, split, models, options, *, on_event=None, cancel=None):
        trace = []
        on_event(RoundStarted(round=0, n=n))
        for i in range(n):
            c = Candidate(
                round=0,
                index=i,
                prompt=f"p{i}",
                output="o",
                mem=0.1 * i,
                lcs_p=0.0,
                objective=0.1 * i,
            )
            trace.append(c)
            on_event(CandidateScored(round=0, candidate=c))
            if cancel_after is not None and i + 1 == cancel_after:
                cancel.set()
            if interrupt:
                raise KeyboardInterrupt
            if cancel is not None and cancel.is_set():
                break
        if fail is not None:
            raise fail
        best = max(trace, key=lambda c: c.objective)
        on_event(RoundFinished(round=0, best=best))
        return AttackResult(
            method=name,
            snippet_id=split.snippet.id,
            domain="legal",
            length=split.length,
            prompt=best.prompt,
            output=best.output,
            mem=best.mem,
            lcs_p=0.0,
            objective=best.objective,
            alpha=0.5,
            trace=trace,
            status="cancelled" if cancel is not None and cancel.is_set() else "finished",
        )

    return method


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.sqlite") as s:
        yield s


def models() -> ModelSet:
    fake = load("fake")
    return ModelSet(victim=fake, base=fake, attacker=fake, init=fake)


def new_probe(store: Store, methods=("interactive",)) -> int:
    return start_probe(
        store, SNIPPET, list(methods), 30, models(), AttackOptions(), split_spec=SPEC
    )


UNIT = UnitKey("s", "interactive", 30)


def test_a_finished_unit_keeps_its_candidates_once_and_its_result(store):
    run_id = new_probe(store)
    outcome = run_unit(
        store, run_id, UNIT, SNIPPET, models(), AttackOptions(), split_spec=SPEC, runner=scripted(3)
    )
    assert outcome.status == "done"
    assert [c["index"] for c in store.candidates(run_id, UNIT)] == [0, 1, 2]
    stored = store.result(run_id, UNIT)
    assert [c.prompt for c in stored.trace] == [c.prompt for c in outcome.result.trace]
    assert [c.is_round_best for c in stored.trace] == [False, False, True]  # from RoundFinished
    assert stored.objective == pytest.approx(0.2)


def test_a_cancelled_probe_unit_keeps_its_partial_best_but_never_counts(store):
    run_id = new_probe(store)
    cancel = threading.Event()
    outcome = run_unit(
        store,
        run_id,
        UNIT,
        SNIPPET,
        models(),
        AttackOptions(),
        split_spec=SPEC,
        cancel=cancel,
        on_cancel="keep",
        runner=scripted(5, cancel_after=2),
    )
    assert outcome.status == "cancelled"
    (row,) = store.units(run_id)
    assert row["status"] == "cancelled"
    assert len(store.candidates(run_id, UNIT)) == 2
    assert store.result(run_id, UNIT).status == "cancelled"
    assert store.results_frame(run_id).empty  # Table 1 reads finished units only


def test_a_cancelled_audit_unit_goes_back_to_pending(store):
    run_id = new_probe(store)
    cancel = threading.Event()
    outcome = run_unit(
        store,
        run_id,
        UNIT,
        SNIPPET,
        models(),
        AttackOptions(),
        split_spec=SPEC,
        cancel=cancel,
        on_cancel="requeue",
        runner=scripted(5, cancel_after=2),
    )
    assert outcome.status == "pending"
    assert store.units(run_id)[0]["status"] == "pending"
    assert store.candidates(run_id, UNIT) == []


def test_ctrl_c_leaves_the_unit_pending_and_propagates(store):
    run_id = new_probe(store)
    with pytest.raises(KeyboardInterrupt):
        run_unit(
            store,
            run_id,
            UNIT,
            SNIPPET,
            models(),
            AttackOptions(),
            split_spec=SPEC,
            runner=scripted(3, interrupt=True),
        )
    assert store.units(run_id)[0]["status"] == "pending"


def test_a_failing_method_is_recorded_with_secrets_redacted(store):
    run_id = new_probe(store)
    boom = RuntimeError("401 from server: Authorization: Bearer sk-live-abcdefghijkl")
    outcome = run_unit(
        store,
        run_id,
        UNIT,
        SNIPPET,
        models(),
        AttackOptions(),
        split_spec=SPEC,
        runner=scripted(2, fail=boom),
    )
    assert outcome.status == "error" and outcome.exception is boom
    (row,) = store.units(run_id)
    assert row["status"] == "error" and "RuntimeError: 401" in row["error"]
    assert "sk-live" not in row["error"] and "abcdefghijkl" not in row["error"]


def test_a_snippet_too_short_for_the_length_is_a_unit_error(store):
    run_id = new_probe(store)
    short = Snippet("s", "only five words in here", "legal")
    outcome = run_unit(
        store, run_id, UNIT, short, models(), AttackOptions(), split_spec=SPEC, runner=scripted(1)
    )
    assert outcome.status == "error" and "DataError" in outcome.error


def test_run_probe_cancel_marks_the_run_cancelled_and_runs_no_further_unit(store):
    run_id = new_probe(store, methods=("ps_inst", "interactive"))
    cancel = threading.Event()
    outcomes = run_probe(store, run_id, models(), cancel=cancel, runner=scripted(4, cancel_after=1))
    assert [o.status for o in outcomes] == ["cancelled"]
    assert store.get_run(run_id)["status"] == "cancelled"
    assert [u["status"] for u in store.units(run_id)] == ["cancelled", "pending"]


def test_run_config_round_trips_and_reads_the_older_singular_shape():
    config = RunConfig(
        methods=("gcg",),
        lengths=(200, 300),
        options=AttackOptions(interactive=InteractiveOptions(rounds=2)),
        models={"victim": "v"},
        split=SplitSpec("whitespace", 0.4),
    )
    assert RunConfig.from_dict(config.to_dict()) == config
    old = RunConfig.from_dict({"method": "interactive", "length": 200})
    assert (old.methods, old.lengths) == (("interactive",), (200,))


def test_run_creation_is_atomic(store):
    with pytest.raises(ValueError, match="appears twice"):
        store.create_run("audit", snippets=[SNIPPET, SNIPPET], units=[UNIT])
    assert store.list_runs() == []  # no half-made run left behind


def test_a_failing_store_stops_the_unit_instead_of_recording_an_error(store, monkeypatch):
    import sqlite3

    run_id = new_probe(store)

    def disk_full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store, "record_candidate", disk_full)
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        run_unit(
            store,
            run_id,
            UNIT,
            SNIPPET,
            models(),
            AttackOptions(),
            split_spec=SPEC,
            runner=scripted(2),
        )
    assert store.units(run_id)[0]["status"] == "running"  # a resume redoes it


def test_ctrl_c_inside_the_final_store_write_still_leaves_no_unit_running(store, monkeypatch):
    """Ctrl-C may land in the store write that ends the unit, after the method returned."""
    run_id = new_probe(store)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "finish_unit", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_unit(
            store,
            run_id,
            UNIT,
            SNIPPET,
            models(),
            AttackOptions(),
            split_spec=SPEC,
            runner=scripted(2),
        )
    assert store.units(run_id)[0]["status"] == "pending"


# --- what every unit measures beside Mem (memprobe_core.membership.measure) -----------------------
def test_every_finished_unit_stores_its_verbatim_metrics(store):
    run_id = new_probe(store)
    # The scripted method's output "o" is not the suffix: nothing verbatim, k capped at the suffix.
    run_unit(
        store, run_id, UNIT, SNIPPET, models(), AttackOptions(), split_spec=SPEC, runner=scripted(2)
    )
    verbatim = store.result(run_id, UNIT).verbatim
    assert verbatim == {
        "extract_k": 20,
        "extractable": False,
        "match_tokens": 0,
        "span_tokens": 0,
        "span_chars": 0,
        # p_z needs the victim's weights or a server that scores a text: said, not zeros.
        "pz_scheme": "temperature 1, top-k 40",
        "pz_not_measured": "the victim exposes no weights and its server returns no prompt "
        "log-probs",
        # The near-verbatim search needs the weights too (docs/method.md §22).
        "near_verbatim_log10_lower": None,
        "near_verbatim_not_measured": NEAR_VERBATIM_NO_WEIGHTS,
    }
    # A black-box victim has no signals: recorded as not measured, not as zeros.
    assert store.result(run_id, UNIT).membership == {}


def run_on_a_white_box_victim(store: Store, options: AttackOptions):
    """One P-S-Inst unit on a tiny random HF victim; returns (run id, unit, outcome)."""
    from tests.helpers.tiny_models import tiny_hf_generator

    models = ModelSet(victim=tiny_hf_generator())
    snippet = Snippet("t", "the quick brown fox jumps over the lazy dog " * 8, "legal")
    run_id = start_probe(store, snippet, ["ps_inst"], 30, models, options)
    unit = UnitKey("t", "ps_inst", 30)
    return run_id, unit, run_unit(store, run_id, unit, snippet, models, options)


def test_a_white_box_victim_gets_its_signals_stored_with_the_unit(store):
    run_id, unit, outcome = run_on_a_white_box_victim(store, AttackOptions())
    assert outcome.status == "done"
    stored = store.result(run_id, unit)
    assert stored.membership["tokens"] >= 29 and stored.membership["loss"] > 0
    assert stored.verbatim["extract_k"] == 20  # the suffix's 20 tokens (< k = 50)
    row = store.results_frame(run_id).iloc[0]
    assert row["signal_loss"] == pytest.approx(stored.membership["loss"])
    assert stored.costs.measure_seconds > 0


def test_signals_switched_off_are_not_measured(store):
    from memprobe_core.membership import MeasureOptions

    options = AttackOptions(measure=MeasureOptions(signals=False))
    run_id, unit, outcome = run_on_a_white_box_victim(store, options)
    assert outcome.status == "done"
    assert store.result(run_id, unit).membership == {}


def test_failing_signals_are_recorded_and_the_unit_still_counts(store, monkeypatch):
    import memprobe_core.membership.measure as measure

    def broken(*args, **kwargs):
        raise RuntimeError("out of memory at key=sk-abcdefghijklmnopqrstuvwx")

    monkeypatch.setattr(measure, "compute_signals", broken)
    run_id = new_probe(store)
    outcome = run_unit(
        store, run_id, UNIT, SNIPPET, models(), AttackOptions(), split_spec=SPEC, runner=scripted(2)
    )
    assert outcome.status == "done"
    error = store.result(run_id, UNIT).membership["error"]
    assert error.startswith("RuntimeError: out of memory") and "sk-abcdefghij" not in error
