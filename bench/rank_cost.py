"""The extra cost of the rank-based extraction cost (docs/method.md §21) over the pass it reads.

On the embedded victim (Gemma-3-270M base), side by side in one run:

- a snippet: p_z's pass as memprobe makes it (one teacher-forced forward pass over the suffix
  positions, then the sampler's log-probs under top-k 40) against what the rank cost adds on the
  same logits (ranks, a float64 log-softmax, every window); snippet by snippet, interleaved;
- a document: the extraction map's windows (50 + 50, stride 50) against the one pass over the
  whole text the paper's setting needs (the map cannot give it: §21), on the first ``--doc-tokens``
  tokens of the built-in Apache License.

Prints seconds and the ratio extra / existing.

    python bench/rank_cost.py                          # 6 snippets of 100 tokens, 600-token doc
    python bench/rank_cost.py --snippets 3 --doc-tokens 1200
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from memprobe_core.documents.builtin import builtin_document
from memprobe_core.documents.extraction_map import front_ids, score_windows
from memprobe_core.documents.rank_cost import document_rank_cost
from memprobe_core.documents.windows import MapOptions, cut_windows
from memprobe_core.measuring.sampler import SamplingScheme, sampler_log_probs
from memprobe_core.membership import extraction_probability as xp
from memprobe_core.models import load
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import DataError, split


def snippets(victim, count: int, length: int) -> list:
    pieces = []
    for snippet in demo_corpus():
        try:
            pieces.append(split(snippet, victim.tokenizer, length))
        except DataError:
            continue
        if len(pieces) == count:
            break
    return pieces


def snippet_side(victim, pieces, repeats: int) -> tuple[float, float]:
    """(seconds of p_z's pass, seconds the rank cost adds), summed over pieces × repeats."""
    existing = extra = 0.0
    model = victim.torch_model
    for _ in range(repeats):
        for piece in pieces:
            row, start = xp.suffix_row(victim.tokenizer, piece)
            n = len(row) - start
            t0 = time.perf_counter()
            with torch.inference_mode():
                inputs = torch.tensor([row[:-1]], dtype=torch.long)
                logits = model(input_ids=inputs, use_cache=False, logits_to_keep=n).logits[0, -n:]
                targets = torch.tensor(row[start:], dtype=torch.long)
                sampler_log_probs(logits, targets, SamplingScheme())
            t1 = time.perf_counter()
            xp.rank_cost_record(logits, targets)
            t2 = time.perf_counter()
            existing += t1 - t0
            extra += t2 - t1
    return existing, extra


def document_side(victim, n_tokens: int) -> tuple[float, float, int]:
    """(seconds of the map's windows, seconds of the whole-text pass, windows)."""
    text, _ = builtin_document("apache-2.0")
    ids = victim.tokenizer.encode(text, add_special_tokens=False)[:n_tokens]
    front = front_ids(victim.tokenizer, text)
    options = MapOptions()
    windows = cut_windows(len(ids), options)
    t0 = time.perf_counter()
    for first in range(0, len(windows), options.batch_windows):
        batch = windows[first : first + options.batch_windows]
        score_windows(
            victim.torch_model, ids, batch, front=front, scheme=SamplingScheme(), discover_p=0.5
        )
    t1 = time.perf_counter()
    document_rank_cost(victim.torch_model, ids, front)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, len(windows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snippets", type=int, default=6)
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--doc-tokens", type=int, default=600)
    args = parser.parse_args()
    victim = load("gemma-3-270m")
    pieces = snippets(victim, args.snippets, args.length)
    snippet_side(victim, pieces[:1], 1)  # warm-up
    existing, extra = snippet_side(victim, pieces, args.repeats)
    runs = len(pieces) * args.repeats
    print(
        f"snippet ({args.length} tokens, {len(pieces)} snippets x {args.repeats}): p_z pass "
        f"{existing / runs * 1000:.1f} ms, rank cost on its logits {extra / runs * 1000:.2f} ms, "
        f"extra {extra / existing:.1%}"
    )
    map_s, pass_s, windows = document_side(victim, args.doc_tokens)
    print(
        f"document ({args.doc_tokens} tokens, {windows} windows): map {map_s:.2f} s, "
        f"whole-text rank pass {pass_s:.2f} s, extra {pass_s / map_s:.1%}"
    )


if __name__ == "__main__":
    main()
