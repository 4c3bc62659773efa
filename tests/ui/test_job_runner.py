"""Worker-thread jobs: progress under a lock, cancel, failures, and one model job at a time."""

from __future__ import annotations

import threading
import time

import pytest

from memprobe_core.attacks.options import InteractiveOptions
from ui_common.job_runner import Holder, Job, ModelLock, Progress, ago, describe_holder, lock_status


def _wait(predicate, timeout: float = 5.0) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def test_job_result_items_and_rate() -> None:
    def work(progress: Progress, cancel: threading.Event) -> str:
        progress.set(total=3)
        for i in range(3):
            progress.add_item({"i": i})
            progress.advance()
        progress.update_data(best="b")
        return "done"

    job = Job(work, name="t", lock=ModelLock()).start()
    job.join(5)
    snap = job.progress.snapshot()
    assert snap.state == "finished" and snap.result == "done"
    assert [row["i"] for row in snap.items] == [0, 1, 2]
    assert snap.done == 3 and snap.fraction == 1.0 and snap.data == {"best": "b"}
    assert snap.rate is not None and snap.rate > 0


def test_snapshot_is_a_private_copy() -> None:
    progress = Progress()
    progress.add_item(1)
    snap = progress.snapshot()
    progress.add_item(2)
    progress.update_data(x=1)
    assert snap.items == [1] and snap.data == {}


def test_cancel_keeps_partial_result() -> None:
    started = threading.Event()

    def work(progress: Progress, cancel: threading.Event) -> int:
        n = 0
        started.set()
        while not cancel.is_set():
            n += 1
            time.sleep(0.005)
        return n

    job = Job(work, name="c", lock=None).start()
    started.wait(5)
    job.cancel()
    job.join(5)
    snap = job.progress.snapshot()
    assert snap.state == "cancelled" and snap.result >= 1 and snap.is_final


def test_failure_is_reported_with_its_message() -> None:
    def work(progress: Progress, cancel: threading.Event) -> None:
        raise ValueError("snippet 'x' has 3 tokens")

    job = Job(work, name="f", lock=None).start()
    job.join(5)
    snap = job.progress.snapshot()
    assert snap.state == "failed"
    assert snap.error == "ValueError: snippet 'x' has 3 tokens"


def test_second_job_waits_for_the_model_lock_and_says_so() -> None:
    lock = ModelLock()
    release = threading.Event()
    order: list[str] = []

    def first(progress: Progress, cancel: threading.Event) -> None:
        order.append("first-start")
        release.wait(5)
        order.append("first-end")

    def second(progress: Progress, cancel: threading.Event) -> None:
        order.append("second-start")

    a = Job(first, name="session A probe", lock=lock).start()
    _wait(lambda: a.progress.snapshot().state == "running")
    b = Job(second, name="session B probe", lock=lock).start()
    _wait(lambda: "waiting for another job" in b.progress.snapshot().message)
    snap = b.progress.snapshot()
    assert snap.state == "waiting" and "session A probe" in snap.message
    assert order == ["first-start"]
    release.set()
    a.join(5)
    b.join(5)
    assert order == ["first-start", "first-end", "second-start"]
    assert not lock.locked()


def test_a_waiting_job_names_the_holder_in_plain_words() -> None:
    lock = ModelLock()
    assert lock.acquire("Audit run 3", timeout=1, session="tab-a")
    try:
        mine = Job(lambda p, c: None, name="Probe run 4", lock=lock, session="tab-a").start()
        theirs = Job(lambda p, c: None, name="Probe run 5", lock=lock, session="tab-b").start()
        for job, where in ((mine, "in this tab"), (theirs, "in another tab")):
            _wait(lambda job=job: "another job" in job.progress.snapshot().message)
            message = job.progress.snapshot().message
            assert message.startswith("waiting for another job to finish (Audit run 3 started ")
            assert f" s ago {where}); models run one job at a time" in message
            assert "tab-a" not in message and "session" not in message
    finally:
        lock.release()
    mine.join(5)
    theirs.join(5)


def test_the_job_status_line_in_plain_words() -> None:
    assert lock_status(None, session="a", now=0.0) == (
        "No job is running: a job you start runs at once."
    )
    held = Holder("Probe run 5", since=1000.0, session="b")
    assert lock_status(held, session="a", now=1130.0) == (
        "Busy: Probe run 5 started 2 min ago in another tab; a new job waits for it."
    )
    assert (
        describe_holder(held, session="b", now=1012.5) == "Probe run 5 started 12 s ago in this tab"
    )
    # Held outside any browser session (a test, a script): where is left unsaid.
    assert describe_holder(Holder("x", 0.0), session="b", now=3 * 3600 + 300) == (
        "x started 3 h 5 min ago"
    )
    assert [ago(s) for s in (-1, 59.9, 60, 3599, 3600)] == [
        "0 s",
        "59 s",
        "1 min",
        "59 min",
        "1 h 0 min",
    ]


def test_the_lock_remembers_its_holder() -> None:
    lock = ModelLock()
    assert lock.held_by() is None and lock.holder() == (None, None)
    assert lock.acquire("Audit run 1", timeout=1, session="s")
    held = lock.held_by()
    assert held is not None and (held.what, held.session) == ("Audit run 1", "s")
    assert lock.holder() == ("Audit run 1", held.since)
    lock.release()
    assert lock.held_by() is None


def test_cancel_while_waiting_never_runs() -> None:
    lock = ModelLock()
    assert lock.acquire("holder", timeout=1)
    ran = []
    job = Job(lambda p, c: ran.append(1), name="w", lock=lock).start()
    _wait(lambda: job.progress.snapshot().state == "waiting")
    job.cancel()
    job.join(5)
    assert job.progress.snapshot().state == "cancelled" and not ran
    lock.release()


def test_lock_is_released_when_the_job_fails() -> None:
    lock = ModelLock()

    def boom(progress: Progress, cancel: threading.Event) -> None:
        raise RuntimeError("x")

    job = Job(boom, name="b", lock=lock).start()
    job.join(5)
    assert not lock.locked()


def test_unknown_progress_field_is_refused() -> None:
    with pytest.raises(KeyError, match="update_data"):
        Progress().set(best=1)


def test_recorded_methods_job_stores_every_candidate_and_survives_a_failing_method(
    tmp_path,
) -> None:
    from memprobe_core.attacks.model_set import ModelSet
    from memprobe_core.attacks.options import AttackOptions
    from memprobe_core.models import load
    from memprobe_core.runs.probe import start_probe
    from memprobe_core.runs.unit import SplitSpec
    from memprobe_core.snippets.split import Snippet
    from memprobe_core.store import Store
    from ui_common.job_runner import recorded_methods_job

    store = Store(tmp_path / "runs.sqlite")
    victim = load("fake")
    snippet = Snippet("s", " ".join(f"w{i}" for i in range(80)), "legal")
    options = AttackOptions(interactive=InteractiveOptions(rounds=1, n_candidates=3))
    models = ModelSet(victim=victim, attacker=victim, init=victim)  # no reverse model: it fails
    run_id = start_probe(
        store,
        snippet,
        ["ps_inst", "reverse_lm", "interactive"],
        40,
        models,
        options,
        kind="compare",
        split_spec=SplitSpec("whitespace"),
    )
    job = Job(recorded_methods_job(store, run_id, models), name="t", lock=None).start()
    job.join(30)
    snap = job.progress.snapshot()
    assert snap.state == "finished", snap.error
    assert set(snap.result) == {"ps_inst", "interactive"}
    assert "reverse_lm" in snap.data["errors"] and "reverse" in snap.data["errors"]["reverse_lm"]
    assert snap.done == 3  # units, including the failed one
    stored = store.candidates_frame(run_id)
    assert len(stored) == len(snap.items)
    assert {i["method"] for i in snap.items} == {"ps_inst", "interactive"}
    assert store.get_run(run_id)["status"] == "finished"
    assert store.unit_counts(run_id) == {
        "pending": 0,
        "running": 0,
        "done": 2,
        "error": 1,
        "cancelled": 0,
    }


def test_recorded_methods_job_feeds_the_eta_model_its_plan(tmp_path) -> None:
    from memprobe_core.attacks.model_set import ModelSet
    from memprobe_core.attacks.options import AttackOptions
    from memprobe_core.attacks.registry import expected_candidates
    from memprobe_core.models import load
    from memprobe_core.runs.probe import start_probe
    from memprobe_core.runs.unit import SplitSpec
    from memprobe_core.snippets.split import Snippet
    from memprobe_core.store import Store
    from ui_common.job_runner import recorded_methods_job

    store = Store(tmp_path / "runs.sqlite")
    victim = load("fake")
    snippet = Snippet("s", " ".join(f"w{i}" for i in range(80)), "legal")
    options = AttackOptions(interactive=InteractiveOptions(rounds=2, n_candidates=3))
    models = ModelSet(victim=victim, attacker=victim, init=victim)
    methods = ["ps_inst", "interactive"]
    run_id = start_probe(
        store,
        snippet,
        methods,
        40,
        models,
        options,
        kind="compare",
        split_spec=SplitSpec("whitespace"),
    )
    plan = {m: expected_candidates(m, options) for m in methods}
    job = Job(recorded_methods_job(store, run_id, models, plan=plan), name="t", lock=None)
    job.start().join(30)
    model = job.progress.eta_model
    assert model is not None and job.progress.snapshot().state == "finished"
    # Every planned candidate was counted: nothing is left, so the model says 0 s, not overrun.
    reading = model.reading(time.time())
    assert reading.seconds == 0.0 and not reading.overrun


def test_a_job_that_shows_no_eta_never_gets_one_from_its_rate() -> None:
    progress = Progress(state="running", total=100)
    progress.running_since = time.time() - 10
    progress.done = 50
    assert progress.snapshot().eta is not None  # the plain rate's: 10 s for 50 of 100
    progress.show_eta = False  # the NER audit: stages of very different cost
    snap = progress.snapshot()
    assert snap.eta is None and snap.rate is not None


def test_a_job_queued_behind_another_says_so_as_it_starts() -> None:
    # The page draws a job right after starting it and a queued tab polls slowly: the reason
    # must be there at once, not "starting…" until the worker's first try at the lock.
    lock = ModelLock()
    assert lock.acquire("Audit run 3", timeout=1, session="tab-a")
    try:
        job = Job(lambda p, c: None, name="Probe run 4", lock=lock, session="tab-b").start()
        snap = job.progress.snapshot()
        assert snap.state == "waiting"
        assert snap.message.startswith("waiting for another job to finish (Audit run 3 started ")
    finally:
        lock.release()
    job.join(5)
    free = Job(lambda p, c: None, name="Probe run 5", lock=lock).start()
    free.join(5)
    assert free.progress.snapshot().state == "finished"


def test_a_search_step_adds_its_losses_for_the_live_panel() -> None:
    from memprobe_core.attacks.events import SearchStep
    from ui_common.job_runner import Progress, _progress_events

    progress = Progress()
    on_event = _progress_events(progress, "gcg", "units")
    on_event(SearchStep(step=1, steps=3, loss=2.5, step_loss=2.5, best_prompt="a"))
    on_event(SearchStep(step=2, steps=3, loss=2.1, step_loss=2.1, best_prompt="b"))
    assert progress.snapshot().data["search_losses"] == ((1, 2.5, 2.5), (2, 2.1, 2.1))


def test_a_round_started_is_costed_as_one_batch_of_its_candidates(monkeypatch) -> None:
    from memprobe_core.attacks.events import RoundStarted
    from memprobe_core.runs.eta import EtaModel
    from ui_common.job_runner import Progress, _progress_events

    calls = []
    monkeypatch.setattr(
        EtaModel, "round_started", lambda self, method, now, n: calls.append((method, n))
    )
    progress = Progress()
    progress.eta_model = EtaModel({"interactive": 5})
    on_event = _progress_events(progress, "interactive", "candidates")
    on_event(RoundStarted(round=0, n=1))
    on_event(RoundStarted(round=1, n=4))
    assert calls == [("interactive", 1), ("interactive", 4)]
