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
from memprobe_core.data import Snippet, split
from memprobe_core.models.base import Completion, Generator

WORDS = ["one", "two", "three", "alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


class Recorder(Generator):
    """Greedy fake: raw prefix → half the suffix; chat prefix → the whole suffix."""

    backend = "test"

    def __init__(self, model_id: str, chat: bool) -> None:
        super().__init__()
        self.model_id, self._chat = model_id, chat
        self.seen: list = []

    @property
    def has_chat_template(self) -> bool:
        return self._chat

    def _generate(self, requests, *, n, max_new_tokens, temperature, top_p, seed):
        self.seen.append((list(requests), max_new_tokens, temperature))
        suffix = WORDS[3:]
        return [
            [Completion(" ".join(suffix if isinstance(r, list) else suffix[:3]), max_new_tokens)]
            * n
            for r in requests
        ]


def sp():
    return split(Snippet("x", " ".join(WORDS), domain="cc"), "whitespace", 9, prefix_ratio=1 / 3)


def test_ps_base_asks_the_base_model_greedily_for_len_suffix_tokens():
    base, victim = Recorder("base", chat=False), Recorder("victim", chat=True)
    res = run_prefix_suffix(
        sp(), ModelSet(victim=victim, base=base), AttackOptions(), variant="base"
    )
    assert base.seen == [(["one two three"], 6, 0.0)] and victim.seen == []
    assert res.method == "ps_base" and res.dis is None and res.prompt == "one two three"
    assert res.mem == pytest.approx(0.5)  # recall: 3 of the 6 suffix words
    assert res.costs.victim_queries == 1 and res.costs.attacker_queries == 0
    assert res.manifest["scored_model"] == "base"


def test_ps_base_without_a_base_model_says_what_to_set():
    with pytest.raises(MissingModelError, match="ModelSet.base"):
        run_method("ps_base", sp(), ModelSet(victim=Recorder("v", True)), AttackOptions())


def test_ps_inst_tries_raw_and_chat_and_keeps_the_better():
    victim = Recorder("victim", chat=True)
    events = []
    res = run_method(
        "ps_inst", sp(), ModelSet(victim=victim), AttackOptions(), on_event=events.append
    )
    ((requests, _, _),) = victim.seen  # one batched call with both formats
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
        victim = Recorder("victim", chat=chat)
        res = run_method(
            "ps_inst", sp(), ModelSet(victim=victim), AttackOptions(ps_chat_template=opt)
        )
        assert len(res.trace) == 1 and res.manifest["ps_format"] == "raw"


def test_ps_cancelled_before_the_query():
    cancel = threading.Event()
    cancel.set()
    victim = Recorder("victim", chat=True)
    res = run_method("ps_inst", sp(), ModelSet(victim=victim), AttackOptions(), cancel=cancel)
    assert res.status == "cancelled" and victim.seen == [] and res.trace == []
