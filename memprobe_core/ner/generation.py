"""Prompt generation by an LLM through memprobe's ``Generator`` contract, with parsing and checks.

The attacker backend is asked, per prompt type, for a few sentences about a person with a
placeholder where the name goes. Models write the placeholder in many ways (``[NAME]``,
``{name}``, ``<name>``, ``[PERSON]``); all are normalised to the slot ``{name}``. Every line of
every completion is kept only if it is a sentence with exactly one slot, of plausible length, of
the asked type (by its final punctuation, for questions and exclamations) and not a duplicate;
every other line is reported with the reason it was rejected.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memprobe_core.models.base import Generator
from memprobe_core.ner.prompts import (
    PROMPT_TYPES,
    SLOT,
    Prompt,
    PromptError,
    prompt_length,
)

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, str], None]

_TYPE_HINTS = {
    "declarative": "Each sentence is a plain statement ending with a period.",
    "exclamatory": "Each sentence is an exclamation ending with an exclamation mark (!).",
    "imperative": "Each sentence is a command or request (it starts with a verb), ending with a period.",
    "interrogative": "Each sentence is a question ending with a question mark (?).",
}
META_PROMPT = (
    "Write {k} different {type} sentences that mention one person. Where the person's name "
    "goes, write the placeholder [NAME] exactly once per sentence. {hint} Write one sentence "
    "per line and nothing else."
)
_PLACEHOLDER = re.compile(
    r"\[\s*(?:name|person|per|person'?s name)\s*\]|\{\{?\s*(?:name|person)\s*\}?\}|<\s*(?:name|person)\s*>",
    re.IGNORECASE,
)
_BULLET = re.compile(r"^\s*(?:[-*•·]+|\(?\d{1,3}[.):]|[a-z][.)])\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Rejected:
    """A generated line that was not kept, and why."""

    text: str
    reason: str
    type: str


@dataclass
class GenerationReport:
    """What an LLM prompt-generation run produced.

    Attributes:
        prompts: the kept prompts (``source == "llm"``), each with one ``{name}`` slot.
        rejected: every rejected line with its reason.
        requests: chats sent to the generator.
        completions: completions received.
    """

    prompts: list[Prompt] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    requests: int = 0
    completions: int = 0

    def rejection_counts(self) -> dict[str, int]:
        """How many lines were rejected for each reason."""
        counts: dict[str, int] = {}
        for r in self.rejected:
            counts[r.reason] = counts.get(r.reason, 0) + 1
        return counts


def meta_prompt(prompt_type: str, k: int = 5) -> str:
    """The instruction sent to the LLM for ``k`` sentences of ``prompt_type``."""
    if prompt_type not in PROMPT_TYPES:
        raise PromptError(f"unknown prompt type {prompt_type!r}; use one of {PROMPT_TYPES}")
    return META_PROMPT.format(k=k, type=prompt_type, hint=_TYPE_HINTS[prompt_type])


def parse_generated(
    text: str,
    prompt_type: str,
    *,
    seen: set[str] | None = None,
    min_words: int = 3,
    max_words: int = 40,
    check_type: bool = True,
) -> tuple[list[Prompt], list[Rejected]]:
    """Split one completion into candidate prompts and keep the valid ones.

    Args:
        text: the completion.
        prompt_type: the type that was asked for (given to the kept prompts).
        seen: texts already kept (duplicates are rejected); updated in place.
        min_words / max_words: plausible sentence length, slot counted as one word.
        check_type: reject questions without ``?`` and exclamations without ``!``.

    Returns:
        ``(kept, rejected)``.
    """
    seen = set() if seen is None else seen
    kept: list[Prompt] = []
    rejected: list[Rejected] = []
    for raw in text.splitlines():
        line = _BULLET.sub("", raw.strip()).strip().strip("\"'“”‘’`").strip()
        if not line:
            continue
        line = _PLACEHOLDER.sub(SLOT, line)
        slots = line.count(SLOT)
        reason = None
        if slots == 0:
            reason = "no name slot"
        elif slots > 1:
            reason = f"{slots} name slots"
        elif not min_words <= prompt_length(line) <= max_words:
            reason = f"length {prompt_length(line)} words outside [{min_words}, {max_words}]"
        elif check_type and prompt_type == "interrogative" and not line.endswith("?"):
            reason = "not a question"
        elif check_type and prompt_type == "exclamatory" and not line.endswith("!"):
            reason = "not an exclamation"
        elif line in seen:
            reason = "duplicate"
        if reason:
            rejected.append(Rejected(line, reason, prompt_type))
            continue
        seen.add(line)
        kept.append(Prompt(line, prompt_type, "llm"))
    return kept, rejected


def generate_prompts(
    generator: Generator,
    *,
    n_per_type: int = 10,
    types: Sequence[str] = PROMPT_TYPES,
    per_request: int = 5,
    temperature: float = 1.0,
    max_new_tokens: int = 256,
    seed: int | None = 0,
    max_rounds: int = 3,
    check_type: bool = True,
    on_progress: ProgressFn | None = None,
) -> GenerationReport:
    """Ask an LLM for ``n_per_type`` prompts of each type; keep the valid ones.

    Each round sends one chat per type still short of prompts, with ``n`` samples each, and parses
    every line; it stops when every type has enough or after ``max_rounds`` rounds.

    Args:
        generator: any backend implementing the ``Generator`` contract (the attacker model).
        n_per_type: prompts wanted per type.
        types: prompt types to generate.
        per_request: sentences asked for in one completion.
        temperature: sampling temperature (> 0 so samples differ).
        max_new_tokens: cap per completion.
        seed: base seed (round ``r`` uses ``seed + r``); ``None`` for unseeded sampling.
        max_rounds: how many generation rounds at most.
        check_type: reject questions without ``?`` and exclamations without ``!``.
        on_progress: ``on_progress(done, total, message)`` after each round.

    Returns:
        The kept prompts (at most ``n_per_type`` per type) and every rejected line.
    """
    if n_per_type < 1 or per_request < 1 or max_rounds < 1:
        raise ValueError("n_per_type, per_request and max_rounds must all be at least 1")
    for t in types:
        if t not in PROMPT_TYPES:
            raise PromptError(f"unknown prompt type {t!r}; use some of {PROMPT_TYPES}")
    report = GenerationReport()
    seen: set[str] = set()
    kept: dict[str, list[Prompt]] = {t: [] for t in types}
    for round_index in range(max_rounds):
        short = [t for t in types if len(kept[t]) < n_per_type]
        if not short:
            break
        missing = max(n_per_type - len(kept[t]) for t in short)
        n = max(1, math.ceil(missing / per_request))
        chats = [[{"role": "user", "content": meta_prompt(t, per_request)}] for t in short]
        rows = generator.generate(
            chats,
            n=n,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=None if seed is None else seed + round_index,
        )
        report.requests += len(chats)
        for prompt_type, row in zip(short, rows):
            for completion in row:
                report.completions += 1
                good, bad = parse_generated(
                    completion.text, prompt_type, seen=seen, check_type=check_type
                )
                room = n_per_type - len(kept[prompt_type])
                kept[prompt_type].extend(good[:room])
                report.rejected.extend(bad)
        if on_progress:
            on_progress(
                round_index + 1,
                max_rounds,
                f"round {round_index + 1}: {sum(len(v) for v in kept.values())} prompts kept",
            )
    report.prompts = [p for t in types for p in kept[t]]
    too_few = {t: len(kept[t]) for t in types if len(kept[t]) < n_per_type}
    if too_few:
        log.warning(
            "LLM prompt generation: fewer prompts than asked for %s after %d rounds (%s)",
            too_few,
            max_rounds,
            report.rejection_counts(),
        )
    return report
