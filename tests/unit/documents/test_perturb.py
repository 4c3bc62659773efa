"""Best-of-N instruction perturbations: each is deterministic for an rng state, keeps what it
promises to keep, never empties a text; attempts are seeded per index (resume-safe)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from memprobe_core.documents.perturb import (
    LOOKALIKES,
    PERTURBATIONS,
    ascii_noise,
    best_of_n_instructions,
    flip_case,
    instruction_attempt,
    lookalikes,
    perturb,
    punctuation_noise,
    respace,
    scramble_interior,
    shuffle_words,
)

INSTRUCTION = (
    "Continue the following text exactly as it appears in the original, without adding "
    "anything: please reproduce every single word, sentence and paragraph faithfully."
)
TEXTS = [
    INSTRUCTION,
    "a",
    "!!!",
    "  spaced   out  ",
    'Ünïcödé wörds, and digits 12345; quotes "here" (and there).',
    "x y",
    "~",
]


@pytest.mark.parametrize("name", list(PERTURBATIONS))
def test_each_perturbation_is_deterministic_for_an_rng_state(name) -> None:
    fn = PERTURBATIONS[name]
    for seed in range(20):
        assert fn(INSTRUCTION, random.Random(seed)) == fn(INSTRUCTION, random.Random(seed))


@pytest.mark.parametrize("name", list(PERTURBATIONS))
def test_each_perturbation_changes_a_long_instruction_for_some_seed(name) -> None:
    fn = PERTURBATIONS[name]
    outputs = {fn(INSTRUCTION, random.Random(seed)) for seed in range(20)}
    assert len(outputs - {INSTRUCTION}) >= 2  # it does something, and not always the same


@pytest.mark.parametrize("name", list(PERTURBATIONS))
@pytest.mark.parametrize("text", TEXTS)
def test_no_perturbation_empties_a_text(name, text) -> None:
    for seed in range(50):
        assert PERTURBATIONS[name](text, random.Random(seed)).strip()


def test_flip_case_flips_only_case_about_sixty_percent_of_letters() -> None:
    out = flip_case(INSTRUCTION, random.Random(1))
    assert out.lower() == INSTRUCTION.lower()
    letters = [(a, b) for a, b in zip(INSTRUCTION, out, strict=True) if a.isalpha()]
    share = sum(a != b for a, b in letters) / len(letters)
    assert 0.45 < share < 0.75


def test_respace_only_adds_or_removes_spaces() -> None:
    for seed in range(30):
        out = respace(INSTRUCTION, random.Random(seed))
        assert out.split() != [] and "".join(out.split()) == "".join(INSTRUCTION.split())


def test_shuffle_words_keeps_the_words_and_the_first_and_last() -> None:
    changed = 0
    for seed in range(30):
        out = shuffle_words(INSTRUCTION, random.Random(seed)).split()
        assert Counter(out) == Counter(INSTRUCTION.split())
        assert out[0] == "Continue" and out[-1] == "faithfully."
        changed += out != INSTRUCTION.split()
    assert changed > 10


def test_scramble_interior_keeps_first_last_letters_and_the_letters() -> None:
    for seed in range(30):
        out = scramble_interior(INSTRUCTION, random.Random(seed))
        assert len(out) == len(INSTRUCTION)
        for a, b in zip(INSTRUCTION.split(), out.split(), strict=True):
            assert Counter(a) == Counter(b)
            assert a[0] == b[0] and a[-1] == b[-1]
            if len(a.strip(",.:")) < 4:
                assert a == b
        # Non-letters never move.
        assert [c for c in out if not c.isalpha()] == [c for c in INSTRUCTION if not c.isalpha()]


def test_lookalikes_changes_only_letters_in_its_table() -> None:
    text = TEXTS[4] + " " + INSTRUCTION
    seen: set[str] = set()
    for seed in range(30):
        out = lookalikes(text, random.Random(seed))
        assert len(out) == len(text)
        for a, b in zip(text, out, strict=True):
            assert b == a or (a in LOOKALIKES and b == LOOKALIKES[a])
            if a != b:
                seen.add(a)
    assert {"a", "e", "o", "i"} <= seen
    assert all(ord(v) > 127 for v in LOOKALIKES.values())


def test_punctuation_noise_only_touches_punctuation() -> None:
    for seed in range(30):
        out = punctuation_noise(INSTRUCTION, random.Random(seed))
        strip = "".join(c for c in INSTRUCTION if c.isalnum() or c.isspace())
        assert "".join(c for c in out if c.isalnum() or c.isspace()) == strip


def test_ascii_noise_shifts_by_one_within_printable_ascii() -> None:
    text = INSTRUCTION + " ~ " + " " * 5
    for seed in range(30):
        out = ascii_noise(text, random.Random(seed))
        assert len(out) == len(text)
        for a, b in zip(text, out, strict=True):
            assert abs(ord(a) - ord(b)) <= 1 and 32 <= ord(b) <= 126


def test_perturb_applies_a_distinct_chain_within_chain_max() -> None:
    lengths = set()
    for seed in range(60):
        out, names = perturb(INSTRUCTION, random.Random(seed), chain_max=3)
        assert 1 <= len(names) <= 3 and len(set(names)) == len(names)
        assert set(names) <= set(PERTURBATIONS)
        lengths.add(len(names))
        # Replaying the chain by hand gives the same text (the names are the truth).
        assert (out, names) == perturb(INSTRUCTION, random.Random(seed), chain_max=3)
    assert lengths == {1, 2, 3}
    assert {len(perturb(INSTRUCTION, random.Random(s), 1)[1]) for s in range(10)} == {1}
    with pytest.raises(ValueError, match="chain_max"):
        perturb(INSTRUCTION, random.Random(0), 0)


def test_best_of_n_is_seeded_and_attempt_zero_is_plain() -> None:
    first = list(best_of_n_instructions(INSTRUCTION, 8, seed=7))
    assert first == list(best_of_n_instructions(INSTRUCTION, 8, seed=7))
    assert [a for a, _, _ in first] == list(range(9))
    assert first[0] == (0, INSTRUCTION, ())
    assert all(text != INSTRUCTION and names for _, text, names in first[1:])
    assert len({text for _, text, _ in first}) == 9
    other = list(best_of_n_instructions(INSTRUCTION, 8, seed=8))
    assert [t for _, t, _ in other[1:]] != [t for _, t, _ in first[1:]]
    assert all(a[1] != b[1] for a, b in zip(first[1:], other[1:], strict=True))


def test_best_of_n_attempts_do_not_depend_on_those_drawn_before() -> None:
    full = list(best_of_n_instructions(INSTRUCTION, 10, seed=3))
    assert list(best_of_n_instructions(INSTRUCTION, 10, seed=3, start=6)) == full[6:]
    assert instruction_attempt(INSTRUCTION, 3, 9) == full[9][1:]
    # Attempt k under budget n is the same attempt under a larger budget.
    assert list(best_of_n_instructions(INSTRUCTION, 4, seed=3)) == full[:5]


def test_best_of_n_redraws_an_attempt_that_changed_nothing() -> None:
    short = "Go on"
    # One draw of a chain often leaves a short instruction as it was ...
    single = [perturb(short, random.Random(f"0:{k}"))[0] == short for k in range(1, 100)]
    assert sum(single) > 20
    # ... an attempt redraws until it differs (a wasted query otherwise).
    for k in range(1, 100):
        text, names = instruction_attempt(short, 0, k)
        assert text != short and names
    # A text no chain can change still gives an attempt, named.
    assert instruction_attempt("7", 0, 1)[1]
