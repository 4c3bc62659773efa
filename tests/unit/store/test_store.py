"""The SQLite run store: schema versions, units and candidates, live recording, frames, threads."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
import time

import pytest

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.events import CandidateScored, RoundFinished, RoundStarted, SearchStep
from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.errors import UnknownRunError, UsageError
from memprobe_core.snippets.split import DataError, Snippet
from memprobe_core.store import (
    RESULT_COLUMNS,
    SCHEMA_VERSION,
    Store,
    StoreError,
    UnitKey,
    pii_counts,
)


def cand(round_: int, index: int, objective: float, best: bool = False) -> Candidate:
    return Candidate(
        round=round_,
        index=index,
        prompt=f"p{round_}.{index}",
        output="out",
        mem=objective + 0.1,
        lcs_p=0.05,
        objective=objective,
        is_round_best=best,
    )


def result_for(unit: UnitKey, trace: list[Candidate], mem: float = 0.5) -> AttackResult:
    return AttackResult(
        method=unit.method,
        snippet_id=unit.snippet_id,
        domain="legal",
        length=unit.length,
        prompt="best prompt",
        output="best output",
        mem=mem,
        lcs_p=0.1,
        objective=0.2,
        alpha=0.4,
        dis=0.3,
        trace=trace,
        pii={
            "truth": {"email": ["a@b.org", "c@d.org"]},
            "copied": {"email": ["a@b.org"]},
            "invented": {"email": [], "url": ["http://x.y"]},
        },
        costs=Costs(victim_queries=4, attacker_queries=3, generated_tokens=120, wall_seconds=1.5),
        manifest={
            "models": {
                "victim": {"model_id": "v-model"},
                "base": None,
                "attacker": {"model_id": "a-model"},
            },
            "scoring": {
                "variant": "recall",
                "stemmer": True,
                "tokenizer": "rouge",
                "output_window": "first",
            },
            "seed": 7,
        },
    )


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.sqlite") as s:
        yield s


@pytest.fixture
def run_with_units(store):
    run_id = store.create_run("audit", config={"methods": ["ps_inst"]}, title="t")
    store.add_samples(run_id, [Snippet("a", "text a", "legal", "src"), Snippet("b", "text b")])
    units = [UnitKey("a", "ps_inst", 200), UnitKey("b", "ps_inst", 200)]
    store.add_units(run_id, units)
    return run_id, units


def test_new_store_is_wal_and_current_schema(tmp_path):
    store = Store(tmp_path / "x" / "runs.sqlite")  # folder created
    assert store.schema_version == SCHEMA_VERSION
    mode = sqlite3.connect(store.path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    store.close()
    assert Store(store.path).schema_version == SCHEMA_VERSION  # reopening is fine


def test_store_from_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(
        StoreError, match="newer memprobe.*upgrade memprobe or use another store file"
    ):
        Store(path)


def test_foreign_or_garbage_file_is_refused(tmp_path):
    foreign = tmp_path / "other.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE mine (x)")
    conn.close()
    with pytest.raises(StoreError, match="not a memprobe store"):
        Store(foreign)
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a usable memprobe store"):
        Store(garbage)


def test_runs_samples_and_units(store, run_with_units):
    run_id, units = run_with_units
    assert store.add_units(run_id, units) == 0  # adding twice is harmless
    run = store.get_run(run_id)
    assert (run["kind"], run["title"], run["status"]) == ("audit", "t", "running")
    assert run["config"] == {"methods": ["ps_inst"]}
    assert (run["units_total"], run["units_done"], run["units_pending"]) == (2, 0, 2)
    assert [s.id for s in store.samples(run_id)] == ["a", "b"]
    assert store.samples(run_id)[0] == Snippet("a", "text a", "legal", "src")
    assert [u["key"] for u in store.units(run_id)] == units
    second = store.create_run("probe")
    assert [r["id"] for r in store.list_runs()] == [second, run_id]
    assert [r["id"] for r in store.list_runs(kind="audit")] == [run_id]
    with pytest.raises(UnknownRunError, match="memprobe runs"):
        store.get_run(999)
    with pytest.raises(ValueError, match="appears twice"):
        store.add_samples(run_id, [Snippet("a", "again")])
    with pytest.raises(ValueError, match="run kind"):
        store.create_run("nonsense")


def test_unit_lifecycle_and_candidates(store, run_with_units):
    run_id, (unit, other) = run_with_units
    store.mark_unit_running(run_id, unit)
    store.record_candidate(run_id, unit, cand(0, 0, 0.1))
    store.record_candidate(run_id, unit, cand(1, 0, 0.3))
    assert len(store.candidates(run_id, unit)) == 2
    # A restarted attempt drops the partial candidates of the earlier one.
    store.mark_unit_running(run_id, unit)
    assert store.candidates(run_id, unit) == []
    record = store.recorder(run_id, unit)
    trace = [cand(0, 0, 0.1, True), cand(1, 0, 0.3, True), cand(1, 1, 0.2)]
    for c in trace:
        record(CandidateScored(round=c.round, candidate=c))
    store.finish_unit(run_id, unit, result_for(unit, trace))
    # Stored once: finishing writes the result's columns, not a second copy of the trace.
    assert len(store.candidates(run_id, unit)) == 3
    rows = store.candidates(run_id, unit)
    assert [(r["round"], r["index"], r["is_round_best"]) for r in rows] == [
        (0, 0, True),
        (1, 0, True),
        (1, 1, False),
    ]
    done = store.units(run_id, status="done")
    assert len(done) == 1 and done[0]["attempts"] == 2 and done[0]["seconds"] >= 0
    assert store.result(run_id, unit).trace == trace
    store.mark_unit_running(run_id, other)
    store.fail_unit(run_id, other, "DataError: snippet 'b' has 2 tokens")
    assert store.unit_counts(run_id) == {
        "pending": 0,
        "running": 0,
        "done": 1,
        "error": 1,
        "cancelled": 0,
    }
    errors = store.errors_frame(run_id)
    assert list(errors["error"]) == ["DataError: snippet 'b' has 2 tokens"]
    with pytest.raises(UsageError, match="not part of run"):
        store.mark_unit_running(run_id, UnitKey("zzz", "gcg", 1))


def test_recorder_writes_events_as_they_come(store, run_with_units):
    run_id, (unit, _) = run_with_units
    store.mark_unit_running(run_id, unit)
    record = store.recorder(run_id, unit)
    record(RoundStarted(round=1, n=2))
    record(CandidateScored(round=1, candidate=cand(1, 0, 0.2)))
    assert len(store.candidates(run_id, unit)) == 1  # visible before the round ends
    last_id = store.candidates(run_id, unit)[-1]["id"]
    record(CandidateScored(round=1, candidate=cand(1, 1, 0.4)))
    assert [c["index"] for c in store.candidates(run_id, unit, since_id=last_id)] == [1]
    record(RoundFinished(round=1, best=cand(1, 1, 0.4)))
    record(SearchStep(step=2, steps=3, loss=1.0, step_loss=1.0, best_prompt="x"))  # ignored
    flags = {c["index"]: c["is_round_best"] for c in store.candidates(run_id, unit)}
    assert flags == {0: False, 1: True}


def test_results_frame_flattens_results(store, run_with_units):
    run_id, (unit, _) = run_with_units
    store.mark_unit_running(run_id, unit)
    store.record_candidate(run_id, unit, cand(0, 0, 0.2))
    store.finish_unit(run_id, unit, result_for(unit, [cand(0, 0, 0.2)], mem=0.75))
    frame = store.results_frame(run_id)
    assert list(frame.columns) == RESULT_COLUMNS
    row = frame.iloc[0]
    assert (row["snippet_id"], row["method"], row["method_label"], row["length"]) == (
        "a",
        "ps_inst",
        "P-S-Inst",
        200,
    )
    assert (row["mem"], row["dis"], row["alpha"]) == (0.75, 0.3, 0.4)
    assert (row["victim_queries"], row["attacker_queries"], row["generated_tokens"]) == (4, 3, 120)
    assert (row["pii_truth"], row["pii_copied"], row["pii_invented"]) == (2, 1, 1)
    assert (row["victim"], row["attacker"], row["rouge_variant"], row["seed"]) == (
        "v-model",
        "a-model",
        "recall",
        7,
    )
    cands = store.candidates_frame(run_id)
    assert list(cands["prompt"]) == ["p0.0"]


def test_pii_counts_accepts_counts_and_lists():
    assert pii_counts({}) == (0, 0, 0)
    assert pii_counts({"totals": {"truth": 3, "copied": 1, "invented": 0}}) == (3, 1, 0)
    assert pii_counts({"truth": ["x"], "copied": [], "invented": ["y", "z"]}) == (1, 0, 2)


def test_concurrent_writers_lose_nothing(store, run_with_units):
    run_id, units = run_with_units
    for unit in units:
        store.mark_unit_running(run_id, unit)

    def write(unit: UnitKey) -> None:
        for i in range(40):
            store.record_candidate(run_id, unit, cand(1, i, i / 100))

    threads = [threading.Thread(target=write, args=(u,)) for u in units]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for unit in units:
        assert sorted(c["index"] for c in store.candidates(run_id, unit)) == list(range(40))


def test_readers_do_not_wait_for_a_writer(store, run_with_units):
    run_id, (unit, _) = run_with_units
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    other.execute("UPDATE runs SET title = 'locked' WHERE id = ?", (run_id,))
    try:
        started = time.perf_counter()
        assert store.get_run(run_id)["title"] == "t"  # reads the last committed state
        assert len(store.units(run_id)) == 2
        assert time.perf_counter() - started < 1.0  # no busy wait: WAL readers never block
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_conditional_reset_never_undoes_a_finished_unit(store, run_with_units):
    run_id, (unit, _) = run_with_units
    store.mark_unit_running(run_id, unit)
    store.record_candidate(run_id, unit, cand(0, 0, 0.2))
    store.finish_unit(run_id, unit, result_for(unit, [cand(0, 0, 0.2)]))
    store.reset_unit(run_id, unit, if_status="running")
    assert store.units(run_id)[0]["status"] == "done"
    assert len(store.candidates(run_id, unit)) == 1
    store.reset_unit(run_id, unit)  # unconditional: back to pending
    assert store.units(run_id)[0]["status"] == "pending" and store.candidates(run_id, unit) == []


def test_a_version_1_store_is_upgraded_with_its_results_as_columns(tmp_path):
    """Schema v1 kept each result as JSON (trace included); v2 keeps columns + candidate rows."""
    import json
    import sqlite3

    from memprobe_core.store.migrations import MIGRATIONS

    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0])
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO runs (id, kind, status, created, updated) "
        "VALUES (1, 'audit', 'finished', 0, 0)"
    )
    unit = UnitKey("a", "ps_inst", 200)
    old = result_for(unit, [cand(0, 0, 0.2, True)], mem=0.75)
    conn.execute(
        "INSERT INTO units (run_id, snippet_id, method, length, position, status, "
        "result) VALUES (1, 'a', 'ps_inst', 200, 0, 'done', ?)",
        (json.dumps(old.to_dict()),),
    )
    c = old.trace[0]
    conn.execute(
        "INSERT INTO candidates (run_id, snippet_id, method, length, round, idx, prompt,"
        " output, mem, lcs_p, objective, is_round_best, created) "
        "VALUES (1, 'a', 'ps_inst', 200, 0, 0, ?, ?, ?, ?, ?, 1, 0)",
        (c.prompt, c.output, c.mem, c.lcs_p, c.objective),
    )
    conn.commit()
    conn.close()
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        upgraded = store.result(1, unit)
        # Version 3 fills mem_best from the stored candidates; the rest is unchanged.
        assert upgraded.to_dict() == dataclasses.replace(old, mem_best=c.mem).to_dict()
        assert store.results_frame(1).iloc[0]["mem"] == 0.75
        columns = {r[1] for r in store._read("PRAGMA table_info(units)")}
        assert "result" not in columns and {"mem", "manifest"} <= columns


def test_selection_mems_round_trip_through_the_store_and_the_frame(store, run_with_units):
    run_id, units = run_with_units
    result = result_for(units[0], [cand(0, 0, 0.2, True)], mem=0.5)
    result.mem_init, result.mem_best, result.mem_reference = 0.25, 0.75, 0.6
    result.manifest.update(
        compat="reference",
        selection="reference",
        meta_prompts="reference",
        answer_model="victim",
        generation={"budget_tokens": 200},
    )
    store.finish_unit(run_id, units[0], result)
    back = store.result(run_id, units[0])
    assert (back.mem_init, back.mem_best, back.mem_reference) == (0.25, 0.75, 0.6)
    row = store.results_frame(run_id).iloc[0]
    assert (row["mem_init"], row["mem_best"], row["mem_reference"]) == (0.25, 0.75, 0.6)
    assert (
        row["compat"],
        row["selection"],
        row["meta_prompts"],
        row["answer_model"],
        row["generation_budget"],
    ) == ("reference", "reference", "reference", "victim", 200)


def test_a_version_2_store_gains_the_selection_columns(tmp_path):
    from memprobe_core.store.migrations import MIGRATIONS

    path = tmp_path / "v2.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0])
    MIGRATIONS[1](conn)
    conn.execute("PRAGMA user_version = 2")
    conn.execute(
        "INSERT INTO runs (id, kind, status, created, updated) "
        "VALUES (1, 'audit', 'finished', 0, 0)"
    )
    conn.execute(
        "INSERT INTO units (run_id, snippet_id, method, length, position, status, mem, "
        "costs, manifest, pii) VALUES (1, 'a', 'interactive', 200, 0, 'done', 0.4, "
        "'{}', '{}', '{}')"
    )
    for idx, (mem, flags) in enumerate([(0.4, "[]"), (0.9, "[]"), (0.95, '["empty"]')]):
        conn.execute(
            "INSERT INTO candidates (run_id, snippet_id, method, length, round, idx, "
            "prompt, output, mem, lcs_p, objective, flags, created) "
            "VALUES (1, 'a', 'interactive', 200, 0, ?, 'p', 'o', ?, 0, 0, ?, 0)",
            (idx, mem, flags),
        )
    conn.commit()
    conn.close()
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 4
        res = store.result(1, UnitKey("a", "interactive", 200))
        # The best non-empty candidate's Mem; no round structure is assumed for the others.
        assert (res.mem, res.mem_best, res.mem_init, res.mem_reference) == (0.4, 0.9, None, None)
        # Version 4: not measured reads as empty, never as made-up numbers; no label.
        assert (res.verbatim, res.membership) == ({}, {})
        row = store.results_frame(1).iloc[0]
        assert row["label"] is None and row["signal_loss"] is None and row["extractable"] is None


def test_labels_metrics_and_signals_round_trip_through_the_store(store):
    run_id = store.create_run(
        "audit",
        snippets=[
            Snippet("m", "member text", "legal", label="member"),
            Snippet("n", "made up text", "legal", label="nonmember"),
        ],
        units=[UnitKey("m", "ps_base", 4), UnitKey("n", "ps_base", 4)],
    )
    assert [s.label for s in store.samples(run_id)] == ["member", "nonmember"]
    result = AttackResult(
        method="ps_base",
        snippet_id="m",
        domain="legal",
        length=4,
        prompt="p",
        output="o",
        mem=0.5,
        lcs_p=0.0,
        objective=0.5,
        alpha=1.0,
        verbatim={"extract_k": 2, "extractable": True, "span_tokens": 2, "span_chars": 9},
        membership={"loss": 1.25, "min_k": -2.5},
    )
    store.finish_unit(run_id, UnitKey("m", "ps_base", 4), result)
    assert store.result(run_id, UnitKey("m", "ps_base", 4)).membership == result.membership
    row = store.results_frame(run_id).iloc[0]
    assert (row["label"], row["extractable"], row["span_chars"]) == ("member", True, 9)
    assert (row["signal_loss"], row["signal_min_k"], row["signal_zlib"]) == (1.25, -2.5, None)


def test_a_snippet_label_outside_member_nonmember_is_refused():
    with pytest.raises(DataError, match="label 'yes'"):
        Snippet("a", "text", label="yes")


def test_resumable_audits_have_work_left_and_no_live_owner(store):
    snippet = Snippet(id="s", text="a b c d e f", domain="legal")
    pending = [UnitKey("s", "ps_base", 4)]
    stopped = store.create_run("audit", status="interrupted", snippets=[snippet], units=pending)
    mine = store.create_run("audit", status="interrupted", snippets=[snippet], units=pending)
    finished = store.create_run("audit", status="finished", snippets=[snippet], units=pending)
    done = store.create_run("audit", status="interrupted", snippets=[snippet], units=pending)
    store.finish_unit(done, pending[0], result_for(pending[0], [cand(0, 0, 0.1)]))
    store.create_run("probe", status="interrupted", snippets=[snippet], units=pending)
    assert [r["id"] for r in store.resumable_audits(exclude={mine})] == [stopped]
    assert finished not in [r["id"] for r in store.resumable_audits()]


def test_results_frame_is_kept_until_the_run_changes(tmp_path) -> None:
    from tests.helpers.labelled_run import labelled_run

    store, run_id = labelled_run(tmp_path / "runs.sqlite")
    first = store.results_frame(run_id)
    first.loc[0, "mem"] = 99.0  # a caller's change never reaches the kept frame
    again = store.results_frame(run_id)
    assert again["mem"].max() < 1.0 and len(again) == 11
    failed = next(u["key"] for u in store.units(run_id) if u["status"] == "error")
    store.reset_unit(run_id, failed)  # any write to the run makes a new frame
    store.finish_unit(
        run_id, failed, store.result(run_id, store.units(run_id, status="done")[0]["key"])
    )
    assert len(store.results_frame(run_id)) == 12


def test_unit_timings_give_each_finished_units_cost_and_victim(tmp_path) -> None:
    import time as clock

    from tests.helpers.labelled_run import labelled_run

    store, run_id = labelled_run(tmp_path / "runs.sqlite")
    store.update_run(run_id, config={**store.get_run(run_id)["config"], "models": {"victim": "v"}})
    done = store.units(run_id, status="done")[0]
    result = store.result(run_id, done["key"])
    store.reset_unit(run_id, done["key"])
    store.mark_unit_running(run_id, done["key"])
    clock.sleep(0.01)
    store.finish_unit(run_id, done["key"], result)
    (row,) = store.unit_timings([done["key"].method])  # units never timed (0 s) are left out
    assert row["seconds"] > 0 and row["victim"] == "v" and row["length"] == 40
    assert row["method"] == done["key"].method
    assert store.unit_timings([]) == []


def test_a_config_holding_a_file_name_that_is_not_utf8_is_stored_and_read_back(tmp_path):
    # `memprobe audit $'\xfc.jsonl'`: Python reads the byte as "\udcfc", which UTF-8 text
    # cannot hold; the audit failed with "surrogates not allowed" before any unit.
    config = {"dataset": {"path": "/data/\udcfc.jsonl"}}
    with Store(tmp_path / "runs.sqlite") as store:
        run_id = store.create_run("audit", config=config)
        assert store.get_run(run_id)["config"] == config
