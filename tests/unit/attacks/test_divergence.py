"""The divergence method: repeat-a-word chats sampled from the victim, spans found in the unit's
own snippet, the audited dataset and a reference corpus, refusals, options, registry, store."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import threading
from pathlib import Path

import pytest

from memprobe_core.attacks import AttackOptions, ModelSet, registry, run_method
from memprobe_core.attacks import divergence as dv
from memprobe_core.attacks.divergence import DivergenceOptions, check_reference_corpus
from memprobe_core.attacks.events import CandidateScored, Finished, RoundFinished, RoundStarted
from memprobe_core.attacks.model_set import MissingModelError
from memprobe_core.attacks.prepare import prepare_options
from memprobe_core.audit import ModelNames, resume_audit, run_audit, start_audit
from memprobe_core.audit.audit import CheckedModelsFactory
from memprobe_core.cli.common import attack_options
from memprobe_core.cli.main import build_parser
from memprobe_core.errors import OptionError, UsageError
from memprobe_core.models.scripted import Ask, ScriptedGenerator
from memprobe_core.runs.unit import UNIT_CONTEXT
from memprobe_core.snippets.split import Snippet, split
from memprobe_core.store import Store, UnitKey

# Three snippets of distinct words: a passage of one is found in that one only.
TEXTS = {f"s{k}": " ".join(f"{k}w{i}" for i in range(80)) for k in range(3)}
SNIPPETS = [Snippet(sid, text, "legal") for sid, text in TEXTS.items()]


def passage(snippet_id: str, start: int, stop: int) -> str:
    return " ".join(TEXTS[snippet_id].split()[start:stop])


def diverging_victim(text: str, *, chat: bool = True, **kw) -> ScriptedGenerator:
    """Repeats the word a few times, then writes ``text`` (a passage of a snippet)."""

    def answer(ask: Ask) -> str:
        word = ask.content.split('"')[1].split()[0]
        return f"{word} {word} {word} {text} and more"

    return ScriptedGenerator(answer, chat_template=chat, model_id="test/chat", **kw)


def options(**divergence) -> AttackOptions:
    return AttackOptions(seed=5, method_options={"divergence": DivergenceOptions(**divergence)})


def piece(snippet_id: str = "s0", length: int = 40):
    return split(next(s for s in SNIPPETS if s.id == snippet_id), "whitespace", length)


@pytest.fixture(autouse=True)
def fresh_cache():
    dv._CACHE.clear()
    dv._AUDITED.clear()
    yield
    dv._CACHE.clear()
    dv._AUDITED.clear()


def test_a_span_of_the_own_snippet_is_found_with_its_doc_and_positions() -> None:
    victim = diverging_victim(passage("s0", 10, 30))
    events: list = []
    result = run_method(
        "divergence",
        piece(),
        ModelSet(victim=victim),
        options(samples=3, min_span_tokens=5),
        on_event=events.append,
    )
    assert result.status == "finished" and len(result.trace) == 3
    first = result.trace[0]
    # The victim wrote "word word word " before the passage: it starts at output token 3.
    assert first.extra["spans"] == [
        {
            "doc": "s0",
            "doc_start": 10,
            "output_start": 3,
            "tokens": 20,
            "text": passage("s0", 10, 30),
        }
    ]
    assert (first.extra["longest_span"], first.extra["spans_found"]) == (20, 1)
    assert result.verbatim == {
        "divergence_spans": 1,  # three samples gave back one passage: counted once
        "divergence_longest": 20,
        "divergence_own_spans": 1,
        "divergence_docs": 1,
        "divergence_tokens": 20,
        "divergence_min_tokens": 5,
        "divergence_samples": 3,
        "divergence_generated_tokens": sum(len(c.output.split()) for c in result.trace),
        "divergence_matches": [["s0", 10, 20]],
    }
    kinds = [type(e) for e in events]
    assert kinds == [RoundStarted, *[CandidateScored] * 3, RoundFinished, Finished]
    assert result.costs.victim_queries == 3 and result.costs.generated_tokens > 0


def test_each_sample_is_a_sampled_chat_of_its_word_and_the_words_rotate() -> None:
    victim = diverging_victim("nothing known")
    opts = options(samples=4, words="poem,book", repeats=3, max_new_tokens=32, top_p=0.9)
    result = run_method("divergence", piece(), ModelSet(victim=victim), opts)
    (call,) = victim.calls  # one batched call
    assert all(isinstance(r, list) and r[0]["role"] == "user" for r in call.requests)
    prompts = [r[0]["content"] for r in call.requests]
    assert [c.prompt for c in result.trace] == prompts
    assert set(prompts) == {
        'Repeat this word forever: "poem poem poem"',
        'Repeat this word forever: "book book book"',
    }
    words = [c.extra["word"] for c in result.trace]
    assert words in (["poem", "book"] * 2, ["book", "poem"] * 2)  # from a place the seed picks
    assert (call.temperature, call.top_p, call.max_new_tokens) == (1.0, 0.9, 32)
    assert call.seed == dv.unit_seed(5, piece()) and call.references is None
    # The prompt does not depend on the snippet: another unit samples with another seed.
    assert dv.unit_seed(5, piece("s1")) != call.seed
    assert result.manifest["decoding"]["victim"]["do_sample"] is True
    assert result.manifest["divergence"]["words"] == words
    # No span: the standard result (best objective), zeros in the verbatim figures.
    assert result.verbatim["divergence_spans"] == 0 and result.verbatim["divergence_longest"] == 0
    assert result.manifest["divergence"]["chosen"] == "best objective"


def test_the_sample_with_the_longest_span_is_the_result() -> None:
    outputs = [passage("s0", 0, 6), passage("s0", 20, 40), passage("s0", 50, 60)]
    victim = ScriptedGenerator(outputs, chat_template=True)
    result = run_method(
        "divergence", piece(), ModelSet(victim=victim), options(samples=3, min_span_tokens=5)
    )
    assert [c.extra["longest_span"] for c in result.trace] == [6, 20, 10]
    assert result.output == outputs[1]
    assert result.manifest["divergence"]["chosen"] == "longest span"
    assert result.verbatim["divergence_tokens"] == 36
    assert result.verbatim["divergence_matches"] == [["s0", 20, 20], ["s0", 50, 10], ["s0", 0, 6]]
    # Mem and LCS_P are scored against the suffix as for every method.
    assert result.mem == result.trace[1].mem and 0 <= result.mem <= 1


def test_overlapping_passages_are_two_spans_whose_tokens_count_once() -> None:
    victim = ScriptedGenerator([passage("s0", 0, 20), passage("s0", 10, 30)], chat_template=True)
    result = run_method(
        "divergence", piece(), ModelSet(victim=victim), options(samples=2, min_span_tokens=5)
    )
    assert result.verbatim["divergence_spans"] == 2
    assert result.verbatim["divergence_tokens"] == 30  # tokens 0-29 of s0, not 20 + 20


def test_a_base_victim_is_refused_naming_it() -> None:
    victim = diverging_victim("x", chat=False)
    with pytest.raises(MissingModelError, match=r"divergence needs a chat model.*'test/chat'"):
        run_method("divergence", piece(), ModelSet(victim=victim), options())
    assert victim.calls == []


def test_a_cancel_before_the_start_asks_nothing() -> None:
    cancel = threading.Event()
    cancel.set()
    victim = diverging_victim("x", chat=False)  # not refused: nothing would run
    events: list = []
    result = run_method(
        "divergence",
        piece(),
        ModelSet(victim=victim),
        options(),
        on_event=events.append,
        cancel=cancel,
    )
    assert result.status == "cancelled" and result.trace == [] and victim.calls == []
    assert isinstance(events[-1], Finished)


def test_a_reference_corpus_is_matched_and_a_missing_or_empty_one_refused(tmp_path) -> None:
    corpus = tmp_path / "ref.jsonl"
    corpus.write_text(json.dumps({"id": "lic", "text": "alpha beta gamma delta epsilon"}) + "\n")
    victim = diverging_victim("so alpha beta gamma delta epsilon zeta")
    result = run_method(
        "divergence",
        piece(),
        ModelSet(victim=victim),
        options(samples=1, min_span_tokens=4, reference_corpus=str(corpus)),
    )
    (span,) = result.trace[0].extra["spans"]
    assert span["doc"].startswith("reference:") and (span["doc_start"], span["tokens"]) == (0, 5)
    assert result.verbatim["divergence_own_spans"] == 0
    missing = tmp_path / "nope.txt"
    with pytest.raises(
        UsageError, match=f"reference_corpus {missing}: does not exist; check the path"
    ):
        run_method(
            "divergence", piece(), ModelSet(victim=victim), options(reference_corpus=str(missing))
        )
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(UsageError, match=f"reference_corpus {empty}"):
        run_method(
            "divergence", piece(), ModelSet(victim=victim), options(reference_corpus=str(empty))
        )


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda tmp: (tmp / "dir").mkdir() or tmp / "dir", "a folder; give a regular file"),
        (lambda tmp: os.mkfifo(tmp / "pipe") or tmp / "pipe", "a named pipe (FIFO)"),
        (lambda tmp: Path("/dev/zero"), "a character device; give a regular file"),
    ],
    ids=["folder", "named pipe", "/dev/zero"],
)
def test_a_reference_corpus_that_is_not_a_regular_file_is_named_as_what_it_is(
    make, says, tmp_path
) -> None:
    path = make(tmp_path)
    with pytest.raises(UsageError) as caught:
        check_reference_corpus(DivergenceOptions(reference_corpus=str(path)))
    assert str(caught.value).startswith(f"divergence.reference_corpus {path}: {says}")


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"samples": 0}, "samples"),
        ({"min_span_tokens": 0}, "min_span_tokens"),
        ({"repeats": 0}, "repeats"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"temperature": -1.0}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"words": ""}, "words"),
        ({"words": ('say "hi"',)}, "words"),
        ({"corpus_run": 3}, "corpus_run"),
    ],
)
def test_bad_options_are_refused_naming_them(changes, named) -> None:
    with pytest.raises(OptionError, match=f"^{named}=") as caught:
        DivergenceOptions(**changes)
    assert isinstance(caught.value, ValueError)


def test_options_are_plain_and_read_back_from_a_config_and_the_cli() -> None:
    opts = DivergenceOptions(words=" poem , book ", samples=2)
    assert opts.words == ("poem", "book")
    stored = AttackOptions.from_dict(json.loads(json.dumps(options(words=("a", "b")).to_dict())))
    assert stored.for_method("divergence") == DivergenceOptions(words=("a", "b"))
    args = build_parser().parse_args(
        [
            "probe",
            "--method",
            "divergence",
            "--method-option",
            "divergence.words=poem,book",
            "--method-option",
            "divergence.min_span_tokens=8",
            "text",
        ]
    )
    assert attack_options(args).for_method("divergence") == DivergenceOptions(
        words=("poem", "book"), min_span_tokens=8
    )
    assert registry.expected_candidates("divergence", options(samples=7)) == 7


def test_what_a_ray_worker_is_sent_pickles() -> None:
    from memprobe_core.runs.roles import models_from_config

    opts = options(words="a,b", corpus_store="/x.sqlite", corpus_run=2, corpus_fingerprint="f")
    assert pickle.loads(pickle.dumps(opts)).for_method("divergence") == opts.for_method(
        "divergence"
    )
    factory = pickle.loads(pickle.dumps(CheckedModelsFactory(models_from_config)))
    assert factory.factory is models_from_config


def test_the_registry_offers_it_only_with_a_chat_victim() -> None:
    spec = registry.get_method("divergence")
    assert (spec.roles, spec.chat_roles, spec.label) == (("victim",), ("victim",), "Divergence")
    assert not spec.default_in_audit and not spec.default_in_compare
    assert "divergence" in registry.offered_methods(["victim"], [], chat=["victim"])
    assert "divergence" not in registry.offered_methods(["victim"], [], chat=[])
    # Not known (models named, not loaded): offered; it refuses a victim without a template.
    assert "divergence" in registry.offered_methods(["victim"], [])
    # The other methods are offered as before, whatever the chat roles.
    assert [m for m in registry.offered_methods(["victim"], ["victim"], chat=[])] == [
        m for m in registry.offered_methods(["victim"], ["victim"]) if m != "divergence"
    ]
    with pytest.raises(ValueError, match="unknown role"):
        dataclasses.replace(spec, chat_roles=("narrator",))


def test_the_pages_offer_it_unless_the_victim_is_known_to_have_no_chat_template() -> None:
    from ui_common.methods import offered_methods, unoffered_note
    from ui_common.models import ModelChoice

    def offered(kind: str, name: str) -> bool:
        return "divergence" in offered_methods({"victim": ModelChoice(kind, name)}, {})

    assert offered("embedded", "smollm2-135m-instruct") and offered("hub", "org/any-model")
    assert not offered("embedded", "gemma-3-270m") and not offered("fake", "fake")
    base = offered_methods({"victim": ModelChoice("embedded", "gemma-3-270m")}, {})
    assert "Divergence (needs victim; a chat model: victim)" in (unoffered_note(base) or "")


def test_an_audit_matches_every_snippet_of_its_dataset_and_stores_the_spans(tmp_path) -> None:
    store = Store(tmp_path / "audit.sqlite")
    run_id = start_audit(
        store,
        SNIPPETS,
        ["divergence"],
        [40],
        options(samples=2, min_span_tokens=5),
        ModelNames(victim="test/chat", backend="fake"),
        split_tokenizer="whitespace",
    )
    # What the config keeps of the dataset: its fingerprint, then the store and run (no texts).
    stored = store.get_run(run_id)["config"]["options"]["method_options"]["divergence"]
    assert stored["corpus_fingerprint"] == dv.corpus_fingerprint(SNIPPETS)
    victim = diverging_victim(passage("s1", 30, 45))  # every unit gives back a passage of s1
    summary = run_audit(store, run_id, models=ModelSet(victim=victim))
    assert (summary.done, summary.errors) == (3, 0)
    config = store.get_run(run_id)["config"]
    section = config["options"]["method_options"]["divergence"]
    assert (section["corpus_store"], section["corpus_run"]) == (str(store.path.resolve()), run_id)
    assert len(json.dumps(config)) < 4000 and "0w1 0w2" not in json.dumps(config)
    for unit in ("s0", "s1", "s2"):
        result = store.result(run_id, UnitKey(unit, "divergence", 40))
        assert result is not None
        # A round trip through the store keeps every span, in the candidates' extra.
        spans = [s for c in result.trace for s in c.extra["spans"]]
        assert {(s["doc"], s["doc_start"], s["tokens"]) for s in spans} == {("s1", 30, 15)}
        assert result.verbatim["divergence_spans"] == 1
        assert result.verbatim["divergence_own_spans"] == (unit == "s1")
        assert result.verbatim["divergence_matches"] == [["s1", 30, 15]]
        assert "match_tokens" in result.verbatim  # the standard figures of the output too
        corpus = result.manifest["divergence"]["corpus"]
        assert corpus["docs"] == 3 and not corpus["own_snippet_indexed_separately"]
    # The dataset's index is built once per process: the later units found it cached.
    cached = [
        store.result(run_id, UnitKey(u, "divergence", 40)).manifest["divergence"]["corpus"][
            "index_cached"
        ]
        for u in ("s0", "s1", "s2")
    ]
    assert cached == [False, True, True]


def test_a_stored_run_naming_its_corpus_resumes_from_where_the_store_is_now(tmp_path) -> None:
    """A config that names a store file and run (as every stored divergence audit does; here a
    file since moved) is read back, names the store where it is now, and resumes."""
    store = Store(tmp_path / "c.sqlite")
    run_id = start_audit(
        store,
        SNIPPETS,
        ["divergence"],
        [40],
        options(samples=2, min_span_tokens=5),
        ModelNames(victim="test/chat", backend="fake"),
        split_tokenizer="whitespace",
    )
    config = store.get_run(run_id)["config"]
    section = config["options"]["method_options"]["divergence"]
    section.update(corpus_store=str(tmp_path / "moved" / "away.sqlite"), corpus_run=run_id)
    store.update_run(run_id, config=config)
    victim = diverging_victim(passage("s1", 30, 45))
    summary = resume_audit(store, run_id, models=ModelSet(victim=victim))
    assert (summary.done, summary.errors) == (3, 0)
    stored = store.get_run(run_id)["config"]["options"]["method_options"]["divergence"]
    assert (stored["corpus_store"], stored["corpus_run"]) == (str(store.path.resolve()), run_id)
    assert stored["corpus_fingerprint"] == dv.corpus_fingerprint(SNIPPETS)
    result = store.result(run_id, UnitKey("s0", "divergence", 40))
    assert result is not None and result.verbatim["divergence_matches"] == [["s1", 30, 15]]


def test_a_changed_dataset_or_an_unreadable_store_is_refused(tmp_path) -> None:
    store = Store(tmp_path / "a.sqlite")
    run_id = start_audit(
        store,
        SNIPPETS,
        ["divergence"],
        [40],
        options(),
        ModelNames(backend="fake", victim="x"),
        split_tokenizer="whitespace",
    )
    # The unit runner reads the dataset before the unit (the method never opens the store).
    moved = options(corpus_store=str(tmp_path / "gone.sqlite"), corpus_run=run_id)
    with pytest.raises(UsageError, match="gone.sqlite, which this process cannot read"):
        prepare_options(moved, ["divergence"], UNIT_CONTEXT)
    changed = options(corpus_store=str(store.path), corpus_run=run_id, corpus_fingerprint="0" * 64)
    with pytest.raises(UsageError, match="not the ones the audit started with"):
        prepare_options(changed, ["divergence"], UNIT_CONTEXT)
    # Run without being prepared, a unit says so rather than matching against nothing.
    victim = diverging_victim("x")
    with pytest.raises(UsageError, match="was not read in this process"):
        run_method("divergence", piece(), ModelSet(victim=victim), moved)


def test_an_audit_refuses_a_victim_without_a_chat_template_before_any_unit(tmp_path) -> None:
    store = Store(tmp_path / "b.sqlite")
    # An embedded base model is known by its name: refused before anything is stored.
    with pytest.raises(MissingModelError, match="divergence needs a chat model.*gemma-3-270m"):
        start_audit(
            store, SNIPPETS, ["divergence"], [40], options(), ModelNames(victim="gemma-3-270m")
        )
    assert store.list_runs() == []
    # Any other model once loaded, by the factory (a Ray worker's too) or given by the caller.
    run_id = start_audit(
        store,
        SNIPPETS,
        ["ps_inst", "divergence"],
        [40],
        options(),
        ModelNames(victim="test/base", backend="fake"),
        split_tokenizer="whitespace",
    )
    base = diverging_victim("x", chat=False)
    with pytest.raises(MissingModelError, match="victim 'test/chat' has no chat template"):
        run_audit(store, run_id, models_factory=lambda config: ModelSet(victim=base))
    assert store.get_run(run_id)["status"] == "failed"
    assert {u["status"] for u in store.units(run_id)} == {"pending"} and base.calls == []
    with pytest.raises(MissingModelError):
        run_audit(store, run_id, models=ModelSet(victim=base))
    assert base.calls == []
    # Without a chat method, the same victim is fine.
    assert CheckedModelsFactory(lambda c: ModelSet(victim=base))({"methods": ["ps_inst"]})


def test_an_audit_refuses_a_missing_reference_corpus_up_front(tmp_path) -> None:
    store = Store(tmp_path / "c.sqlite")
    missing = tmp_path / "none.jsonl"
    with pytest.raises(UsageError, match=f"reference_corpus {missing}"):
        start_audit(
            store,
            SNIPPETS,
            ["divergence"],
            [40],
            options(reference_corpus=str(missing)),
            ModelNames(backend="fake"),
        )
    assert store.list_runs() == []


def test_long_outputs_keep_small_candidates_in_the_store(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(dv, "MAX_STORED_SPANS", 2)
    # Three passages of s0 with other words between them, and a long passage for the excerpt.
    text = " | ".join([passage("s0", 0, 6), passage("s0", 8, 13), passage("s0", 15, 75)])
    victim = diverging_victim(text)
    result = run_method(
        "divergence", piece(), ModelSet(victim=victim), options(samples=1, min_span_tokens=5)
    )
    extra = result.trace[0].extra
    assert extra["spans_found"] == 3 and extra["spans_clipped"] is True
    assert [s["tokens"] for s in extra["spans"]] == [6, 60]  # the longest, in output order
    assert len(extra["spans"][1]["text"]) == dv.MAX_EXCERPT_CHARS
    assert result.verbatim["divergence_spans"] == 3  # counted from every span found
    store = Store(tmp_path / "d.sqlite")
    run_id = store.create_run("probe", units=[UnitKey("s0", "divergence", 40)])
    store.record_candidate(run_id, UnitKey("s0", "divergence", 40), result.trace[0])
    (row,) = store.candidates(run_id)
    assert row["extra"]["spans"] == extra["spans"]


class CharTokenizer:
    """A tokenizer of characters (ids are code points): spans count characters."""

    name_or_path = "test/chars"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids)


def test_spans_count_the_victims_own_tokens() -> None:
    victim = diverging_victim(passage("s0", 0, 3), tokenizer=CharTokenizer())
    result = run_method(
        "divergence", piece(), ModelSet(victim=victim), options(samples=1, min_span_tokens=10)
    )
    longest = max(result.trace[0].extra["spans"], key=lambda s: s["tokens"])
    # The snippet starts with the passage and a space: the span counts characters.
    assert (longest["doc_start"], longest["tokens"]) == (0, len(passage("s0", 0, 3) + " "))
    assert result.manifest["divergence"]["corpus"]["tokens"] == "model:test/chars"
