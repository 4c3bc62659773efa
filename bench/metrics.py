"""Speed of memprobe's ROUGE-L fast path against rouge-score, side by side in one run.

Run: ``python bench/metrics.py``. Scenarios (paper-like, seeded English-ish text):
  (a) 100 references × 24 candidates, ~70 tokens each (a round of Algorithm 1 over an audit);
  (b) one 333-token reference (the 500-token setting's suffix) × 24 candidates of 333 tokens.
Prints both times and the ratio, and exits 1 if any score differs from rouge-score's (all three
variants, stemmer on, as in the paper). The stem cache is cleared before each timed fast run, so
the figures do not depend on words seen in an earlier scenario.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rouge_score.rouge_scorer import RougeScorer

from memprobe_core import metrics

_VOCAB = [
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "one",
    "all",
    "we",
    "their",
    "has",
    "been",
    "had",
    "would",
    "when",
    "will",
    "more",
    "if",
    "no",
    "out",
    "so",
    "said",
    "what",
    "up",
    "its",
    "about",
    "into",
    "than",
    "them",
    "can",
    "only",
    "other",
    "new",
    "some",
    "could",
    "time",
    "these",
    "two",
    "may",
    "then",
    "do",
    "first",
    "any",
    "my",
    "now",
    "such",
    "like",
    "our",
    "over",
    "man",
    "me",
    "even",
    "most",
    "made",
    "after",
    "also",
    "did",
    "many",
    "before",
    "must",
    "through",
    "back",
    "years",
    "where",
    "much",
    "your",
    "way",
    "well",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "how",
    "too",
    "little",
    "state",
    "good",
    "very",
    "make",
    "world",
    "still",
    "own",
    "see",
    "men",
    "work",
    "long",
    "get",
    "here",
    "between",
    "both",
    "life",
    "being",
    "under",
    "never",
    "day",
    "same",
    "another",
    "know",
    "while",
    "last",
    "might",
    "us",
    "great",
    "old",
    "year",
    "off",
    "come",
    "since",
    "against",
    "go",
    "came",
    "right",
    "used",
    "take",
    "three",
    "running",
    "models",
    "training",
    "data",
    "language",
    "generated",
    "questions",
    "memorization",
    "extraction",
    "results",
    "experiments",
    "showed",
    "increasing",
    "privacy",
    "attacks",
    "learning",
    "networks,",
    "researchers.",
    "systems;",
    "however,",
    "(for",
    "example)",
    "2023",
    "42",
]


def _english(rng: random.Random, n: int) -> str:
    # Zipf-like word frequencies: a few words very common, as in real text.
    weights = [1.0 / (i + 1) for i in range(len(_VOCAB))]
    return " ".join(rng.choices(_VOCAB, weights=weights, k=n))


def _candidate(rng: random.Random, reference: str, n: int) -> str:
    # A victim output that copies a random share of the reference and makes up the rest.
    ref = reference.split()
    keep = rng.random()
    words = [w if rng.random() < keep else rng.choice(_VOCAB) for w in ref]
    return " ".join((words + _english(rng, n).split())[:n])


def _time(fn) -> tuple[float, list[list[float]]]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _scenario(name: str, refs: list[str], cands: list[list[str]]) -> bool:
    scorer = RougeScorer(["rougeL"], use_stemmer=True)
    slow_s, slow = _time(
        lambda: [[scorer.score(r, c)["rougeL"] for c in cs] for r, cs in zip(refs, cands)]
    )
    metrics._stem.cache_clear()
    fast_s, fast = _time(lambda: [metrics.rouge_l_batch(cs, r) for r, cs in zip(refs, cands)])
    same = all(
        metrics.rouge_l_batch(cs, r, variant=v) == [getattr(s, f) for s in ss]
        for r, cs, ss in zip(refs, cands, slow)
        for v, f in (("recall", "recall"), ("precision", "precision"), ("f1", "fmeasure"))
    )
    same = same and fast == [[s.recall for s in ss] for ss in slow]
    n = sum(len(cs) for cs in cands)
    print(
        f"{name}: {n} pairs | rouge-score {slow_s * 1e3:8.1f} ms | memprobe {fast_s * 1e3:7.1f} ms"
        f" | {slow_s / fast_s:6.1f}x faster | identical scores: {same}"
    )
    return same


def main() -> int:
    rng = random.Random(2024)
    refs_a = [_english(rng, 70) for _ in range(100)]
    cands_a = [[_candidate(rng, r, 70) for _ in range(24)] for r in refs_a]
    ref_b = _english(rng, 333)
    cands_b = [[_candidate(rng, ref_b, 333) for _ in range(24)]]
    metrics.rouge_l("warm up", "imports and regex compilation")  # not part of the timings
    ok = _scenario("(a) 100 refs x 24 cands, ~70 tokens", refs_a, cands_a)
    ok &= _scenario("(b) 1 ref x 24 cands, 333 tokens  ", [ref_b], cands_b)
    if not ok:
        print("MISMATCH: the fast path differs from rouge-score", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
