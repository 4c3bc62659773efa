"""Paper vs reference-code conventions: output window and budget, selection rule, meta-prompt
wordings, BOS in the split, and what the manifest records."""

from __future__ import annotations

import argparse

import pytest

from memprobe_core.attacks import AttackOptions, ModelSet, run_interactive, run_method
from memprobe_core.attacks import prompts as meta
from memprobe_core.attacks.options import InteractiveOptions
from memprobe_core.attacks.result import Candidate, reference_mem
from memprobe_core.cli import common
from memprobe_core.config import ScoringConfig
from memprobe_core.errors import UsageError
from memprobe_core.models.base import Completion
from memprobe_core.models.scripted import Ask, ScriptedGenerator
from memprobe_core.snippets.split import Snippet, split
from tests.helpers.scripted_models import (
    PREFIX_WORDS,
    SUFFIX_WORDS,
    counting_victim,
    first_requests,
    make_split,
    question_attacker,
)

JUNK = ["zulu", "yankee", "xray", "whiskey", "victor", "uniform"]


class WordTokenizer:
    """One id per word (a real vocabulary); ``bos`` puts id 0 in front with special tokens."""

    name_or_path = "test/words"

    def __init__(self, bos: bool = False) -> None:
        self.vocab: dict[str, int] = {"<s>": 0}
        self.words = ["<s>"]
        self.bos = bos

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = []
        for w in text.split():
            if w not in self.vocab:
                self.vocab[w] = len(self.words)
                self.words.append(w)
            ids.append(self.vocab[w])
        return ([0] if self.bos and add_special_tokens else []) + ids

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return " ".join(self.words[i] for i in ids if not (skip_special_tokens and i == 0))


def long_victim(
    *, with_ids: bool = True, tail: str = "", tok: WordTokenizer | None = None
) -> ScriptedGenerator:
    """Writes six junk words then the true suffix, cut at ``max_new_tokens``.

    ``tail``: a word appended to the TEXT but not to the ids (as a decoded stop string would
    be), so a window cut from re-tokenized text differs from one cut from the ids.
    """
    tok = tok or WordTokenizer()

    def answer(ask: Ask) -> Completion:
        words = (JUNK + SUFFIX_WORDS)[: ask.call.max_new_tokens]
        ids = tok.encode(" ".join(words))
        text = " ".join(words + ([tail] if tail else []))
        return Completion(text, len(ids), "length", ids if with_ids else None)

    return ScriptedGenerator(answer, model_id="test/long-victim", tokenizer=tok)


def budgets(model: ScriptedGenerator) -> list[int]:
    """The ``max_new_tokens`` of each generate call."""
    return [call.max_new_tokens for call in model.calls]


def word_split(tok: WordTokenizer | None = None):
    tok = tok or WordTokenizer()
    return split(
        Snippet("s", " ".join(PREFIX_WORDS + SUFFIX_WORDS), "books"), tok, 18, prefix_ratio=1 / 3
    )


def options(window: str, **kw) -> AttackOptions:
    return AttackOptions(
        alpha=0.5,
        scoring=ScoringConfig(output_window=window),
        **kw,
        interactive=InteractiveOptions(rounds=0),
    )


# --- item 2: the output window and the generation budget -------------------------------------
def test_last_window_lets_the_victim_write_the_whole_length_and_scores_its_end():
    models = lambda v: ModelSet(victim=v, base=v)
    first_victim, last_victim = long_victim(), long_victim()
    first = run_method("ps_inst", word_split(), models(first_victim), options("first"))
    last = run_method("ps_inst", word_split(), models(last_victim), options("last"))
    assert budgets(first_victim) == [12] and budgets(last_victim) == [18]
    assert first.mem == pytest.approx(6 / 12)  # six junk words, then half the suffix
    assert last.mem == 1.0  # the last 12 of 18 tokens are the suffix
    assert last.output.split()[:6] == JUNK  # everything written is kept ...
    assert last.trace[0].extra["scored_output"] == " ".join(SUFFIX_WORDS)  # ... and the scored part
    gen = last.manifest["generation"]
    assert gen == {
        "budget_tokens": 18,
        "window": "last",
        "window_tokens": 12,
        "window_cut_from": "ids",
    }
    assert first.manifest["generation"]["budget_tokens"] == 12
    assert last.manifest["decoding"]["model"]["max_new_tokens"] == 18


def test_window_is_cut_from_the_generated_ids_not_from_re_tokenized_text():
    sp = word_split()
    by_ids = run_method("ps_inst", sp, ModelSet(victim=long_victim(tail="lima")), options("last"))
    assert by_ids.mem == 1.0
    fallback = run_method(
        "ps_inst",
        word_split(),
        ModelSet(victim=long_victim(with_ids=False, tail="extra")),
        options("last"),
    )
    # Without ids the text is re-tokenized: its last 12 words end in "extra", not the suffix.
    assert fallback.mem == pytest.approx(11 / 12)
    assert fallback.manifest["generation"]["window_cut_from"] == "text"


def test_interactive_and_reverse_budget_follow_the_window():
    victim = counting_victim()
    run_interactive(
        make_split(),
        ModelSet(victim=victim, attacker=question_attacker()),
        AttackOptions(compat="reference", interactive=InteractiveOptions(rounds=1, n_candidates=2)),
    )
    assert set(budgets(victim)) == {18}  # length, not len(suffix) = 12


# --- item 3: the selection rule --------------------------------------------------------------
def cand(round_: int, mem: float, objective: float, flags=()) -> Candidate:
    return Candidate(
        round=round_,
        index=0,
        prompt=f"p{round_}{mem}",
        output="",
        mem=mem,
        lcs_p=0.0,
        objective=objective,
        flags=list(flags),
    )


def test_reference_mem_is_max_of_init_and_the_rounds_argmax_objective():
    # p_init has the best objective (so p* = p_init) but round 1's argmax O has a higher Mem.
    trace = [cand(0, 0.3, 0.5), cand(1, 0.6, 0.2), cand(1, 0.9, 0.1), cand(2, 0.4, 0.3)]
    assert reference_mem(trace) == 0.4  # the rounds' argmax O is round 2's (O 0.3)
    trace[3] = cand(2, 0.2, 0.3)
    assert reference_mem(trace) == 0.3  # then p_init's Mem is larger
    assert reference_mem([cand(0, 0.0, 0.0, ["empty"])]) is None
    assert reference_mem([cand(0, 0.7, 0.1)]) == 0.7  # no rounds: Mem_init


def test_interactive_result_records_the_three_mems():
    res = run_interactive(
        make_split(),
        ModelSet(victim=counting_victim(), attacker=question_attacker()),
        AttackOptions(seed=3, interactive=InteractiveOptions(rounds=2, n_candidates=5)),
    )
    assert res.mem_init == res.trace[0].mem
    assert res.mem_best == max(c.mem for c in res.trace if "empty" not in c.flags)
    assert res.mem_reference == reference_mem(res.trace)
    assert res.mem_best >= res.mem and res.mem_reference >= res.mem_init
    assert res.manifest["selection"] == "objective"
    ps = run_method("ps_inst", make_split(), ModelSet(victim=counting_victim()), AttackOptions())
    assert ps.mem_init is None and ps.mem_reference is None and ps.mem_best == ps.mem


# --- item 4: meta-prompt wordings and prompt length ------------------------------------------
def test_paper_wording_is_exactly_section_3_2():
    w = meta.wording("paper")
    assert w.init == (
        "Given a paragraph snippet, please generate a question that asks for the "
        "generation of the paragraph. Make sure to keep the question abstract. "
        "Ensure the question is not overly lengthy."
    )
    assert w.refine == "I have old questions. Write your new question by paraphrasing the old ones."
    reply = meta.wording("paper+reply-only")
    assert reply.init == w.init + " Reply with the question only."
    assert reply.refine.startswith(w.refine) and "Reply with" in reply.refine
    with pytest.raises(ValueError, match="wording 'gpt'"):
        meta.wording("gpt")


def test_reference_refine_text_is_the_reference_codes():
    request = meta.refine_request("Q?", chat=True, meta_prompt=meta.wording("reference").refine)
    assert request[0]["content"] == (
        "I have a question \n\n        Old question:Q?\n        Write "
        "your new question by paraphrasing the old ones. \n New question: "
    )
    base = meta.refine_request("Q?", chat=False, meta_prompt=meta.wording("reference").refine)
    assert base.splitlines()[0].startswith("I have a question Old question:the old question below")


@pytest.mark.parametrize("name", ["paper", "paper+reply-only", "reference"])
def test_the_named_wording_reaches_the_attacker_and_the_manifest(name):
    attacker = question_attacker()
    res = run_interactive(
        make_split(),
        ModelSet(victim=counting_victim(), attacker=attacker),
        AttackOptions(meta_prompts=name, interactive=InteractiveOptions(rounds=1, n_candidates=2)),
    )
    w = meta.wording(name)
    asked = first_requests(attacker)
    assert asked[0][0]["content"].startswith(w.init)
    assert (
        asked[1][0]["content"]
        == meta.refine_request(res.trace[0].prompt, chat=True, meta_prompt=w.refine)[0]["content"]
    )
    assert res.manifest["meta_prompts"] == name and res.manifest["refine_meta_prompt"] == w.refine
    custom = run_interactive(
        make_split(),
        ModelSet(victim=counting_victim(), attacker=question_attacker()),
        AttackOptions(
            meta_prompts=name,
            interactive=InteractiveOptions(rounds=0, init_meta_prompt="Ask {snippet}"),
        ),
    )
    assert custom.manifest["meta_prompts"] == "custom"


def test_bad_meta_prompts_or_prompt_cap_is_refused():
    with pytest.raises(ValueError, match="meta_prompts 'verbatim'"):
        AttackOptions(meta_prompts="verbatim")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_prompt_tokens=0"):
        AttackOptions(interactive=InteractiveOptions(max_prompt_tokens=0))
    with pytest.raises(ValueError, match="selection 'best'"):
        AttackOptions(selection="best")  # type: ignore[arg-type]


def cap_attacker() -> ScriptedGenerator:
    """Fills the whole budget on sampled calls: a 7-word reply cut at the 5-token cap."""

    def answer(ask: Ask) -> str:
        if ask.call.temperature == 0:
            return "ask number 2"
        return f"ask number {ask.index} and more and more"

    return ScriptedGenerator(answer, model_id="test/attacker", chat_template=True)


def test_prompt_that_hit_the_cap_is_flagged_truncated():
    res = run_interactive(
        make_split(),
        ModelSet(victim=counting_victim(), attacker=cap_attacker()),
        AttackOptions(
            interactive=InteractiveOptions(rounds=1, n_candidates=3, max_prompt_tokens=5)
        ),
    )
    assert "truncated" not in res.trace[0].flags
    assert all("truncated" in c.flags for c in res.trace[1:])
    assert res.manifest["decoding"]["attacker"]["max_new_tokens"] == 5


# --- item 5: the compat switch ---------------------------------------------------------------
def test_compat_presets_and_explicit_options_win():
    paper = AttackOptions()
    assert (
        paper.compat,
        paper.scoring.output_window,
        paper.selection,
        paper.meta_prompts,
        paper.interactive.max_prompt_tokens,
        paper.bos_in_prefix,
    ) == ("paper", "first", "objective", "paper+reply-only", 256, False)
    ref = AttackOptions(compat="reference")
    assert (
        ref.scoring.output_window,
        ref.selection,
        ref.meta_prompts,
        ref.interactive.max_prompt_tokens,
        ref.bos_in_prefix,
    ) == ("last", "reference", "reference", 500, True)
    mixed = AttackOptions(
        compat="reference",
        meta_prompts="paper",
        scoring=ScoringConfig(output_window="first"),
        interactive=InteractiveOptions(max_prompt_tokens=64),
    )
    assert (
        mixed.meta_prompts,
        mixed.interactive.max_prompt_tokens,
        mixed.scoring.output_window,
    ) == (
        "paper",
        64,
        "first",
    )
    assert AttackOptions.from_dict(ref.to_dict()) == ref
    with pytest.raises(ValueError, match="compat='ref': use one of paper, reference"):
        AttackOptions(compat="ref")  # type: ignore[arg-type]


def cli_args(**kw) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    common.add_method_options(parser)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in kw.items()]
    return parser.parse_args(flags)


def test_cli_compat_flag():
    assert common.attack_options(cli_args()).compat == "paper"
    ref = common.attack_options(cli_args(compat="reference"))
    assert (ref.compat, ref.scoring.output_window, ref.selection) == (
        "reference",
        "last",
        "reference",
    )
    both = common.attack_options(cli_args(compat="reference", output_window="first"))
    assert both.scoring.output_window == "first"
    assert common.attack_options(cli_args(output_window="last")).scoring.output_window == "last"
    with pytest.raises(SystemExit):
        cli_args(compat="other")
    with pytest.raises(UsageError):
        common.attack_options(cli_args(alpha=2))


def test_reference_split_counts_bos_in_the_prefix():
    text = " ".join(PREFIX_WORDS + SUFFIX_WORDS + ["extra"])
    paper = split(Snippet("s", text), WordTokenizer(bos=True), 18, prefix_ratio=1 / 3)
    ref = split(
        Snippet("s", text), WordTokenizer(bos=True), 18, prefix_ratio=1 / 3, bos_in_prefix=True
    )
    assert paper.prefix.split() == PREFIX_WORDS and paper.suffix.split() == SUFFIX_WORDS
    # BOS + 5 text tokens = 6 prefix tokens; the suffix keeps its 12 tokens, shifted by one.
    assert ref.prefix.split() == PREFIX_WORDS[:5] and len(ref.suffix_ids) == 12
    assert ref.suffix.split() == PREFIX_WORDS[5:] + SUFFIX_WORDS[:11]
    assert ref.bos_in_prefix and not paper.bos_in_prefix and ref.length == 18
    no_bos = split(
        Snippet("s", text), WordTokenizer(bos=False), 18, prefix_ratio=1 / 3, bos_in_prefix=True
    )
    assert no_bos.prefix == paper.prefix and not no_bos.bos_in_prefix


# --- item 9: the manifest --------------------------------------------------------------------
def test_manifest_names_versions_wording_compat_answer_model_and_generation():
    res = run_interactive(
        make_split(),
        ModelSet(victim=counting_victim(), attacker=question_attacker()),
        AttackOptions(compat="reference", interactive=InteractiveOptions(rounds=1, n_candidates=2)),
    )
    m = res.manifest
    assert {"nltk", "rouge-score"} <= set(m["versions"]) and m["versions"]["nltk"]
    assert (m["compat"], m["meta_prompts"], m["selection"], m["answer_model"]) == (
        "reference",
        "reference",
        "reference",
        "victim",
    )
    assert m["generation"]["budget_tokens"] == 18 and m["generation"]["window"] == "last"
    v = counting_victim()
    base = run_method("ps_base", make_split(), ModelSet(victim=v, base=v), AttackOptions())
    assert base.manifest["answer_model"] == "base" and base.manifest["compat"] == "paper"


@pytest.mark.parametrize("compat, prefix_words", [("paper", 6), ("reference", 5)])
def test_run_unit_cuts_the_split_with_the_compat_modes_convention(tmp_path, compat, prefix_words):
    from memprobe_core.runs.unit import run_unit
    from memprobe_core.store import Store, UnitKey

    seen = []

    def runner(name, piece, models, opts, *, on_event=None, cancel=None):
        seen.append(piece)
        return run_method(name, piece, models, opts, on_event=on_event, cancel=cancel)

    snippet = Snippet("s", " ".join(PREFIX_WORDS + SUFFIX_WORDS + ["extra"]), "books")
    unit = UnitKey("s", "ps_inst", 18)
    with Store(tmp_path / "runs.sqlite") as store:
        run_id = store.create_run("probe", snippets=[snippet], units=[unit])
        out = run_unit(
            store,
            run_id,
            unit,
            snippet,
            ModelSet(victim=long_victim(tok=WordTokenizer(bos=True))),  # BOS in front
            AttackOptions(compat=compat),
            runner=runner,
        )
    assert out.status == "done"
    assert len(seen[0].prefix_ids) == prefix_words and len(seen[0].suffix_ids) == 12
    assert out.result.manifest["split"]["bos_in_prefix"] is (compat == "reference")
