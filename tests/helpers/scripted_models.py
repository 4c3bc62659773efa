"""Scripted fake models and the word split the attack tests share (``fake:script`` underneath).

The attacker loop's tests use a pair whose scores are known by construction: the attacker writes
"ask number K" and the victim answers it with the first K words of the true suffix, so a larger
K scores better and a loop that keeps its best candidate must end on a large K.
"""

from __future__ import annotations

from memprobe_core.models.base import Request
from memprobe_core.models.scripted import Ask, ScriptedGenerator
from memprobe_core.snippets.split import Snippet, SplitSnippet, split

SUFFIX_WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
]
PREFIX_WORDS = ["one", "two", "three", "four", "five", "six"]


def make_split(domain: str = "books") -> SplitSnippet:
    """The 18 words above cut by whitespace: 6 prefix words, the 12 suffix words."""
    text = " ".join(PREFIX_WORDS + SUFFIX_WORDS)
    return split(Snippet(id="s1", text=text, domain=domain), "whitespace", 18, prefix_ratio=1 / 3)


def parrot(name: str, text: str) -> ScriptedGenerator:
    """Repeats ``text`` to every request; no tokenizer (snippets are cut by whitespace)."""
    return ScriptedGenerator(default=text, model_id=name, tokenizer=None)


def counting_victim(*, chat: bool = True) -> ScriptedGenerator:
    """Answers 'ask number K' with the first K suffix words ('nothing' to anything else)."""

    def answer(ask: Ask) -> str:
        assert ask.call.temperature == 0.0  # the victim is always asked greedily
        last = ask.content.split()[-1]
        k = int(last) if last.isdigit() else 0
        return " ".join(SUFFIX_WORDS[:k]) or "nothing"

    return ScriptedGenerator(answer, model_id="test/victim", chat_template=chat)


def question_attacker(*, chat: bool = True, script: list[str] | None = None) -> ScriptedGenerator:
    """Writes 'ask number K' questions: greedy, a labelled, quoted K = 1; sampled, K drawn from
    the call's seeded generator (with a second line the cleaning must drop).

    ``script``: the texts to return instead, one per sequence in call order.
    """

    def answer(ask: Ask) -> str:
        if ask.call.temperature == 0:
            return 'New question: "ask number 1"'
        return f"ask number {ask.rng.randint(0, 12)}\nextra line"

    outputs = answer if script is None else script
    return ScriptedGenerator(outputs, model_id="test/attacker", chat_template=chat)


def first_requests(model: ScriptedGenerator) -> list[Request]:
    """The first request of each generate call, as given (the attacker's meta-prompts)."""
    return [call.requests[0] for call in model.calls]
