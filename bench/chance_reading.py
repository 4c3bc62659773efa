"""The chance reading's error rates on the built-in corpus (docs/method.md §2, "Chance level of
Mem", Limitations): unrelated texts called "above chance", and exact copies found.

Length 60, whitespace cut, each snippet's prefix as the prompt. Unrelated outputs: the text of
another snippet (5 per snippet, 40 snippets, seeded); copies: the true suffix (60 snippets).
Compared: the bare rank test on whole outputs (``beats`` without a prompt or a suffix) and the
rule (the prompt's words and function words not credited, the level plus its spread).

    .venv/bin/python bench/chance_reading.py
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memprobe_core.chance import reference_chance, reference_suffixes
from memprobe_core.config import ScoringConfig
from memprobe_core.metrics import mem
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import DataError, split

LENGTH = 60


def bare(output: str, m: float, pool: list[tuple[str, int]], scoring: ScoringConfig) -> bool:
    """The earlier reading: the whole output's Mem above the level, no margin."""
    level = reference_chance(output, m, pool, scoring).level
    return level is not None and m > level


def main() -> None:
    scoring = ScoringConfig()

    def cut(snippet):  # type: ignore[no-untyped-def]
        return split(snippet, "whitespace", LENGTH)

    pieces = {}
    for snippet in demo_corpus():
        try:
            pieces[snippet.id] = cut(snippet)
        except DataError:
            continue
    rng = random.Random(0)
    ids = list(pieces)
    unrelated = {"bare": 0, "rule": 0, "n": 0}
    for own in rng.sample(ids, 40):
        piece = pieces[own]
        pool, _ = reference_suffixes(own, piece.snippet.domain, cut)
        suffix = (piece.suffix, piece.suffix_tokens)
        for other in rng.sample([i for i in ids if i != own], 5):
            output = pieces[other].text
            m = mem(output, piece.suffix, scoring, suffix_tokens=piece.suffix_tokens)
            unrelated["n"] += 1
            unrelated["bare"] += bare(output, m, pool, scoring)
            ruled = reference_chance(output, m, pool, scoring, prompt=piece.prefix, suffix=suffix)
            unrelated["rule"] += bool(ruled.beats)
    copies = {"bare": 0, "rule": 0, "n": 0}
    for own in rng.sample(ids, 60):
        piece = pieces[own]
        pool, _ = reference_suffixes(own, piece.snippet.domain, cut)
        suffix = (piece.suffix, piece.suffix_tokens)
        copies["n"] += 1
        copies["bare"] += bare(piece.suffix, 1.0, pool, scoring)
        ruled = reference_chance(
            piece.suffix, 1.0, pool, scoring, prompt=piece.prefix, suffix=suffix
        )
        copies["rule"] += bool(ruled.beats)
    n = unrelated["n"]
    print(
        f"unrelated texts called above chance: bare {unrelated['bare']}/{n}, rule {unrelated['rule']}/{n}"
    )
    n = copies["n"]
    print(f"exact copies found: bare {copies['bare']}/{n}, rule {copies['rule']}/{n}")


if __name__ == "__main__":
    main()
