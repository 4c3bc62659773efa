"""The chance reading of one output (issue 52): the words its prompt gave and English function
words are not credited, the margin is the chance values' spread, and a run of one snippet reads
the same on the page and in its HTML report (docs/method.md §2, "Chance level of Mem")."""

from __future__ import annotations

import statistics

import pytest

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.chance import (
    ABOVE_CHANCE,
    NOT_ABOVE_CHANCE,
    chance_levels,
    chance_reading,
    reference_chance,
    reference_suffixes,
    upper_level,
)
from memprobe_core.config import ScoringConfig
from memprobe_core.metrics import mem as mem_of
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import split
from memprobe_core.store import Store, UnitKey
from tests.unit.test_chance import OWN, SUFFIXES, run_units

# The auditor's probe: the attacker's prompt hands the victim one word of the true text, and the
# victim writes about that word, nothing of the snippet.
PROMPT = "Definitions."
ANSWER = (
    "In the context of grammar and linguistics, definitions refer to the explanations or "
    "descriptions of the meanings of words, phrases, or concepts. They provide a clear "
    "understanding of what a particular term means and how it is used in language."
)
SCORING = ScoringConfig()


def _cut(snippet_id: str, length: int = 60):  # type: ignore[no-untyped-def]
    snippet = next(s for s in demo_corpus() if s.id == snippet_id)
    cut = lambda s: split(s, "whitespace", length)
    pool, source = reference_suffixes(snippet.id, snippet.domain, cut)
    return cut(snippet), pool, source


def test_an_answer_about_the_prompts_word_is_not_above_chance() -> None:
    # docs:pyclbr's suffix says "class and function definitions, …"
    piece, pool, source = _cut("docs:pyclbr")
    assert "definitions" in piece.suffix
    mem = mem_of(ANSWER, piece.suffix, SCORING, suffix_tokens=piece.suffix_tokens)
    assert round(mem, 3) == 0.279
    # The earlier reading: Mem of the whole answer against the level of the whole answer's Mem
    # against the other suffixes: "above chance".
    whole = [mem_of(ANSWER, s, SCORING, suffix_tokens=n) for s, n in pool]
    assert mem > upper_level(whole)
    level = reference_chance(
        ANSWER,
        mem,
        pool,
        SCORING,
        prompt=PROMPT,
        suffix=(piece.suffix, piece.suffix_tokens),
        source=source,
    )
    assert level.verdict == NOT_ABOVE_CHANCE
    assert level.mem_unprompted == 0.0  # "definitions" was the prompt's; the rest function words
    assert chance_reading(level) == (
        f"Chance level of Mem {level.level:.3f} + spread {level.spread:.3f} (mean "
        f"{level.mean:.3f}, against {source}); Mem of the words neither the "
        "prompt gave nor function words make 0.000: this Mem is NOT distinguishable from chance."
    )


def test_a_shared_common_word_does_not_clear_the_levels_spread() -> None:
    # The Apache licence ("1. Definitions." is in its prefix): the answer's "means", "used",
    # "term" are the licence's words too, and the level alone would be beaten.
    piece, pool, source = _cut("legal:apache-2.0-827d10aa")
    mem = mem_of(ANSWER, piece.suffix, SCORING, suffix_tokens=piece.suffix_tokens)
    own = (piece.suffix, piece.suffix_tokens)
    level = reference_chance(ANSWER, mem, pool, SCORING, prompt=PROMPT, suffix=own)
    assert level.level is not None and level.spread is not None and level.mem_unprompted
    assert level.level < level.mem_unprompted < level.level + level.spread
    assert level.spread == pytest.approx(statistics.pstdev(level.values))
    assert level.verdict == NOT_ABOVE_CHANCE


def test_a_reproduced_suffix_is_above_chance_with_the_prefix_as_its_prompt() -> None:
    for snippet_id in ("docs:pyclbr", "legal:apache-2.0-827d10aa"):
        piece, pool, _ = _cut(snippet_id)
        own = (piece.suffix, piece.suffix_tokens)
        level = reference_chance(piece.suffix, 1.0, pool, SCORING, prompt=piece.prefix, suffix=own)
        assert level.verdict == ABOVE_CHANCE, snippet_id


def test_words_the_prompt_gave_are_not_credited_in_a_run() -> None:
    # The prompt hands over four words of the unit's own suffix; the output repeats them.
    units = run_units()
    prompt = "Redistribution source code notice"
    units[OWN] = {**units[OWN], "prompt": prompt, "output": prompt.lower()}
    units[OWN]["mem"] = mem_of(prompt.lower(), SUFFIXES[OWN], SCORING)
    assert units[OWN]["mem"] > 0.15
    level = chance_levels(units)[OWN]
    assert level.mem_unprompted == 0.0 and level.verdict == NOT_ABOVE_CHANCE
    # Not given by the prompt, the same words are the suffix's own: above chance.
    units[OWN] = {**units[OWN], "prompt": "Continue:"}
    assert chance_levels(units)[OWN].verdict == ABOVE_CHANCE


def stored_probe(
    store: Store, snippet_id: str, prompt: str, output: str, tokenizer: str = "whitespace"
) -> tuple[int, AttackResult]:
    """A finished one-unit probe of the attacker loop in ``store``: its run id and result."""
    piece, _, _ = _cut(snippet_id)
    key = UnitKey(piece.snippet.id, "interactive", 60)
    mem = mem_of(output, piece.suffix, SCORING, suffix_tokens=piece.suffix_tokens)
    run_id = store.create_run(
        "probe",
        config={"methods": ["interactive"], "lengths": [60]},
        snippets=[piece.snippet],
        units=[key],
    )
    candidate = Candidate(
        round=0, index=0, prompt=prompt, output=output, mem=mem, lcs_p=0.0, objective=mem
    )
    split_record = {
        "length": 60,
        "tokenizer": tokenizer,
        "suffix": piece.suffix,
        "suffix_tokens": piece.suffix_tokens,
        "bos_in_prefix": False,
    }
    result = AttackResult(
        "interactive",
        piece.snippet.id,
        piece.snippet.domain,
        60,
        prompt=prompt,
        output=output,
        mem=mem,
        lcs_p=0.0,
        objective=mem,
        alpha=0.5,
        trace=[candidate],
        costs=Costs(victim_queries=1),
        manifest={"scoring": SCORING.__dict__ | {}, "split": split_record},
    )
    store.record_candidates(run_id, key, result.trace)
    store.finish_unit(run_id, key, result)
    return run_id, result


def test_a_probe_reads_the_same_on_the_page_and_in_its_html_report(tmp_path) -> None:
    import html

    from memprobe_core.report.html import html_report_for_run
    from ui_common.render import output_chance

    piece, pool, source = _cut("docs:pyclbr")
    with Store(tmp_path / "runs.sqlite") as store:
        run_id, _ = stored_probe(store, "docs:pyclbr", PROMPT, ANSWER)
        report = html.unescape(html_report_for_run(store, run_id))
        frame = store.results_frame(run_id)
    info = {
        "suffix": piece.suffix,
        "suffix_tokens": piece.suffix_tokens,
        "scoring": SCORING,
        "tokenizer": None,
        "reference": pool,
        "reference_source": source,
    }
    on_page = output_chance(ANSWER, float(frame["mem"].iloc[0]), info, PROMPT)
    assert on_page is not None and on_page.verdict == NOT_ABOVE_CHANCE
    assert f"Ours (interactive) @ 60: {chance_reading(on_page)}" in report
    assert "chance level is undefined" not in report and "No chance level" not in report
    # The pool is the built-in docs domain: its size follows the Python the corpus was built on.
    assert (
        f"this Mem is NOT distinguishable from chance (chance level {on_page.level:.3f})" in report
    )
    assert frame["chance_source"].iloc[0] == source == f"{len(pool)} built-in docs snippets"
