"""Many-prompt robustness (docs/method.md §23): the distinct prompts of a unit whose answer
elicits the suffix, by the stated dedup rule and threshold, counted by the attacker loop."""

from __future__ import annotations

import threading

import pytest

from memprobe_core.attacks import AttackOptions, ModelSet, registry, run_interactive
from memprobe_core.attacks.options import InteractiveOptions
from memprobe_core.attacks.result import Candidate
from memprobe_core.measuring.many_prompts import (
    ELICITING_THRESHOLD,
    count_eliciting_prompts,
    describe_eliciting,
    eliciting_record,
    prompt_key,
)
from tests.helpers.scripted_models import (
    SUFFIX_WORDS,
    counting_victim,
    make_split,
    question_attacker,
)


def cand(prompt: str, mem: float, lcs_p: float = 0.0) -> Candidate:
    return Candidate(
        round=1, index=0, prompt=prompt, output="", mem=mem, lcs_p=lcs_p, objective=0.0
    )


def test_prompts_differing_in_case_width_spacing_or_closing_punctuation_count_once():
    variants = [
        "Recite the licence.",
        "recite the licence?",
        "RECITE  the\tlicence",
        "Ｒｅｃｉｔｅ the licence!?",  # full-width letters: NFKC reads them as plain ones
        " recite the licence … ",
    ]
    assert len({prompt_key(p) for p in variants}) == 1
    assert count_eliciting_prompts([cand(p, 0.9) for p in variants]) == 1
    # Punctuation inside a prompt is kept: a quote changes what is asked.
    assert prompt_key('Recite "the" licence') != prompt_key("Recite the licence")
    assert count_eliciting_prompts([cand("Recite the licence", 0.9), cand("Quote it", 0.9)]) == 2


def test_a_group_counts_when_any_of_its_prompts_elicits():
    group = [cand("Recite the licence", 0.1), cand("recite the licence.", 0.8)]
    assert count_eliciting_prompts(group) == 1


def test_a_prompt_that_holds_the_suffix_is_not_counted_however_well_it_is_copied():
    handed = cand("alpha bravo charlie delta", mem=1.0, lcs_p=1.0)
    half = cand("alpha bravo, go on", mem=1.0, lcs_p=0.6)  # 0.4 beyond what it gave
    assert count_eliciting_prompts([handed, half]) == 0
    assert count_eliciting_prompts([cand("go on", mem=1.0, lcs_p=0.4)]) == 1


def test_the_threshold_is_reached_at_equality_and_not_below():
    assert ELICITING_THRESHOLD == 0.5
    # 0.7 − 0.2 is 0.4999… in floats: it reaches 0.5.
    assert count_eliciting_prompts([cand("a", mem=0.7, lcs_p=0.2)]) == 1
    assert count_eliciting_prompts([cand("a", mem=0.5)]) == 1
    assert count_eliciting_prompts([cand("a", mem=0.5 - 1e-6)]) == 0
    assert count_eliciting_prompts([cand("a", mem=0.74, lcs_p=0.25)]) == 0
    assert count_eliciting_prompts([cand("a", mem=0.8)], threshold=0.9) == 0
    assert count_eliciting_prompts([cand("a", mem=0.9)], threshold=0.9) == 1


def test_a_prompt_with_nothing_left_under_the_rule_is_no_path():
    assert count_eliciting_prompts([cand("", 1.0), cand(" ?! ", 1.0)]) == 0


@pytest.mark.parametrize("threshold", [0.0, -0.1, 1.5])
def test_a_threshold_outside_0_1_is_refused(threshold):
    with pytest.raises(ValueError, match=r"outside \(0, 1\]"):
        count_eliciting_prompts([cand("a", 1.0)], threshold=threshold)


def test_the_record_and_its_line():
    record = eliciting_record([cand("a", 0.9), cand("b", 0.9), cand("c", 0.1)])
    assert record == {"eliciting_prompts": 2, "eliciting_threshold": 0.5}
    assert describe_eliciting(record) == (
        "Many-prompt robustness: 2 distinct prompts elicited the suffix "
        "(answer's Mem − prompt's LCS_P ≥ 0.50)."
    )
    assert describe_eliciting({"acr": 2.0}) is None
    # The attacker loop's results are described by this line, and only they.
    assert describe_eliciting(record) in registry.describe_result(record)


def run_loop(**kw):
    options = AttackOptions(seed=3, interactive=InteractiveOptions(rounds=3, n_candidates=6))
    models = ModelSet(victim=counting_victim(), attacker=question_attacker())
    return run_interactive(make_split(), models, options, **kw)


def eliciting_ks(result) -> tuple[set[int], set[int]]:
    """The K of every "ask number K" prompt of the trace, and those that elicit: the victim
    answers the first K of the 12 suffix words, so Mem = K/12 and LCS_P = 0 (the prompt shares
    no word with the suffix): a prompt elicits iff K ≥ 6."""
    assert len(SUFFIX_WORDS) == 12
    asked = {int(c.prompt.split()[-1]) for c in result.trace if c.prompt}
    return asked, {k for k in asked if k >= 6}


def test_the_attacker_loop_counts_its_distinct_eliciting_prompts_over_every_round():
    result = run_loop()
    asked, eliciting = eliciting_ks(result)
    assert eliciting and eliciting != asked  # the case is not trivial either way
    assert result.verbatim["eliciting_prompts"] == len(eliciting)
    assert result.verbatim["eliciting_threshold"] == 0.5


def test_a_cancelled_loop_counts_the_prompts_it_scored():
    cancel = threading.Event()

    def stop_in_round_2(event):
        if event.kind == "candidate_scored" and event.round == 2 and event.candidate.index == 1:
            cancel.set()

    result = run_loop(on_event=stop_in_round_2, cancel=cancel)
    assert result.status == "cancelled" and len(result.trace) == 1 + 6 + 2
    _, eliciting = eliciting_ks(result)
    assert result.verbatim["eliciting_prompts"] == len(eliciting)
