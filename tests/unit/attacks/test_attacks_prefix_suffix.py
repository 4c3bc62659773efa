"""P-S-Base and P-S-Inst on fake models: which model, which formats, which one is chosen."""

from __future__ import annotations

import threading

import pytest

from memprobe_core.attacks import (
    AttackOptions,
    MissingModelError,
    ModelSet,
    run_method,
    run_prefix_suffix,
)
from memprobe_core.attacks.options import PrefixSuffixOptions
from memprobe_core.models.scripted import Ask, ScriptedGenerator
from memprobe_core.snippets.split import Snippet, split

WORDS = ["one", "two", "three", "alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


def recorder(model_id: str, chat: bool) -> ScriptedGenerator:
    """Greedy fake: raw prefix → half the suffix; chat prefix → the whole suffix."""

    def answer(ask: Ask) -> str:
        suffix = WORDS[3:]
        return " ".join(suffix if isinstance(ask.request, list) else suffix[:3])

    return ScriptedGenerator(answer, model_id=model_id, chat_template=chat)


def seen(model: ScriptedGenerator) -> list[tuple[list, int, float]]:
    """Each generate call's requests, budget and temperature."""
    return [(c.requests, c.max_new_tokens, c.temperature) for c in model.calls]


def sp():
    return split(Snippet("x", " ".join(WORDS), domain="cc"), "whitespace", 9, prefix_ratio=1 / 3)


def test_ps_base_asks_the_base_model_greedily_for_len_suffix_tokens():
    base, victim = recorder("base", chat=False), recorder("victim", chat=True)
    res = run_prefix_suffix(
        sp(), ModelSet(victim=victim, base=base), AttackOptions(), variant="base"
    )
    assert seen(base) == [(["one two three"], 6, 0.0)] and seen(victim) == []
    assert res.method == "ps_base" and res.dis is None and res.prompt == "one two three"
    assert res.mem == pytest.approx(0.5)  # recall: 3 of the 6 suffix words
    assert res.costs.victim_queries == 1 and res.costs.attacker_queries == 0
    assert res.manifest["scored_model"] == "base"


def test_ps_base_without_a_base_model_says_what_to_set():
    with pytest.raises(MissingModelError, match="ModelSet.base"):
        run_method("ps_base", sp(), ModelSet(victim=recorder("v", True)), AttackOptions())


def test_ps_inst_tries_raw_and_chat_and_keeps_the_better():
    victim = recorder("victim", chat=True)
    events = []
    res = run_method(
        "ps_inst", sp(), ModelSet(victim=victim), AttackOptions(), on_event=events.append
    )
    ((requests, _, _),) = seen(victim)  # one batched call with both formats
    assert requests == ["one two three", [{"role": "user", "content": "one two three"}]]
    assert [c.extra["format"] for c in res.trace] == ["raw", "chat"]
    assert res.manifest["ps_format"] == "chat" and res.mem == pytest.approx(1.0)
    assert res.objective == max(c.objective for c in res.trace)
    assert [e.kind for e in events] == [
        "round_started",
        "candidate_scored",
        "candidate_scored",
        "round_finished",
        "finished",
    ]


def test_ps_inst_raw_only_when_disabled_or_without_template():
    for chat, opt in ((True, False), (False, True)):
        victim = recorder("victim", chat=chat)
        res = run_method(
            "ps_inst",
            sp(),
            ModelSet(victim=victim),
            AttackOptions(ps=PrefixSuffixOptions(chat_template=opt)),
        )
        assert len(res.trace) == 1 and res.manifest["ps_format"] == "raw"


def test_ps_cancelled_before_the_query():
    cancel = threading.Event()
    cancel.set()
    victim = recorder("victim", chat=True)
    res = run_method("ps_inst", sp(), ModelSet(victim=victim), AttackOptions(), cancel=cancel)
    assert res.status == "cancelled" and seen(victim) == [] and res.trace == []


@pytest.mark.parametrize("speculative", [True, False])
def test_the_true_suffix_goes_along_as_the_draft_unless_turned_off(speculative):
    """Every greedy victim answer is asked with the suffix as its reference (a backend drafts
    from it); ``speculative=False`` (``--no-speculative``) sends none."""
    base = recorder("base", chat=False)
    piece = sp()
    run_prefix_suffix(
        piece,
        ModelSet(victim=recorder("v", True), base=base),
        AttackOptions(speculative=speculative),
        variant="base",
    )
    (call,) = base.calls
    assert call.references == ([piece.suffix] if speculative else None)
