"""nv-recall at the size of the paper's book runs: a 100,000-word reference against a
170,000-word generated text (Ahmed et al. 2026 report outputs of this order for whole books).

Run: ``python bench/nv_recall.py [--seed S] [--reference-words N] [--generated-words M]
[--difflib]``. The reference is seeded English-like text with a
Zipf-shaped vocabulary of 20,000 words (so ``difflib``'s "popular word" heuristic meets frequent
words as in a book); the generated text copies about 70 % of it in runs of 50-2,000 words with
a changed word every few hundred, and fills the rest with text the reference does not have.
Prints the time of each step and nv-recall; the last line is ``nv-recall 100000 vs 170000 words:
T s, nv_recall R``. With ``--difflib`` it first times ``difflib.SequenceMatcher`` itself on the
same words (the block finder nv-recall used before ``WordMatcher``), checks the blocks are the
same, and prints the ratio of the two times.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memprobe_core.documents.nv_recall import (
    NvRecallOptions,
    matching_blocks,
    merge_blocks,
    words,
)


def _text(rng: np.random.Generator, count: int, vocab: int = 20_000) -> list[str]:
    ranks = rng.zipf(1.2, size=count)  # (count,), 1 = the most frequent word
    return [f"w{r}" if r < vocab else f"rare{rng.integers(10**9)}" for r in ranks]


def _generated(rng: np.random.Generator, ref: list[str], size: int) -> list[str]:
    out: list[str] = []
    start = 0
    while len(out) < size and start < len(ref):
        run = int(rng.integers(50, 2_000))
        piece = ref[start : start + run]
        for i in range(int(rng.integers(200, 400)), len(piece), int(rng.integers(200, 400))):
            piece[i] = f"changed{rng.integers(10**9)}"
        out += piece
        start += run + int(rng.integers(0, 200))  # some of the reference never comes back
        out += _text(rng, int(rng.integers(0, 600)))  # text the reference does not have
    return (out + _text(rng, max(0, size - len(out))))[:size]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference-words", type=int, default=100_000)
    parser.add_argument("--generated-words", type=int, default=170_000)
    parser.add_argument(
        "--difflib", action="store_true", help="also time difflib's blocks (minutes past 200k)"
    )
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    ref = _text(rng, args.reference_words)
    gen = _generated(rng, list(ref), args.generated_words)
    reference, generated = " ".join(ref), " ".join(gen)

    started = time.perf_counter()
    ref_words, gen_words = words(reference), words(generated)
    t_normalise = time.perf_counter() - started
    blocks = matching_blocks(ref_words, gen_words)
    t_match = time.perf_counter() - started - t_normalise
    raw, raw_blocks = blocks, len(blocks)
    for tau_gap, tau_align, min_words in NvRecallOptions().passes():
        blocks = [b for b in merge_blocks(blocks, tau_gap, tau_align) if b.matched >= min_words]
    total = time.perf_counter() - started
    recall = sum(b.matched for b in blocks) / len(ref_words)
    print(f"normalise + split: {t_normalise:.2f} s")
    print(f"matching blocks (WordMatcher): {t_match:.2f} s ({raw_blocks:,} blocks)")
    print(f"merge passes: {total - t_normalise - t_match:.2f} s ({len(blocks):,} blocks kept)")
    if args.difflib:
        started = time.perf_counter()
        old = difflib.SequenceMatcher(None, ref_words, gen_words).get_matching_blocks()
        t_difflib = time.perf_counter() - started
        same = [(b.ref_start, b.gen_start, b.matched) for b in raw] == [
            (m.a, m.b, m.size) for m in old if m.size
        ]
        print(
            f"difflib matching blocks: {t_difflib:.2f} s, {t_difflib / t_match:.1f}x as long; "
            f"blocks {'identical' if same else 'DIFFERENT'}"
        )
    print(
        f"nv-recall {len(ref_words)} vs {len(gen_words)} words: {total:.1f} s, "
        f"nv_recall {recall:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
