"""Batched vs sequential generation on the embedded instruct model (the attacker's workload).

24 sampled completions of one chat request, first as one batched ``generate(n=24)`` call, then
as 24 calls of ``n=1``; same request, same max tokens, seeded. Prints tokens/s of each and the
ratio. Run: ``python bench/generation.py [--n 24] [--max-new-tokens 32] [--model NAME]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memprobe_core.models import load  # noqa: E402
from memprobe_core.models.embedded import DEFAULT_INSTRUCT  # noqa: E402

REQUEST = [{
    "role": "user",
    "content": "Write one question that asks someone to recite the opening of the Apache License, "
               "version 2.0, word for word.",
}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_INSTRUCT)
    parser.add_argument("--n", type=int, default=24)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args()

    started = time.perf_counter()
    gen = load(args.model)
    print(f"model {args.model}: loaded in {time.perf_counter() - started:.1f} s")
    gen.generate([REQUEST], n=2, max_new_tokens=4, temperature=1.0, seed=0)  # warm-up

    started = time.perf_counter()
    batched = gen.generate([REQUEST], n=args.n, max_new_tokens=args.max_new_tokens, temperature=1.0, seed=0)[0]
    batched_s = time.perf_counter() - started
    batched_tokens = sum(c.num_tokens for c in batched)

    started = time.perf_counter()
    sequential = [
        gen.generate([REQUEST], n=1, max_new_tokens=args.max_new_tokens, temperature=1.0, seed=i)[0][0]
        for i in range(args.n)
    ]
    sequential_s = time.perf_counter() - started
    sequential_tokens = sum(c.num_tokens for c in sequential)

    batched_rate = batched_tokens / batched_s
    sequential_rate = sequential_tokens / sequential_s
    print(f"{args.n} completions, max {args.max_new_tokens} new tokens, CPU threads "
          f"{_threads()}")
    print(f"  batched    (1 call, n={args.n}):  {batched_tokens:5d} tokens in {batched_s:6.2f} s "
          f"= {batched_rate:7.1f} tokens/s")
    print(f"  sequential ({args.n} calls, n=1): {sequential_tokens:5d} tokens in {sequential_s:6.2f} s "
          f"= {sequential_rate:7.1f} tokens/s")
    print(f"  speed-up (tokens/s): {batched_rate / sequential_rate:.2f}x   "
          f"(wall time: {sequential_s / batched_s:.2f}x)")
    print(f"  sample: {batched[0].text[:100]!r}")


def _threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    main()
