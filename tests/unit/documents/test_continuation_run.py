"""A continuation as a stored run: every turn stored as it arrives, a killed run resumed with
nothing lost or repeated, scored with nv-recall, reported (escaped) and driven from the CLI."""

from __future__ import annotations

import json

import pytest

import memprobe_core.models as models_pkg
from memprobe_core.cli import main
from memprobe_core.documents import continuation_run as cr
from memprobe_core.documents.continuation import ContinuationOptions
from memprobe_core.documents.continuation_report import (
    continuation_html,
    describe_continuation,
    turns_frame,
)
from memprobe_core.documents.stored import DocumentRunError, units_text
from memprobe_core.errors import OptionError
from memprobe_core.store import Store
from tests.unit.documents.test_continuation import (
    BOOK,
    BOOK_WORDS,
    _refuses_the_plain_instruction,
    base_victim,
    chat_victim,
)

OPTIONS = ContinuationOptions(best_of_n=3, max_turns=6)


def start(tmp_path, victim, options=OPTIONS, name="book.txt"):
    store = Store(tmp_path / "runs.sqlite")
    run_id = cr.start_continuation(
        store, BOOK, victim, name=name, victim_name="scripted", options=options
    )
    return store, run_id


def test_every_turn_is_stored_and_the_text_is_scored(tmp_path):
    store, run_id = start(tmp_path, chat_victim(_refuses_the_plain_instruction))
    stored = cr.run_continuation_stored(store, run_id, chat_victim(_refuses_the_plain_instruction))
    assert stored.status == "finished" and stored.stop_reason == "turn_budget"
    assert [t.phase for t in stored.turns] == [1, 1] + [2] * 6
    assert stored.turns[0].refused and stored.turns[1].success
    # Phase 1's passing answer and six turns of 150 words: 1,050 words of the book after the
    # opening, every one in long verbatim runs.
    assert stored.score.matched_words == 7 * 150
    assert stored.generated_text.split() == BOOK_WORDS[200 : 200 + 7 * 150]
    units = store.units(run_id)
    assert [u["snippet_id"] for u in units] == [cr.turn_id(i) for i in range(8)]
    assert {u["status"] for u in units} == {"done"}


def test_a_killed_run_resumes_with_nothing_lost_or_repeated(tmp_path):
    store, whole = start(tmp_path, chat_victim())
    straight = cr.run_continuation_stored(store, whole, chat_victim())

    _, run_id = start(tmp_path, chat_victim())
    asked = []

    def killed_after_three(ask):
        asked.append(ask)
        if len(asked) > 3:
            raise KeyboardInterrupt  # the process dies while the 4th turn is in flight
        from tests.unit.documents.test_continuation import knower

        return knower()(ask)

    with pytest.raises(KeyboardInterrupt):
        cr.run_continuation_stored(store, run_id, chat_victim(killed_after_three))
    kept = cr.read_continuation(store, run_id)
    assert kept.status == "interrupted" and len(kept.turns) == 3

    again = chat_victim()
    resumed = cr.run_continuation_stored(store, run_id, again)
    assert len(again.calls) == len(straight.turns) - 3  # stored turns are not asked again
    assert [t.to_dict() | {"seconds": 0} for t in resumed.turns] == [
        t.to_dict() | {"seconds": 0} for t in straight.turns
    ]
    assert resumed.score == straight.score


def test_a_cancelled_run_is_interrupted_and_goes_on_later(tmp_path):
    import threading

    store, run_id = start(tmp_path, chat_victim())
    cancel = threading.Event()
    first = cr.run_continuation_stored(
        store, run_id, chat_victim(), on_progress=lambda p: cancel.set(), cancel=cancel
    )
    assert first.status == "interrupted" and len(first.turns) == 1
    done = cr.run_continuation_stored(store, run_id, chat_victim())
    assert done.status == "finished" and len(done.turns) == 7


def test_a_document_too_short_for_phase1_is_refused_before_anything_is_stored(tmp_path):
    store = Store(tmp_path / "runs.sqlite")
    with pytest.raises(Exception, match="words"):
        cr.start_continuation(store, "only a few words", chat_victim(), name="d", victim_name="v")
    assert store.list_runs() == []


def test_a_map_run_is_not_a_continuation(tmp_path):
    store = Store(tmp_path / "runs.sqlite")
    run_id = store.create_run("document", config={"mode": "map"})
    with pytest.raises(DocumentRunError, match="is a document's extraction map, not a"):
        cr.read_continuation(store, run_id)


def test_the_report_escapes_and_marks_refusals(tmp_path):
    def refuses_with_markup(ask):
        return "<img src=x onerror=alert(1)> I'm sorry, I can't."

    store, run_id = start(tmp_path, chat_victim(refuses_with_markup), name="<i>b</i>.txt")
    stored = cr.run_continuation_stored(store, run_id, chat_victim(refuses_with_markup))
    html = continuation_html(stored)
    assert "<img" not in html and "&lt;img" in html and "<i>b" not in html
    assert 'class="refused"' in html
    assert stored.stop_reason == "phase1_failed"
    frame = turns_frame(stored)
    assert frame["refused"].all() and len(frame) == 4  # the plain attempt and 3 Best-of-N
    described = describe_continuation(stored)
    assert "phase 1: not passed after 4 attempt(s)" in described
    # The stop in words (the code kept for scripts), and why nothing generated is scored.
    assert "stopped: phase 1 not passed (no attempt wrote enough" in described
    assert "(phase1_failed)" in described
    assert (
        "0 generated words scored (a phase-1 answer that did not pass is not scored)" in described
    )


@pytest.mark.parametrize(
    "changed",
    [{"best_of_n": 2}, {"instruction": "Write the book."}, {"continue_prompt": "Go on"}],
)
def test_a_base_victim_refuses_the_options_only_a_chat_victim_is_sent(tmp_path, changed):
    # A base victim gets the opening alone and continues its own output: these would be
    # recorded in the run and never sent.
    (name,) = changed
    with pytest.raises(OptionError, match=f"^{name}=.*scripted has no chat template"):
        start(tmp_path, base_victim(), ContinuationOptions(**changed))
    assert Store(tmp_path / "runs.sqlite").list_runs() == []
    assert start(tmp_path, chat_victim(), ContinuationOptions(**changed))[1] == 1
    assert start(tmp_path, base_victim(), ContinuationOptions())[1] == 2


def test_a_continuation_counts_its_turns_where_a_map_counts_done_of_all(tmp_path):
    store, run_id = start(tmp_path, chat_victim())
    cr.run_continuation_stored(store, run_id, chat_victim())
    run = store.get_run(run_id)
    assert units_text(run) == f"{run['units_done']} turns" and run["units_done"] > 1
    assert units_text({**run, "units_done": 1}) == "1 turn"
    other = {**run, "config": {**run["config"], "mode": "map"}}
    assert units_text(other) == f"{run['units_done']}/{run['units_total']}"


# --- the CLI ----------------------------------------------------------------------------------


@pytest.fixture
def scripted_victim(monkeypatch):
    def load(name, *, backend=None, **options):
        if name != "scripted":
            raise models_pkg.ModelError(f"model {name!r} is unknown")
        return chat_victim(_refuses_the_plain_instruction)

    monkeypatch.setattr(models_pkg, "load", load, raising=False)


def test_the_cli_runs_shows_and_resumes_a_continuation(tmp_path, scripted_victim, capsys):
    book = tmp_path / "book.txt"
    book.write_text(BOOK, encoding="utf-8")
    store = ["--store", str(tmp_path / "runs.sqlite"), "document"]
    argv = [str(book), "--mode", "continue", "--victim", "scripted", "--best-of-n", "2"]
    code = main([*store, *argv, "--max-turns", "2", "--json", "--csv", str(tmp_path / "t.csv")])
    out = capsys.readouterr()
    assert code == 0
    figures = json.loads(out.out)
    assert figures["phase1_passed"] and figures["phase1_attempts"] == 2
    assert figures["turns"] == 4 and figures["refusals"] == 1
    assert figures["matched_words"] == 3 * 150 and figures["stop_reason"] == "turn_budget"
    assert "[turn 1, phase 1]" in out.err and "refused" in out.err
    assert (tmp_path / "t.csv").read_text().startswith("turn,phase,attempt,")
    assert main([*store, "--show", "1"]) == 0
    assert capsys.readouterr().out.startswith("continuation of book.txt on scripted (run 1")
    assert main([*store, "--resume", "1", "--json"]) == 0  # finished: nothing more is asked
    assert json.loads(capsys.readouterr().out)["turns"] == 4
    # The run list counts turns (a continuation has no total to show as "4/4"), in columns.
    assert main(["--store", str(tmp_path / "runs.sqlite"), "runs"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert row.split()[:4] == ["1", "document", "finished", "4"] and "4 turns" in row
    assert row.index("finished") == header.index("status")


def test_the_cli_refuses_best_of_n_for_a_base_victim(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(models_pkg, "load", lambda name, **_: base_victim(), raising=False)
    book = tmp_path / "book.txt"
    book.write_text(BOOK, encoding="utf-8")
    argv = ["--store", str(tmp_path / "r.sqlite"), "document", str(book), "--mode", "continue"]
    assert main([*argv, "--victim", "scripted", "--best-of-n", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memprobe: error: --best-of-n 2: scripted has no chat template")
    assert len(err.strip().splitlines()) == 1


def test_the_cli_refuses_a_document_too_short_for_phase1(tmp_path, scripted_victim, capsys):
    short = tmp_path / "s.txt"
    short.write_text("a short text of a few words", encoding="utf-8")
    argv = ["--store", str(tmp_path / "r.sqlite"), "document", str(short), "--mode", "continue"]
    assert main([*argv, "--victim", "scripted"]) == 2
    err = capsys.readouterr().err
    assert "words" in err and len(err.strip().splitlines()) == 1
