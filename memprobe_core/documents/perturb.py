"""Seeded Best-of-N perturbations of an instruction (Hughes et al. 2024, "Best-of-N
Jailbreaking", arXiv:2412.03556), used by phase 1 of continuation extraction
(:mod:`.continuation`; Ahmed, Cooper, Koyejo & Liang 2026, "Extracting books from production
language models", who jailbreak the opening probe of production models this way).

Best-of-N (BoN) sends the same request again and again, each time with the *instruction* text
randomly augmented, until one variant gets past the model's refusal. The augmentations keep the
request readable to the model but move it away from the exact strings a refusal was trained on.
Only the instruction is perturbed: the document's opening is sent untouched, since the model
must recognise it verbatim to continue it.

Each perturbation is a pure function ``(text, rng) -> text``: for a given ``random.Random`` state
it always returns the same text, and it never turns a non-empty text into an empty one.
:func:`best_of_n_instructions` seeds attempt ``k`` with ``random.Random(f"{seed}:{k}")`` (a
string seed is hashed with SHA-512, so the same on every machine and process), so attempt ``k``
is the same whether or not attempts ``1..k-1`` were drawn in this process: a resumed run redraws
exactly the instructions the killed one sent.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator

Perturbation = Callable[[str, random.Random], str]

# BoN's probabilities (Hughes et al. 2024, §2.1: scrambling 0.6, capitalisation 0.6, ASCII
# noising 0.06); the others are memprobe's, kept small so the instruction stays readable.
FLIP_CASE_P = 0.6
SCRAMBLE_P = 0.6
ASCII_NOISE_P = 0.06
RESPACE_P = 0.1
SHUFFLE_P = 0.1
LOOKALIKE_P = 0.1
PUNCTUATION_P = 0.05
PUNCTUATION_DROP_P = 0.3
PUNCTUATION_MARKS = ",.;:!?-"
# Redraws of an attempt whose chain happened to change nothing (a short instruction, low
# probabilities): a Best-of-N attempt equal to the plain instruction wastes a query.
MAX_REDRAWS = 10

# Latin letters and a Unicode homoglyph of each (Cyrillic, except where noted).
LOOKALIKES: dict[str, str] = {
    "a": "\u0430",  # а
    "c": "\u0441",  # с
    "e": "\u0435",  # е
    "i": "\u0456",  # і (Ukrainian i)
    "o": "\u043e",  # о
    "p": "\u0440",  # р
    "x": "\u0445",  # х
    "y": "\u0443",  # у
    "A": "\u0410",  # А
    "B": "\u0412",  # В
    "C": "\u0421",  # С
    "E": "\u0415",  # Е
    "H": "\u041d",  # Н
    "I": "\u0406",  # І
    "K": "\u041a",  # К
    "M": "\u041c",  # М
    "O": "\u041e",  # О
    "P": "\u0420",  # Р
    "T": "\u0422",  # Т
    "X": "\u0425",  # Х
}

_WORDS_AND_SPACES = re.compile(r"(\s+)")
_LETTER_RUN = re.compile(r"[^\W\d_]+")


def _kept(original: str, perturbed: str) -> str:
    """``perturbed``, or ``original`` where the perturbation would leave nothing readable."""
    return perturbed if perturbed.strip() or not original.strip() else original


def flip_case(text: str, rng: random.Random) -> str:
    """Flip each letter's case with probability 0.6 (BoN's random capitalisation: ``cOnTiNuE``).

    Refusal training sees mostly well-cased requests; the letters still spell the same words.
    """
    out = [ch.swapcase() if ch.isalpha() and rng.random() < FLIP_CASE_P else ch for ch in text]
    return "".join(out)


def respace(text: str, rng: random.Random) -> str:
    """At word boundaries (single spaces between two non-space characters), drop the space or
    double it, each boundary with probability 0.1 (split between the two).

    Changes the instruction's tokenisation (a word glued to the next is tokenised anew) while a
    reader still parses it.
    """
    out: list[str] = []
    for i, ch in enumerate(text):
        inner = 0 < i < len(text) - 1 and not text[i - 1].isspace() and not text[i + 1].isspace()
        if ch == " " and inner and rng.random() < RESPACE_P:
            out.append("" if rng.random() < 0.5 else "  ")
        else:
            out.append(ch)
    return "".join(out)  # only spaces between two non-spaces go: never empty


def shuffle_words(text: str, rng: random.Random) -> str:
    """Swap about 10% of the adjacent pairs of interior words (the first and last words stay).

    A light reordering: the request's meaning survives, its exact word sequence does not.
    """
    parts = _WORDS_AND_SPACES.split(text)  # words at even indexes, whitespace at odd ones
    words = [k for k in range(0, len(parts), 2) if parts[k]]
    interior = words[1:-1]
    i = 0
    while i < len(interior) - 1:
        if rng.random() < SHUFFLE_P:
            a, b = interior[i], interior[i + 1]
            parts[a], parts[b] = parts[b], parts[a]
            i += 2  # a swapped word moves once
        else:
            i += 1
    return "".join(parts)


def lookalikes(text: str, rng: random.Random) -> str:
    """Replace each letter that has a homoglyph in :data:`LOOKALIKES` with it, with probability
    0.1 (``a`` → Cyrillic ``а``).

    The text looks the same but is tokenised into rarer tokens, away from refusal-trained ones.
    """
    out = [LOOKALIKES[ch] if ch in LOOKALIKES and rng.random() < LOOKALIKE_P else ch for ch in text]
    return "".join(out)


def punctuation_noise(text: str, rng: random.Random) -> str:
    """Occasionally drop a punctuation mark (probability 0.3 each) or put one after a word
    (probability 0.05 each).

    Noise a reader skips over, which still changes the token sequence.
    """
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch in PUNCTUATION_MARKS or ch in "'\"()":
            if rng.random() < PUNCTUATION_DROP_P:
                continue
            out.append(ch)
            continue
        out.append(ch)
        word_end = ch.isalnum() and (i + 1 == len(text) or text[i + 1].isspace())
        if word_end and rng.random() < PUNCTUATION_P:
            out.append(rng.choice(PUNCTUATION_MARKS))
    return _kept(text, "".join(out))


def scramble_interior(text: str, rng: random.Random) -> str:
    """For each word of 4 letters or more, with probability 0.6, shuffle its interior letters
    and keep the first and last (BoN's word scrambling: ``cnotinue``).

    People (and models) still read a word whose first and last letters are in place; the
    request's tokens are no longer the ones a refusal was trained on.
    """

    def scramble(match: re.Match[str]) -> str:
        word = match.group(0)
        if len(word) < 4 or rng.random() >= SCRAMBLE_P:
            return word
        interior = list(word[1:-1])
        rng.shuffle(interior)
        return word[0] + "".join(interior) + word[-1]

    return _LETTER_RUN.sub(scramble, text)


def ascii_noise(text: str, rng: random.Random) -> str:
    """Shift each printable ASCII character's code point by ±1 with probability 0.06, staying
    printable (BoN's ASCII noising: ``e`` → ``f`` or ``d``).

    Typos a model reads through; they also move the request off refusal-trained strings.
    """
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if 32 <= code <= 126 and rng.random() < ASCII_NOISE_P:
            step = rng.choice((-1, 1))
            if not 32 <= code + step <= 126:
                step = -step
            out.append(chr(code + step))
        else:
            out.append(ch)
    return _kept(text, "".join(out))


PERTURBATIONS: dict[str, Perturbation] = {
    "flip_case": flip_case,
    "respace": respace,
    "shuffle_words": shuffle_words,
    "lookalikes": lookalikes,
    "punctuation_noise": punctuation_noise,
    "scramble_interior": scramble_interior,
    "ascii_noise": ascii_noise,
}


def perturb(text: str, rng: random.Random, chain_max: int = 3) -> tuple[str, tuple[str, ...]]:
    """Apply a random chain of 1..``chain_max`` distinct perturbations, in the drawn order.

    Returns:
        ``(perturbed text, names of the perturbations applied, in order)``.

    Raises:
        ValueError: ``chain_max`` below 1.
    """
    if chain_max < 1:
        raise ValueError(f"chain_max={chain_max}: give 1 or more")
    count = rng.randint(1, min(chain_max, len(PERTURBATIONS)))
    names = tuple(rng.sample(list(PERTURBATIONS), count))
    for name in names:
        text = PERTURBATIONS[name](text, rng)
    return text, names


def instruction_attempt(
    instruction: str, seed: int | str, attempt: int, chain_max: int = 3
) -> tuple[str, tuple[str, ...]]:
    """Best-of-N attempt ``attempt`` of ``instruction``: attempt 0 is the instruction itself;
    attempt ``k >= 1`` is drawn from ``random.Random(f"{seed}:{k}")`` alone (redrawn from the
    same generator, up to :data:`MAX_REDRAWS` times, while the chain changed nothing).

    Returns:
        ``(instruction as sent, names of the perturbations applied)``.
    """
    if attempt < 0:
        raise ValueError(f"attempt={attempt}: give 0 or more")
    if attempt == 0:
        return instruction, ()
    rng = random.Random(f"{seed}:{attempt}")
    text, names = perturb(instruction, rng, chain_max)
    for _ in range(MAX_REDRAWS):
        if text != instruction:
            break
        text, names = perturb(instruction, rng, chain_max)
    return text, names


def best_of_n_instructions(
    instruction: str, n: int, seed: int | str, *, start: int = 0, chain_max: int = 3
) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """The Best-of-N attempts ``start..n`` of ``instruction``: ``(attempt index, text, names)``.

    Attempt 0 is the unperturbed instruction (no names); attempts ``1..n`` are perturbed, each
    from its own seeded generator (:func:`instruction_attempt`), so ``start`` resumes a budget
    part-spent by an earlier run with exactly the instructions it would have sent next.
    """
    if n < 0:
        raise ValueError(f"n={n}: give 0 or more attempts")
    for attempt in range(max(start, 0), n + 1):
        text, names = instruction_attempt(instruction, seed, attempt, chain_max)
        yield attempt, text, names
