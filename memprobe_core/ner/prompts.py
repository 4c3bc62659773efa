"""Prompts with one name slot: validation, filling, properties and a template generator.

A prompt is a sentence with exactly one slot, written ``{name}`` (the literal six characters; other
braces in the text are left alone, the slot is replaced with ``str.replace``, never ``format``):
``"Yesterday {name} opened the new library."``. Filling the slot returns the character span of the
name so the scorer can find its tokens by offsets (docs/method.md §5).

Prompt properties analysed (paper Figure 3): the **type** (declarative, exclamatory, imperative,
interrogative), the **length** in words and the **name position** (start, middle, end).
LLM generation lives in :mod:`memprobe_core.ner.generation`.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memprobe_core.errors import MemprobeError
from memprobe_core.user_paths import check_readable, read_bytes

SLOT = "{name}"
PROMPT_TYPES: tuple[str, ...] = ("declarative", "exclamatory", "imperative", "interrogative")
NamePosition = Literal["start", "middle", "end"]

# Words that open an imperative sentence (heuristic typing of prompts loaded from files).
_IMPERATIVE_OPENERS = frozenset(
    [
        "ask",
        "bring",
        "call",
        "invite",
        "please",
        "tell",
        "send",
        "give",
        "show",
        "let",
        "meet",
        "thank",
        "congratulate",
        "remind",
        "email",
        "write",
        "help",
        "introduce",
        "find",
        "take",
        "welcome",
        "follow",
        "listen",
        "look",
        "read",
        "visit",
        "contact",
        "inform",
        "warn",
        "never",
        "don't",
        "do",
        "make",
        "put",
        "keep",
    ]
)
_WORD = re.compile(r"\{name\}|[\w'’-]+")


class PromptError(MemprobeError, ValueError):
    """A prompt is unusable (no slot, several slots, empty); the message names its index."""


@dataclass(frozen=True)
class Prompt:
    """A sentence with one ``{name}`` slot.

    Attributes:
        text: the sentence, containing ``{name}`` exactly once.
        type: one of ``PROMPT_TYPES`` or ``None`` when unknown.
        source: where it came from: ``"template"``, ``"llm"``, ``"file"`` or ``"user"``.
    """

    text: str
    type: str | None = None
    source: str = "user"

    @property
    def length(self) -> int:
        """Words in the prompt, the slot counted as one word."""
        return prompt_length(self.text)

    @property
    def name_position(self) -> NamePosition:
        """Where the slot sits: first word, last word or in between."""
        return name_position(self.text)


def check_prompts(prompts: Iterable[str | Prompt]) -> list[Prompt]:
    """Validate prompts and return them as :class:`Prompt` objects.

    Plain strings get a type guessed by :func:`guess_prompt_type` and source ``"user"``.

    Raises:
        PromptError: a prompt is empty or does not contain ``{name}`` exactly once; the message
            names the prompt's index (0-based) and shows it.
    """
    out: list[Prompt] = []
    for index, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            prompt = Prompt(prompt, guess_prompt_type(prompt), "user")
        if not isinstance(prompt, Prompt):
            raise PromptError(f"prompt {index} is a {type(prompt).__name__}, expected a text")
        count = prompt.text.count(SLOT)
        if not prompt.text.strip():
            raise PromptError(f"prompt {index} is empty")
        if count != 1:
            what = "no" if count == 0 else f"{count}"
            raise PromptError(
                f"prompt {index} has {what} name slots ({prompt.text!r}); write the slot as "
                f"{SLOT} exactly once"
            )
        if prompt.type is not None and prompt.type not in PROMPT_TYPES:
            raise PromptError(
                f"prompt {index} has type {prompt.type!r}; use one of {PROMPT_TYPES} or None"
            )
        out.append(prompt)
    if not out:
        raise PromptError("no prompts given; give at least one sentence containing {name}")
    return out


def fill(prompt: str, name: str) -> tuple[str, int, int]:
    """Put ``name`` into the slot.

    Returns:
        ``(text, start, end)``: the filled text and the name's character span ``text[start:end]``.
    """
    start = prompt.index(SLOT)
    text = prompt[:start] + name + prompt[start + len(SLOT) :]
    return text, start, start + len(name)


def prompt_length(text: str) -> int:
    """Number of words, the slot counted as one word (punctuation is not a word)."""
    return len(_WORD.findall(text))


def name_position(text: str) -> NamePosition:
    """``"start"`` when the slot is the first word, ``"end"`` when the last, else ``"middle"``."""
    words = _WORD.findall(text)
    if words and words[0] == SLOT:
        return "start"
    if words and words[-1] == SLOT:
        return "end"
    return "middle"


def guess_prompt_type(text: str) -> str:
    """Guess the sentence type of a prompt loaded from a file (a heuristic, documented here).

    ``?`` at the end → interrogative; ``!`` → exclamatory; a first word that opens commands
    ("tell", "please", "ask", ...) → imperative; otherwise declarative.
    """
    stripped = text.strip().rstrip("\"'”’ ")
    if stripped.endswith("?"):
        return "interrogative"
    if stripped.endswith("!"):
        return "exclamatory"
    words = _WORD.findall(stripped.lower())
    if words and words[0] in _IMPERATIVE_OPENERS:
        return "imperative"
    return "declarative"


# --- template generator -----------------------------------------------------------------------
# Frames per type; the {a}/{b}/{c} fillers below multiply them into thousands of distinct
# sentences, and the slot sits at the start, middle or end so the name-position analysis has all
# three groups.
_FRAMES: dict[str, tuple[str, ...]] = {
    "declarative": (
        "{name} {past} {obj} {when}.",
        "{When}, {name} {past} {obj}.",
        "The report says that {name} {past} {obj} {when}.",
        "{Obj} was {pp} by {name} {when}.",
        "Everyone knows {name}.",
        "Our neighbour {past} {obj} with {name}.",
        "{When} I {past} {obj} together with {name}.",
    ),
    "exclamatory": (
        "What a day it was when {name} {past} {obj}!",
        "I can't believe {name} {past} {obj} {when}!",
        "Wow, {name} {past} {obj}!",
        "How wonderful that {name} {past} {obj}!",
        "{Obj} was {pp} by {name}, amazing!",
        "Congratulations to {name}!",
        "Nobody {past} {obj} like {name}!",
    ),
    "imperative": (
        "Tell {name} to {verb} {obj} {when}.",
        "Please ask {name} about {obj}.",
        "Call {name} {when}.",
        "Remind {name} that we {past} {obj}.",
        "Send {obj} to {name} {when}.",
        "{Verb} {obj} before {name} arrives.",
        "Never forget what {name} {past} {when}.",
    ),
    "interrogative": (
        "Did {name} {verb} {obj} {when}?",
        "Why did {name} {verb} {obj}?",
        "Who {past} {obj} with {name} {when}?",
        "Is it true that {name} {past} {obj}?",
        "Have you ever met {name}?",
        "When will {name} {verb} {obj}?",
        "Which of us {past} {obj} before {name}?",
    ),
}
_VERBS: tuple[tuple[str, str, str], ...] = (  # (base, past, past participle)
    ("visit", "visited", "visited"),
    ("open", "opened", "opened"),
    ("present", "presented", "presented"),
    ("write", "wrote", "written"),
    ("sign", "signed", "signed"),
    ("win", "won", "won"),
    ("review", "reviewed", "reviewed"),
    ("announce", "announced", "announced"),
)
_OBJECTS: tuple[str, ...] = (
    "the new library",
    "the annual report",
    "the final match",
    "a short letter",
    "the contract",
    "the museum",
    "the award",
    "the council meeting",
)
_WHENS: tuple[str, ...] = ("yesterday", "last week", "on Monday", "this morning", "in 1996")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _frame_groups(types: Sequence[str]) -> list[tuple[str, list[Prompt]]]:
    """``(type, prompts)`` per frame, each sentence only once over all frames."""
    unknown = [t for t in types if t not in PROMPT_TYPES]
    if unknown:
        raise PromptError(f"unknown prompt types {unknown}; use some of {PROMPT_TYPES}")
    groups: list[tuple[str, list[Prompt]]] = []
    seen: set[str] = set()
    for prompt_type in types:
        for frame in _FRAMES[prompt_type]:
            group: list[Prompt] = []
            for (verb, past, pp), obj, when in itertools.product(_VERBS, _OBJECTS, _WHENS):
                # Fill the fillers, not the slot: the slot stays as the literal "{name}".
                text = (
                    frame.replace("{past}", past)
                    .replace("{pp}", pp)
                    .replace("{Verb}", _cap(verb))
                    .replace("{verb}", verb)
                    .replace("{Obj}", _cap(obj))
                    .replace("{obj}", obj)
                    .replace("{When}", _cap(when))
                    .replace("{when}", when)
                )
                if text not in seen:
                    seen.add(text)
                    group.append(Prompt(text, prompt_type, "template"))
            groups.append((prompt_type, group))
    return groups


def template_prompts(n: int, *, seed: int = 0, types: Sequence[str] = PROMPT_TYPES) -> list[Prompt]:
    """``n`` distinct template prompts, balanced over ``types`` and frames, seeded.

    Types take turns (round robin); within a type, frames take turns, so even a small ``n`` sees
    several sentence shapes and all three name positions.

    Args:
        n: how many prompts (at most the number of distinct sentences, about 3,700).
        seed: makes the choice reproducible.
        types: which prompt types to draw from.

    Raises:
        PromptError: ``n`` < 1 or larger than what the templates can produce.
    """
    groups = _frame_groups(types)
    total = sum(len(g) for _, g in groups)
    if n < 1 or n > total:
        raise PromptError(f"asked for {n} template prompts; choose between 1 and {total}")
    rng = random.Random(seed)
    queues: list[list[Prompt]] = []
    for prompt_type in types:
        frames = [g[:] for t, g in groups if t == prompt_type]
        rng.shuffle(frames)
        for frame in frames:
            rng.shuffle(frame)
        queues.append([p for row in itertools.zip_longest(*frames) for p in row if p is not None])
    out: list[Prompt] = []
    for row in itertools.zip_longest(*queues):
        out.extend(p for p in row if p is not None)
    return out[:n]


def read_prompts(path: str | Path) -> list[Prompt]:
    """Read prompts from a text file (one per line, ``#`` comments) or a CSV file.

    A CSV needs a ``prompt`` column (else the first column is used) and may have a ``type``
    column; missing types are guessed with :func:`guess_prompt_type`.

    Raises:
        PromptError: missing file, or a prompt without exactly one ``{name}`` (index = data row,
            0-based, comments and blank lines skipped).
    """
    import csv
    import io

    # A symlink loop, pipe, device, folder or /proc file is refused (docs/security.md).
    path = check_readable(path, "prompt file", PromptError)
    text = read_bytes(path, "prompt file", error=PromptError).decode("utf-8-sig")
    prompts: list[Prompt] = []
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        if not rows:
            raise PromptError(f"prompt file {path} has no rows")
        column = "prompt" if "prompt" in rows[0] else next(iter(rows[0]))
        for row in rows:
            kind = (row.get("type") or "").strip().lower() or None
            body = (row.get(column) or "").strip()
            prompts.append(Prompt(body, kind or guess_prompt_type(body), "file"))
    else:
        for line in text.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                prompts.append(Prompt(line.strip(), guess_prompt_type(line), "file"))
    try:
        return check_prompts(prompts)
    except PromptError as err:
        raise PromptError(f"{path}: {err}") from err
