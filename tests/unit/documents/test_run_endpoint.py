"""A run remembers where it was sent, and a server's answers are held to their budget: a
continuation against a real HTTP endpoint (tests/helpers/openai_server.py) whose server dies is
resumed at that endpoint, never at the default one; --switch-endpoint sends it elsewhere and the
run records the switch; a server that ignores max_tokens has its answers cut and counted, and
the store grows by about the budget."""

from __future__ import annotations

import json
import sqlite3

import pytest

import memprobe_core.models.openai.generator as openai_generator
from memprobe_core.cli import main
from memprobe_core.documents import continuation_run as cr
from memprobe_core.documents.continuation import ContinuationOptions, run_continuation
from memprobe_core.models.base import Completion
from memprobe_core.models.endpoints import EndpointMismatch
from memprobe_core.models.openai.generator import OpenAIGenerator
from memprobe_core.models.scripted import ScriptedGenerator
from memprobe_core.models.token_budget import (
    BYTES_PER_TOKEN_CUT,
    bounded_answer,
    cut_to_budget,
    estimate_tokens,
)
from memprobe_core.store import Store
from tests.helpers.openai_server import serve
from tests.unit.documents.test_continuation import BOOK, chat_victim

KEY = "sk-test-endpoint-0123456789abcdef"  # the key: never stored


@pytest.fixture
def default_endpoint(monkeypatch):
    """A live server standing in for the default endpoint (api.openai.com): a stored run that
    fell back to the default would be answered here, and ``hits`` would show it."""
    with serve(chat_victim(), model_name="served-model") as fallback:
        monkeypatch.setattr(openai_generator, "DEFAULT_BASE_URL", fallback.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        yield fallback


def _document(tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(BOOK, encoding="utf-8")
    return str(book)


def _cli(tmp_path, *argv):
    return main(["--store", str(tmp_path / "runs.sqlite"), "document", *argv])


def test_a_resume_goes_to_the_recorded_endpoint_never_the_default(
    tmp_path, default_endpoint, capsys
):
    store_path = tmp_path / "runs.sqlite"
    start = [_document(tmp_path), "--mode", "continue", "--victim", "served-model"]
    with serve(chat_victim(), model_name="served-model", die_after=2) as a:
        code = _cli(tmp_path, *start, "--backend", "openai", "--base-url", a.base_url)
        assert code == 3  # the server died after two answers
        capsys.readouterr()
        assert len(Store(store_path).units(1)) == 2
        # Resumed as the printed hint says: to A (down: a model error naming A), nowhere else.
        assert _cli(tmp_path, "--resume", "1") == 3
        err = capsys.readouterr().err
        assert a.base_url in err and "cannot connect" in err
    assert default_endpoint.hits == []
    run = Store(store_path).get_run(1)
    assert run["config"]["endpoint"] == {
        "backend": "openai",
        "model": "served-model",
        "base_url": a.base_url,
    }
    assert KEY not in store_path.read_bytes().decode("utf-8", "replace")


def test_a_resume_switches_endpoint_only_when_asked_and_records_it(
    tmp_path, default_endpoint, capsys
):
    start = [_document(tmp_path), "--mode", "continue", "--victim", "served-model"]
    with serve(chat_victim(), model_name="served-model", die_after=2) as a:
        assert _cli(tmp_path, *start, "--backend", "openai", "--base-url", a.base_url) == 3
    with serve(chat_victim(), model_name="served-model") as b:
        capsys.readouterr()
        # --base-url alone is refused: the run goes on where it was started.
        assert _cli(tmp_path, "--resume", "1", "--base-url", b.base_url) == 2
        err = capsys.readouterr().err
        assert "--switch-endpoint" in err and len(err.strip().splitlines()) == 1
        assert _cli(tmp_path, "--switch-endpoint", "--base-url", b.base_url, _document(tmp_path))
        capsys.readouterr()
        assert b.hits == []
        # Asked for on purpose: B is asked, and the run records the switch.
        code = _cli(
            tmp_path, "--resume", "1", "--switch-endpoint", "--base-url", b.base_url, "--json"
        )
        out = capsys.readouterr()
        assert code == 0 and b.hits
        assert f"switched from model 'served-model' at {a.base_url}" in out.err
        assert json.loads(out.out)["turns"] > 2
    assert _cli(tmp_path, "--show", "1") == 0  # names where the run is sent now
    assert f"sent to model 'served-model' at {b.base_url} (openai)" in capsys.readouterr().out
    config = Store(tmp_path / "runs.sqlite").get_run(1)["config"]
    assert config["endpoint"]["base_url"] == b.base_url
    assert config["models"]["load_options"]["base_url"] == b.base_url
    (switch,) = config["endpoint_switches"]
    assert switch["from"]["base_url"] == a.base_url and switch["to"]["base_url"] == b.base_url
    assert switch["at"] > 0
    assert default_endpoint.hits == []
    assert KEY not in (tmp_path / "runs.sqlite").read_bytes().decode("utf-8", "replace")


def test_a_run_stored_before_endpoints_were_recorded_resumes_at_its_manifest_s(
    tmp_path, default_endpoint, capsys
):
    start = [_document(tmp_path), "--mode", "continue", "--victim", "served-model"]
    with serve(chat_victim(), model_name="served-model", die_after=2) as a:
        assert _cli(tmp_path, *start, "--backend", "openai", "--base-url", a.base_url) == 3
    store = Store(tmp_path / "runs.sqlite")
    config = store.get_run(1)["config"]
    old = {k: v for k, v in config.items() if k not in ("endpoint", "models")}
    old["victim"] = f"served-model @ {a.base_url}"  # as the Document page named it then
    store.update_run(1, config=old)
    assert _cli(tmp_path, "--resume", "1") == 3
    assert a.base_url in capsys.readouterr().err
    assert default_endpoint.hits == []


def test_the_library_refuses_a_victim_of_another_endpoint_before_asking_it(tmp_path):
    store = Store(tmp_path / "runs.sqlite")
    run_id = cr.start_continuation(store, BOOK, chat_victim(), name="b", victim_name="scripted")
    other = ScriptedGenerator(chat_template=True, model_id="other-model")
    before = store.get_run(run_id)
    with pytest.raises(EndpointMismatch, match="run 1's document was sent to model 'fake:script'"):
        cr.run_continuation_stored(store, run_id, other)
    assert other.calls == [] and store.get_run(run_id) == before  # not even claimed


def test_a_continuation_is_not_called_an_extraction_map(tmp_path, capsys):
    store = Store(tmp_path / "runs.sqlite")
    cr.start_continuation(store, BOOK, chat_victim(), name="b", victim_name="scripted")
    assert main(["--store", str(tmp_path / "runs.sqlite"), "report", "1"]) == 2
    err = capsys.readouterr().err
    assert "run 1 is a document's continuation;" in err and "extraction map" not in err


# --- budgets that hold against the server -------------------------------------------------------


def test_an_answer_is_cut_to_its_budget_and_counted_by_what_it_holds():
    text = "word " * 1000
    kept, cut = cut_to_budget(text, 10)
    assert cut and kept.split() == ["word"] * 10
    wide = "x" * 10_000  # one "word" of 10,000 bytes
    kept, cut = cut_to_budget(wide, 10)
    assert cut and len(kept.encode()) == BYTES_PER_TOKEN_CUT * 10
    # A multi-byte character is never split.
    kept, _ = cut_to_budget("é" * 1000, 10)
    assert kept == "é" * 40
    # Counted as the largest of the server's figure, the words and bytes / 4, at most the budget.
    assert bounded_answer("a b c", 1, 10) == ("a b c", 3, False)
    assert bounded_answer("x" * 40, 2, 512) == ("x" * 40, 10, False)
    assert bounded_answer("a b", 7, 10) == ("a b", 7, False)
    assert bounded_answer(text, 2, 10)[1:] == (10, True)
    assert estimate_tokens("") == 0
    assert cut_to_budget("x" * 1000, 1) == ("x" * 64, True)  # a small budget keeps 64 bytes


def test_a_continuation_cuts_and_counts_with_the_victim_s_tokenizer():
    def ignores_budget(ask):
        return Completion(" ".join(["word"] * 5000), 1, "stop")  # and under-reports

    victim = ScriptedGenerator(ignores_budget, chat_template=True)  # a whitespace tokenizer
    options = ContinuationOptions(
        opening_words=5, heldback_words=5, phase1_threshold=0.2, turn_tokens=30, max_tokens=70
    )
    result = run_continuation(victim, "word " * 20, options)
    assert [t.tokens for t in result.turns] == [30, 30, 10]
    assert [len(t.output.split()) for t in result.turns] == [30, 30, 10]
    assert result.stop_reason == "token_budget"


def _ignores_max_tokens(words: int):
    """A chat victim that answers the book's next ``words`` words whatever it is asked for,
    reporting 512 tokens (what the hostile server's usage said)."""
    knows = chat_victim()

    def answer(ask):
        text = knows._script(ask)  # the next words of the book
        return Completion((text + " ") * (words // max(len(text.split()), 1)), 512, "stop")

    return ScriptedGenerator(answer, chat_template=True)


def test_a_server_that_ignores_max_tokens_is_held_to_the_budget(tmp_path, capsys):
    huge_words = 400_000  # about 2.7 MB an answer, under the backend's 8 MiB cap
    store_path = tmp_path / "runs.sqlite"
    with serve(_ignores_max_tokens(huge_words), model_name="served-model") as server:
        base = [
            _document(tmp_path),
            "--mode",
            "continue",
            "--victim",
            "served-model",
            "--backend",
            "openai",
            "--base-url",
            server.base_url,
            "--json",
        ]
        assert _cli(tmp_path, *base, "--turn-tokens", "64", "--max-tokens", "200") == 0
        tokens_run = json.loads(capsys.readouterr().out)
        size_after_one = sum(p.stat().st_size for p in tmp_path.glob("runs.sqlite*"))
        assert _cli(tmp_path, *base, "--turn-tokens", "64", "--max-turns", "2") == 0
        turns_run = json.loads(capsys.readouterr().out)
        asked = [hit["payload"]["max_tokens"] for hit in server.hits]
    # The token budget trips: 64 + 64 + 64 + 8 tokens, each answer cut to what was asked.
    assert tokens_run["stop_reason"] == "token_budget"
    assert asked[:4] == [64, 64, 64, 8]
    stored = cr.read_continuation(Store(store_path), 1)
    assert [t.tokens for t in stored.turns] == [64, 64, 64, 8]
    assert all(t.finish_reason == "length" for t in stored.turns)
    assert all(len(t.output.split()) <= 64 for t in stored.turns)
    # The turn budget trips too (phase 1, then two turns).
    assert turns_run["stop_reason"] == "turn_budget"
    # Stored once and cut: the store holds about the budget, not 4 answers of 2.7 MB each.
    assert size_after_one < 400_000
    with sqlite3.connect(store_path) as db:
        copies = db.execute(
            "SELECT (SELECT COUNT(*) FROM samples WHERE run_id = 1 AND text != ''), "
            "(SELECT COUNT(*) FROM units WHERE run_id = 1 AND output != '')"
        ).fetchone()
    assert copies == (0, 0)  # the answer is in the unit's turn only


def test_the_openai_backend_cuts_an_answer_to_max_tokens_and_counts_it():
    with serve(_ignores_max_tokens(5_000), model_name="m") as server:
        model = OpenAIGenerator("m", base_url=server.base_url, api_key_env="")
        [[answer]] = model.generate([[{"role": "user", "content": "go on"}]], max_new_tokens=16)
        model.close()
    assert server.hits[0]["payload"]["max_tokens"] == 16
    assert answer.finish_reason == "length" and answer.num_tokens == 16
    assert len(answer.text.split()) == 16


def test_a_resume_may_read_the_key_from_another_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OLD_KEY", "sk-old-0000000000000000")
    monkeypatch.setenv("NEW_KEY", KEY)
    with serve(chat_victim(), model_name="served-model", api_key=KEY) as server:
        victim = OpenAIGenerator("served-model", base_url=server.base_url, api_key_env="OLD_KEY")
        names = {"victim": "served-model", "backend": "openai"}
        names["load_options"] = {"base_url": server.base_url, "api_key_env": "OLD_KEY"}
        store = Store(tmp_path / "runs.sqlite")
        cr.start_continuation(store, BOOK, victim, name="b", victim_name="v", models=names)
        assert _cli(tmp_path, "--resume", "1", "--api-key-env", "NEW_KEY", "--json") == 0
        assert {hit["auth"] for hit in server.hits} == {f"Bearer {KEY}"}
    assert json.loads(capsys.readouterr().out)["turns"] > 1
    assert KEY not in (tmp_path / "runs.sqlite").read_bytes().decode("utf-8", "replace")
