"""The cost of probabilistic extraction (p_z, docs/method.md §14) against a P-S-Base answer.

On the embedded victim (Gemma-3-270M base), over the same demo-corpus snippets, side by side in
one run and interleaved snippet by snippet: the p_z pass of each sampling scheme (one
teacher-forced forward pass, then the sampler's warpers) and the greedy P-S-Base answer the unit
generates (one token per step). Prints seconds per snippet, the ratio and each snippet's
log10 p_z (or how many suffix tokens the scheme cannot draw).

    python bench/extraction_probability.py                 # length 100, 4 legal snippets
    python bench/extraction_probability.py --length 200 --snippets 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memprobe_core.measuring.sampler import SamplingScheme
from memprobe_core.membership import extraction_probability as xp
from memprobe_core.models import load
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import DataError, split

SCHEMES = {
    "top-k 40": SamplingScheme(),
    "plain": SamplingScheme(1.0, 0, 1.0),
    "top-p 0.9": SamplingScheme(1.0, 0, 0.9),
    "greedy": SamplingScheme(0.0, 0, 1.0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--snippets", type=int, default=4)
    args = parser.parse_args()
    victim = load("gemma-3-270m")
    plain = victim.variant(speculative=False)
    pieces = []
    for snippet in demo_corpus(domains="legal"):
        try:
            pieces.append(split(snippet, victim.tokenizer, args.length))
        except DataError:
            continue
        if len(pieces) == args.snippets:
            break
    seconds = {name: 0.0 for name in SCHEMES} | {"generate": 0.0}
    for piece in pieces:
        shown = []
        for name, scheme in SCHEMES.items():
            xp.clear_cache()
            t0 = time.perf_counter()
            record = xp.measure_extraction_probability(victim, piece, scheme, 0.5)
            seconds[name] += time.perf_counter() - t0
            value = record.get("log10_p_z")
            shown.append(
                f"{name}: "
                + (
                    f"{value:.2f}"
                    if value is not None
                    else f"0 ({record.get('pz_outside_support')} tokens)"
                )
            )
        t0 = time.perf_counter()
        plain.generate([piece.prefix], max_new_tokens=piece.suffix_tokens)
        seconds["generate"] += time.perf_counter() - t0
        print(
            f"{piece.snippet.id} ({piece.suffix_tokens} suffix tokens): log10 p_z "
            + "; ".join(shown)
        )
    n = len(pieces)
    gen = seconds["generate"] / n
    print(f"\nP-S-Base greedy answer: {gen:.2f} s per snippet")
    for name in SCHEMES:
        per = seconds[name] / n
        print(f"p_z pass, {name:<10} {per:.2f} s per snippet = {per / gen:.2f}× the answer")


if __name__ == "__main__":
    main()
