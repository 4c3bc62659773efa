"""Continuation extraction against scripted victims: a victim that knows a 3,000-word text and
answers each turn with its next 150 words, one that refuses the plain instruction, one that
drifts, one that ends with THE END; budgets, cancel, resume equivalence, request shapes and the
context option (what the victim was asked, from ``ScriptedGenerator.calls``)."""

from __future__ import annotations

import json
import random
import re
import threading

import pytest

from memprobe_core.documents.continuation import (
    DEFAULT_INSTRUCTION,
    STOP_REASONS,
    ContinuationOptions,
    ResumeMismatch,
    Turn,
    run_continuation,
    score,
    split_document,
)
from memprobe_core.errors import OptionError, UsageError
from memprobe_core.models.scripted import Ask, ScriptedGenerator

SYLLABLES = ["ba", "ko", "ri", "tu", "me", "sa", "no", "li", "ve", "da", "pu", "ze"]
WORDLIST = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in ("", "n", "s")]
BOOK_WORDS = random.Random(0).choices(WORDLIST, k=3000)
# Line breaks every 12 words: the opening keeps the document's own spacing.
BOOK = "\n".join(" ".join(BOOK_WORDS[i : i + 12]) for i in range(0, len(BOOK_WORDS), 12))
STEP = 150


def _context(ask: Ask) -> str:
    """The text a victim continues: a base request itself, else the last assistant message (or
    the first user message, in phase 1)."""
    if isinstance(ask.request, str):
        return ask.request
    for message in reversed(ask.request):
        if message["role"] == "assistant":
            return message["content"]
    return ask.request[-1]["content"]


def _find(words: list[str], tail: list[str]) -> int | None:
    """Index just after the last occurrence of ``tail`` in ``words``."""
    for start in range(len(words) - len(tail), -1, -1):
        if words[start : start + len(tail)] == tail:
            return start + len(tail)
    return None


def knower(words: list[str] = BOOK_WORDS, step: int = STEP):
    """A victim's script: the next ``step`` words after its context's last 8 (``""`` at the
    end; a base model's answer starts with a space, as a real one's does)."""

    def answer(ask: Ask) -> str:
        position = _find(words, _context(ask).split()[-8:])
        if position is None:
            return "no idea what this is"
        text = " ".join(words[position : position + step])
        return " " + text if isinstance(ask.request, str) and text else text

    return answer


def chat_victim(script=None, **kw) -> ScriptedGenerator:
    return ScriptedGenerator(script or knower(), chat_template=True, **kw)


def base_victim(script=None, **kw) -> ScriptedGenerator:
    return ScriptedGenerator(script or knower(), chat_template=False, **kw)


def _same(a: Turn, b: Turn) -> bool:
    return {**a.to_dict(), "seconds": 0} == {**b.to_dict(), "seconds": 0}


OPENING, HELDBACK = split_document(BOOK, ContinuationOptions())


# --- the whole run ----------------------------------------------------------------------------
def test_a_chat_victim_that_knows_the_text_gives_all_of_it() -> None:
    victim = chat_victim()
    seen: list[Turn] = []
    result = run_continuation(victim, BOOK, on_turn=seen.append)
    # Phase 1 at the first attempt, 18 turns of text (2,650 words after phase 1's 150), then "".
    assert [t.phase for t in result.turns] == [1] + [2] * 19
    assert result.turns[0].success and result.turns[0].attempt == 0
    assert result.turns[0].verbatim_words == 100  # all held-back words
    assert result.stop_reason == "empty" and result.turns[-1].stop_reason == "empty"
    assert all(t.stop_reason is None for t in result.turns[:-1])
    assert seen == list(result.turns)
    assert [t.index for t in result.turns] == list(range(20))
    assert result.phase1_attempts == 1 and result.queries == 20 == len(victim.calls)
    assert result.generated_tokens == sum(t.tokens for t in result.turns)
    assert result.generated_text == "\n".join(t.output for t in result.turns if t.output)
    assert result.generated_text.split() == BOOK_WORDS[200:]
    found = score(result, BOOK)
    assert found.matched_words == 2800 and found.nv_recall == pytest.approx(2800 / 3000)
    # Greedy, per-turn token cap, the run's seed.
    assert {(c.temperature, c.max_new_tokens, c.seed) for c in victim.calls} == {(0.0, 512, 0)}


def test_chat_requests_are_the_instruction_then_the_conversation() -> None:
    victim = chat_victim()
    result = run_continuation(victim, BOOK, ContinuationOptions(max_turns=2))
    first, second, third = (c.requests[0] for c in victim.calls)
    assert OPENING.split() == BOOK_WORDS[:200] and "\n" in OPENING
    assert first == [{"role": "user", "content": DEFAULT_INSTRUCTION + "\n\n" + OPENING}]
    out1, out2 = result.turns[0].output, result.turns[1].output
    assert second == [*first, {"role": "assistant", "content": out1}, _user("Continue")]
    assert third == [*second, {"role": "assistant", "content": out2}, _user("Continue")]
    assert [t.request_text for t in result.turns] == [DEFAULT_INSTRUCTION, "Continue", "Continue"]
    assert [t.context for t in result.turns] == ["opening", "full", "full"]
    assert result.stop_reason == "turn_budget"


def _user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def test_a_base_victim_gets_the_opening_then_its_own_text() -> None:
    victim = base_victim()
    result = run_continuation(victim, BOOK, ContinuationOptions(best_of_n=5, max_turns=3))
    asked = [c.requests[0] for c in victim.calls]
    assert all(isinstance(r, str) for r in asked)
    assert asked[0] == OPENING  # no instruction: a base model continues its input
    assert asked[1] == OPENING + result.turns[0].output
    assert asked[2] == asked[1] + result.turns[1].output
    assert result.turns[0].request_text == "" and result.turns[1].request_text == ""
    assert result.generated_text.split() == BOOK_WORDS[200 : 200 + 4 * STEP]


def test_a_base_victim_gets_one_phase1_attempt_whatever_best_of_n() -> None:
    victim = base_victim(lambda ask: "something else entirely")
    result = run_continuation(victim, BOOK, ContinuationOptions(best_of_n=5))
    assert result.stop_reason == "phase1_failed" and len(victim.calls) == 1
    assert result.turns[0].stop_reason == "phase1_failed" and not result.turns[0].success
    assert result.generated_text == ""


# --- phase 1 and Best-of-N --------------------------------------------------------------------
def test_phase1_threshold_is_the_longest_run_share_of_the_heldback_words() -> None:
    def partial(words: int):
        # The held-back words with one foreign word after `words` of them: longest run `words`.
        return lambda ask: " ".join(
            BOOK_WORDS[200 : 200 + words] + ["xx"] + BOOK_WORDS[201 + words : 300]
        )

    passed = run_continuation(chat_victim(partial(60)), BOOK, ContinuationOptions(max_turns=1))
    assert passed.turns[0].verbatim_words == 60 and passed.turns[0].success
    failed = run_continuation(chat_victim(partial(59)), BOOK, ContinuationOptions(max_turns=1))
    assert failed.turns[0].verbatim_words == 59 and failed.stop_reason == "phase1_failed"
    looser = ContinuationOptions(max_turns=1, phase1_threshold=0.5)
    assert run_continuation(chat_victim(partial(50)), BOOK, looser).phase1_passed


def _refuses_the_plain_instruction(ask: Ask) -> str:
    if DEFAULT_INSTRUCTION in ask.text:
        return "I'm sorry, but I can't help with reproducing copyrighted text."
    return knower()(ask)


def test_a_refused_plain_instruction_without_best_of_n_fails_phase1() -> None:
    victim = chat_victim(_refuses_the_plain_instruction)
    result = run_continuation(victim, BOOK)
    assert result.stop_reason == "phase1_failed" and len(result.turns) == 1
    assert result.turns[0].refused and not result.turns[0].success


def test_best_of_n_perturbs_the_instruction_until_one_passes() -> None:
    victim = chat_victim(_refuses_the_plain_instruction)
    result = run_continuation(victim, BOOK, ContinuationOptions(best_of_n=3, max_turns=2))
    first, second = result.turns[:2]
    assert first.refused and first.attempt == 0 and first.perturbations == ()
    assert second.phase == 1 and second.attempt == 1 and second.success and not second.refused
    assert second.perturbations and second.request_text != DEFAULT_INSTRUCTION
    # Only the instruction is perturbed: the opening goes as it is.
    asked = victim.calls[1].requests[0]
    assert asked == [_user(second.request_text + "\n\n" + OPENING)]
    # Phase 2 goes on from the passing attempt's conversation.
    assert victim.calls[2].requests[0][0] == asked[0]
    assert result.phase1_attempts == 2 and result.stop_reason == "turn_budget"
    assert result.generated_text.split() == BOOK_WORDS[200 : 200 + 3 * STEP]


def test_best_of_n_stops_when_its_budget_is_spent() -> None:
    victim = chat_victim(lambda ask: "I cannot reproduce that text.")
    result = run_continuation(victim, BOOK, ContinuationOptions(best_of_n=4))
    assert result.stop_reason == "phase1_failed"
    assert [t.attempt for t in result.turns] == [0, 1, 2, 3, 4]
    assert all(t.refused for t in result.turns)
    assert len({t.request_text for t in result.turns}) == 5
    assert [t.stop_reason for t in result.turns] == [None] * 4 + ["phase1_failed"]


def test_a_failed_answer_that_is_no_refusal_is_not_marked_refused() -> None:
    victim = chat_victim(lambda ask: "Once upon a time there was a cat.")
    result = run_continuation(victim, BOOK, ContinuationOptions(best_of_n=1))
    assert [t.refused for t in result.turns] == [False, False]
    assert result.stop_reason == "phase1_failed"


# --- phase 2's stops --------------------------------------------------------------------------
def _phase1_then(script):
    """Knows phase 1, then answers phase 2 with ``script(turn number)``."""
    know = knower()

    def answer(ask: Ask) -> str:
        if len(ask.request) == 1:
            return know(ask)
        return script(len(ask.request) // 2, ask)

    return answer


def _noise(turn: int, ask: Ask) -> str:
    return " ".join(random.Random(turn).choices(WORDLIST, k=STEP))


def test_a_drifting_victim_stops_after_drift_turns() -> None:
    victim = chat_victim(_phase1_then(_noise))
    result = run_continuation(victim, BOOK)
    assert result.stop_reason == "drift" and len(result.turns) == 1 + 3
    assert [t.success for t in result.turns[1:]] == [False] * 3
    assert all(t.verbatim_words < 20 for t in result.turns[1:])
    five = run_continuation(
        chat_victim(_phase1_then(_noise)), BOOK, ContinuationOptions(drift_turns=5)
    )
    assert five.stop_reason == "drift" and len(five.turns) == 1 + 5


def test_a_verbatim_turn_resets_the_drift_count() -> None:
    def script(turn: int, ask: Ask) -> str:
        # Noise, noise, 20 true words (then noise), noise, noise, noise: drift at turn 6.
        if turn == 3:
            return " ".join(BOOK_WORDS[1000:1020]) + " " + _noise(turn, ask)
        return _noise(turn, ask)

    result = run_continuation(chat_victim(_phase1_then(script)), BOOK)
    assert [t.success for t in result.turns[1:]] == [False, False, True, False, False, False]
    assert result.turns[3].verbatim_words == 20
    assert result.stop_reason == "drift" and len(result.turns) == 7


def test_drift_min_words_sets_what_a_block_is() -> None:
    def script(turn: int, ask: Ask) -> str:
        first = 1000 + 19 * turn  # 19 true words a turn, new each turn
        return " ".join(BOOK_WORDS[first : first + 19]) + " " + _noise(turn, ask)

    result = run_continuation(chat_victim(_phase1_then(script)), BOOK)
    assert result.stop_reason == "drift" and len(result.turns) == 4
    looser = ContinuationOptions(drift_min_words=19, max_turns=5)
    kept = run_continuation(chat_victim(_phase1_then(script)), BOOK, looser)
    assert kept.stop_reason == "turn_budget" and all(t.success for t in kept.turns)


def test_a_victim_repeating_itself_drifts() -> None:
    # Turn 1 writes 50 new true words; turns 2 on write the same 50 again: no new block.
    def script(turn: int, ask: Ask) -> str:
        return " ".join(BOOK_WORDS[1000:1050]) + " " + _noise(turn, ask)

    result = run_continuation(chat_victim(_phase1_then(script)), BOOK)
    assert [t.success for t in result.turns[1:]] == [True, False, False, False]
    assert all(t.verbatim_words == 50 for t in result.turns[1:])
    assert result.stop_reason == "drift" and len(result.turns) == 1 + 4


def test_repeating_the_opening_or_phase_one_adds_no_block() -> None:
    know, phase1 = knower(), []

    def answer(ask: Ask) -> str:
        if len(ask.request) == 1:
            phase1.append(know(ask))  # phase 1 passes with the held-back words
            return phase1[-1]
        # Phase 2: the opening (given in the prompt), then phase 1's answer, then new words.
        return [OPENING, phase1[0], " ".join(BOOK_WORDS[2000:2040])][len(ask.request) // 2 - 1]

    result = run_continuation(chat_victim(answer), BOOK, ContinuationOptions(max_turns=3))
    assert [t.success for t in result.turns[1:]] == [False, False, True]
    assert all(t.verbatim_words >= 40 for t in result.turns[1:])


def test_the_end_stops_the_run() -> None:
    words = BOOK_WORDS[:1000] + ["THE", "END"]
    document = " ".join(words)
    victim = chat_victim(knower(words))
    result = run_continuation(victim, document)
    assert result.stop_reason == "stop_phrase"
    assert result.turns[-1].output.endswith("THE END")
    assert result.generated_text.split() == words[200:]
    # Case-sensitive: a lower-case "the end" in prose does not stop a run.
    lower = [w.lower() for w in words]
    quiet = run_continuation(chat_victim(knower(lower)), " ".join(lower))
    assert quiet.stop_reason == "empty"
    custom = ContinuationOptions(stop_phrases=["FIN"])
    assert run_continuation(chat_victim(knower(words)), document, custom).stop_reason == "empty"


def test_a_refusal_in_phase2_stops_the_run() -> None:
    know = knower()

    def script(turn: int, ask: Ask) -> str:
        return "I am unable to continue this text." if turn == 3 else know(ask)

    result = run_continuation(chat_victim(_phase1_then(script)), BOOK)
    assert result.stop_reason == "refusal" and len(result.turns) == 4
    assert result.turns[-1].refused and not any(t.refused for t in result.turns[:-1])
    # The refusal is the last answer of the run's text (extra words only, for nv-recall).
    assert result.generated_text.endswith("\n" + result.turns[-1].output)


def test_a_document_that_says_sorry_is_no_refusal() -> None:
    words = list(BOOK_WORDS)
    words[500:503] = ["I'm", "sorry,", "I can't"]  # the book's own dialogue
    document = " ".join(words)
    result = run_continuation(chat_victim(knower(document.split())), document)
    assert result.stop_reason == "empty" and not any(t.refused for t in result.turns)


def test_an_empty_answer_stops_the_run() -> None:
    result = run_continuation(chat_victim(_phase1_then(lambda turn, ask: "  ")), BOOK)
    assert result.stop_reason == "empty" and len(result.turns) == 2


# --- budgets and cancel -----------------------------------------------------------------------
def test_the_token_budget_caps_the_last_turn_and_stops() -> None:
    victim = chat_victim()
    options = ContinuationOptions(max_tokens=700, turn_tokens=STEP)
    result = run_continuation(victim, BOOK, options)
    assert result.stop_reason == "token_budget" and result.generated_tokens == 700
    assert [c.max_new_tokens for c in victim.calls] == [150, 150, 150, 150, 100]
    assert result.generated_text.split() == BOOK_WORDS[200:900]


def test_failed_phase1_attempts_count_towards_the_token_budget() -> None:
    victim = chat_victim(lambda ask: " ".join(["no"] * 300))
    options = ContinuationOptions(best_of_n=10, max_tokens=1000, turn_tokens=300)
    result = run_continuation(victim, BOOK, options)
    assert result.stop_reason == "token_budget" and result.generated_tokens == 1000
    assert [t.tokens for t in result.turns] == [300, 300, 300, 100]


def test_the_turn_budget_counts_phase2_turns() -> None:
    victim = chat_victim(_refuses_the_plain_instruction)
    result = run_continuation(victim, BOOK, ContinuationOptions(best_of_n=2, max_turns=4))
    assert result.stop_reason == "turn_budget"
    assert [t.phase for t in result.turns] == [1, 1, 2, 2, 2, 2]
    assert [t.attempt for t in result.turns if t.phase == 2] == [1, 2, 3, 4]
    assert result.turns[-1].stop_reason == "turn_budget"
    assert [t.stop_reason for t in result.turns[:-1]] == [None] * 5


def test_last_context_keeps_the_passing_perturbed_instruction() -> None:
    victim = chat_victim(_refuses_the_plain_instruction)
    options = ContinuationOptions(best_of_n=2, max_turns=2, context="last")
    result = run_continuation(victim, BOOK, options)
    passing = result.turns[1]
    assert passing.success and passing.request_text != DEFAULT_INSTRUCTION
    for call in victim.calls[2:]:
        assert call.requests[0][0] == _user(passing.request_text)
    assert result.stop_reason == "turn_budget"


def test_cancel_stops_before_the_next_query() -> None:
    cancel = threading.Event()
    victim = chat_victim()

    def on_turn(turn: Turn) -> None:
        if turn.index == 2:
            cancel.set()

    result = run_continuation(victim, BOOK, on_turn=on_turn, cancel=cancel)
    assert result.stop_reason == "cancelled" and len(result.turns) == 3 == len(victim.calls)
    assert all(t.stop_reason is None for t in result.turns)
    # Set before the run: nothing is asked.
    idle = chat_victim()
    assert run_continuation(idle, BOOK, cancel=cancel).turns == () and not idle.calls
    # A cancelled run resumes where it stopped.
    resumed = run_continuation(chat_victim(), BOOK, prior_turns=result.turns)
    assert resumed.stop_reason == "empty" and len(resumed.turns) == 20


# --- resume -----------------------------------------------------------------------------------
def _asked_before(victim: ScriptedGenerator, k: int, script=None):
    """``script`` (default: a knower) that raises if asked any of ``victim``'s first ``k``
    requests."""
    stored = victim.requests[:k]
    script = script or knower()

    def answer(ask: Ask) -> str:
        if ask.text in stored:
            raise AssertionError(f"asked again: {ask.text[:60]!r}")
        return script(ask)

    return answer


@pytest.mark.parametrize(
    ("options", "script"),
    [
        (ContinuationOptions(), None),
        (ContinuationOptions(context="last", context_tokens=300), None),
        (ContinuationOptions(context_tokens=700), None),
        (ContinuationOptions(max_tokens=1000, turn_tokens=STEP), None),
        (ContinuationOptions(best_of_n=3), _refuses_the_plain_instruction),
    ],
)
@pytest.mark.parametrize("base", [False, True])
def test_a_resumed_run_ends_with_the_turns_of_an_uninterrupted_one(options, script, base) -> None:
    make = base_victim if base else chat_victim
    full_victim = make(script)
    full = run_continuation(full_victim, BOOK, options)
    n = len(full.turns)
    assert n >= 3
    for k in sorted({1, 2, n // 2, n - 1, n}):
        stored = [Turn.from_dict(json.loads(json.dumps(t.to_dict()))) for t in full.turns[:k]]
        resumed_victim = make(_asked_before(full_victim, k, script))
        seen: list[Turn] = []
        resumed = run_continuation(
            resumed_victim, BOOK, options, prior_turns=stored, on_turn=seen.append
        )
        assert len(resumed.turns) == n
        assert all(_same(a, b) for a, b in zip(resumed.turns, full.turns, strict=True))
        assert resumed.generated_text == full.generated_text
        assert resumed.stop_reason == full.stop_reason
        assert resumed.generated_tokens == full.generated_tokens
        assert resumed.phase1_attempts == full.phase1_attempts
        assert len(resumed_victim.calls) == n - k and resumed.replayed == k
        assert seen == list(resumed.turns[k:])  # stored turns are not handed back


def test_resuming_in_the_middle_of_best_of_n() -> None:
    def needs_a_lookalike(ask: Ask) -> str:
        instruction = ask.text.split("\n\n")[0]
        if len(ask.request) == 1 and not re.search("[\u0400-\u04ff]", instruction):
            return "I can't do that."
        return knower()(ask)

    options = ContinuationOptions(best_of_n=30, max_turns=2)
    full_victim = chat_victim(needs_a_lookalike)
    full = run_continuation(full_victim, BOOK, options)
    assert full.phase1_attempts >= 3 and full.phase1_passed
    resumed_victim = chat_victim(needs_a_lookalike)
    resumed = run_continuation(resumed_victim, BOOK, options, prior_turns=full.turns[:2])
    assert all(_same(a, b) for a, b in zip(resumed.turns, full.turns, strict=True))
    assert resumed_victim.requests == full_victim.requests[2:]


def test_prior_turns_of_other_options_are_refused() -> None:
    full = run_continuation(chat_victim(), BOOK, ContinuationOptions(max_turns=3))
    other = ContinuationOptions(max_turns=3, instruction="Go on:")
    with pytest.raises(ResumeMismatch, match="stored turn 0"):
        run_continuation(chat_victim(), BOOK, other, prior_turns=full.turns)
    with pytest.raises(ResumeMismatch, match="4 stored turns"):
        run_continuation(
            chat_victim(), BOOK, ContinuationOptions(max_turns=2), prior_turns=full.turns
        )
    with pytest.raises(ResumeMismatch):
        run_continuation(
            base_victim(), BOOK, ContinuationOptions(max_turns=3), prior_turns=full.turns
        )


# --- the context option -----------------------------------------------------------------------
def _words_of(chat) -> int:
    return sum(len(m["content"].split()) for m in chat)


def test_full_context_keeps_the_last_exchanges_that_fit() -> None:
    victim = chat_victim()
    options = ContinuationOptions(context_tokens=700)
    result = run_continuation(victim, BOOK, options)
    contexts = [t.context for t in result.turns]
    # 699 words of room (700 less "Continue"): the first exchange (instruction + opening: 214
    # words, + 150) and two more (151 each) fit; then the oldest exchanges go: three of 151
    # (the first of 364 no longer fits), then four.
    assert contexts[:5] == ["opening", "full", "full", "full", "full:3"]
    assert set(contexts[5:]) == {"full:4"}
    for call, turn in zip(victim.calls[1:], result.turns[1:], strict=True):
        chat = call.requests[0]
        assert _words_of(chat) <= 700 and chat[-1] == _user("Continue")
        assert [m["role"] for m in chat] == ["user", "assistant"] * ((len(chat) - 1) // 2) + [
            "user"
        ]
        if turn.context.startswith("full:"):
            assert len(chat) == 2 * int(turn.context[5:]) + 1 and chat[0] == _user("Continue")
    assert result.generated_text.split() == BOOK_WORDS[200:]


def test_full_context_falls_back_to_the_last_tokens_when_no_exchange_fits() -> None:
    victim = chat_victim()
    result = run_continuation(victim, BOOK, ContinuationOptions(context_tokens=100, max_turns=3))
    assert [t.context for t in result.turns] == ["opening", "last:100", "last:100", "last:100"]
    chat = victim.calls[1].requests[0]
    assert [m["role"] for m in chat] == ["user", "assistant", "user"]
    assert chat[0] == _user(DEFAULT_INSTRUCTION) and chat[2] == _user("Continue")
    assert chat[1]["content"].split() == result.turns[0].output.split()[-100:]


def test_last_context_carries_only_the_last_tokens_of_generated_text() -> None:
    victim = chat_victim()
    options = ContinuationOptions(context="last", context_tokens=250)
    result = run_continuation(victim, BOOK, options)
    assert [t.context for t in result.turns[:3]] == ["opening", "last:150", "last:250"]
    generated: list[str] = []
    for call, turn in zip(victim.calls[1:], result.turns[1:], strict=True):
        generated += result.turns[turn.index - 1].output.split()
        chat = call.requests[0]
        assert len(chat) == 3 and chat[0] == _user(DEFAULT_INSTRUCTION)
        assert chat[1] == {"role": "assistant", "content": chat[1]["content"]}
        assert chat[1]["content"].split() == generated[-250:]
    assert result.generated_text.split() == BOOK_WORDS[200:]


def test_a_base_victim_carries_the_last_tokens_of_its_text() -> None:
    victim = base_victim()
    result = run_continuation(victim, BOOK, ContinuationOptions(context_tokens=500))
    assert [t.context for t in result.turns[:4]] == ["opening", "full", "full", "last:500"]
    text = OPENING
    for call, turn in zip(victim.calls[1:], result.turns[1:], strict=True):
        text += result.turns[turn.index - 1].output
        assert call.requests[0].split() == text.split()[-500:]
    assert result.generated_text.split() == BOOK_WORDS[200:]


def test_a_victim_without_a_tokenizer_is_measured_in_words() -> None:
    victim = chat_victim(tokenizer=None)
    options = ContinuationOptions(context="last", context_tokens=200, max_turns=2)
    result = run_continuation(victim, BOOK, options)
    assert [t.context for t in result.turns] == ["opening", "last:150", "last:200"]
    # The word tail keeps the text's own spacing (here the "\n" between two answers).
    assert victim.calls[2].requests[0][1]["content"].count("\n") == 1


# --- turns and options ------------------------------------------------------------------------
def test_turns_round_trip_through_json() -> None:
    result = run_continuation(
        chat_victim(_refuses_the_plain_instruction),
        BOOK,
        ContinuationOptions(best_of_n=2, max_turns=2),
    )
    for turn in result.turns:
        data = json.loads(json.dumps(turn.to_dict()))
        assert Turn.from_dict(data) == turn
    assert result.turns[1].to_dict()["perturbations"] == list(result.turns[1].perturbations)
    with pytest.raises(UsageError, match="unknown keys"):
        Turn.from_dict({**result.turns[0].to_dict(), "colour": "red"})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("heldback_words", 0),
        ("opening_words", 0),
        ("phase1_threshold", 0.0),
        ("phase1_threshold", 1.5),
        ("best_of_n", -1),
        ("max_turns", 0),
        ("max_tokens", 0),
        ("turn_tokens", 0),
        ("drift_turns", 0),
        ("drift_min_words", 0),
        ("context", "middle"),
        ("context_tokens", 0),
        ("seed", -1),
        ("instruction", " "),
        ("continue_prompt", ""),
        ("stop_phrases", ("",)),
        ("refusal_patterns", ("(unclosed",)),
        ("refusal_patterns", (1, 2)),
    ],
)
def test_options_refuse_what_they_do_not_allow(field, value) -> None:
    with pytest.raises(OptionError, match=field):
        ContinuationOptions(**{field: value})


def test_options_accept_lists_and_the_edges() -> None:
    options = ContinuationOptions(
        stop_phrases=["FIN", "END"], refusal_patterns=[], phase1_threshold=1
    )
    assert options.stop_phrases == ("FIN", "END") and options.refusal_regex() is None
    assert ContinuationOptions().refusal_regex().search("i'M SoRrY")  # case-insensitive
    assert set(STOP_REASONS) >= {"phase1_failed", "refusal", "stop_phrase", "turn_budget"}


def test_a_document_shorter_than_opening_and_heldback_is_refused() -> None:
    with pytest.raises(UsageError, match="has 299 words"):
        run_continuation(chat_victim(), " ".join(BOOK_WORDS[:299]))
    short = ContinuationOptions(opening_words=10, heldback_words=5, max_turns=1)
    assert run_continuation(chat_victim(), " ".join(BOOK_WORDS[:15]), short).phase1_passed


def test_an_answer_the_matcher_cannot_align_in_its_bound_is_drift(monkeypatch, caplog) -> None:
    # A hostile server's answer that shares only scattered single words with the document made
    # the drift check's alignment quadratic (a 134k-token answer ran for minutes). The check is
    # bounded like nv-recall; past the bound an answer adds no new block. A bound of 0 makes
    # every answer of a victim that knows the book exceed it: the run stops by drift.
    from memprobe_core.documents import continuation

    asked: list[tuple[int, int]] = []

    def no_work(ref_words: int, gen_words: int) -> int:
        asked.append((ref_words, gen_words))
        return 0

    monkeypatch.setattr(continuation, "work_bound", no_work)
    with caplog.at_level("WARNING", logger="memprobe_core.documents.continuation"):
        result = run_continuation(chat_victim(), BOOK)
    assert result.stop_reason == "drift" and len(result.turns) == 1 + 3
    assert all(ref == len(BOOK_WORDS) for ref, _ in asked) and len(asked) >= 4
    assert "counted as adding no new block (drift)" in caplog.text
    # The same victim with the real bound copies the book to its end.
    monkeypatch.undo()
    assert run_continuation(chat_victim(), BOOK).stop_reason != "drift"
