"""Batched vs sequential generation on the embedded instruct model (the attacker's workload).

24 sampled completions of one chat request, first as one batched call, then as 24 calls of one
completion; same request, same max tokens, seeded. Measured side by side in one run for

- memprobe: ``HFGenerator.generate(n=24)`` vs 24 × ``generate(n=1)`` (memprobe's loop: one
  prefill shared by the 24 rows, finished rows leave the batch);
- plain transformers: ``model.generate(num_return_sequences=24)`` vs 24 × ``model.generate``
  on the same model, tokenizer and prompt ids (the prompt is copied 24 times before the prefill,
  rows that ended keep being computed);
- with ``--compile``: also ``model.generate`` with a static KV cache and ``torch.compile``
  (batched only; the first call compiles and is timed separately).

Prints tokens/s of each, the batched-vs-sequential ratios and memprobe/transformers.
Run: ``python bench/generation.py [--n 24] [--max-new-tokens 128] [--model NAME] [--compile]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memprobe_core.models import load
from memprobe_core.models.embedded import DEFAULT_INSTRUCT

REQUEST = [
    {
        "role": "user",
        "content": "Write one question that asks someone to recite the opening of the Apache License, "
        "version 2.0, word for word.",
    }
]


def timed(fn: Callable[[], int]) -> tuple[int, float]:
    """(tokens generated, seconds) of one call of ``fn``."""
    started = time.perf_counter()
    tokens = fn()
    return tokens, time.perf_counter() - started


def ours(gen: Any, n: int, max_new: int) -> dict[str, tuple[int, float]]:
    """memprobe's HFGenerator: one call of n vs n calls of one."""

    def batched() -> int:
        return sum(
            c.num_tokens
            for c in gen.generate([REQUEST], n=n, max_new_tokens=max_new, temperature=1.0, seed=0)[
                0
            ]
        )

    def sequential() -> int:
        return sum(
            gen.generate([REQUEST], n=1, max_new_tokens=max_new, temperature=1.0, seed=i)[0][
                0
            ].num_tokens
            for i in range(n)
        )

    return {"batched": timed(batched), "sequential": timed(sequential)}


def plain(
    gen: Any, n: int, max_new: int, *, compile_: bool = False
) -> dict[str, tuple[int, float]]:
    """transformers' model.generate on the same model and prompt ids."""
    import torch
    from transformers import CompileConfig

    model, stops = gen.torch_model, set(gen.stop_token_ids)
    ids = torch.tensor([gen.prompt_ids(REQUEST)])
    kwargs: dict[str, Any] = dict(
        max_new_tokens=max_new,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        eos_token_id=list(stops),
        pad_token_id=gen.tokenizer.pad_token_id,
        attention_mask=torch.ones_like(ids),
    )
    if compile_:
        config = CompileConfig(mode="default")
        config._compile_all_devices = True  # transformers compiles only on GPUs unless told
        kwargs.update(cache_implementation="static", compile_config=config)

    def count(out: Any) -> int:
        total = 0
        for row in out[:, ids.shape[1] :].tolist():
            end = next((k for k, t in enumerate(row) if t in stops), None)
            total += len(row) if end is None else end + 1
        return total

    def run(rows: int, seed: int) -> int:
        torch.manual_seed(seed)  # a benchmark script may; library code seeds inside fork_rng
        with torch.inference_mode():
            return count(model.generate(ids, num_return_sequences=rows, **kwargs))

    result = {}
    if compile_:
        result["compile (first call)"] = timed(lambda: run(n, 0))
    result["batched"] = timed(lambda: run(n, 0))
    if not compile_:
        result["sequential"] = timed(lambda: sum(run(1, i) for i in range(n)))
    return result


def show(name: str, rows: dict[str, tuple[int, float]]) -> None:
    for kind, (tokens, seconds) in rows.items():
        print(
            f"  {name:<22} {kind:<21} {tokens:5d} tokens in {seconds:7.2f} s = {tokens / seconds:7.1f} tokens/s"
        )


def ratio(rows: dict[str, tuple[int, float]]) -> tuple[float, float]:
    """(tokens/s ratio, wall ratio) of batched over sequential."""
    (bt, bs), (st, ss) = rows["batched"], rows["sequential"]
    return (bt / bs) / (st / ss), ss / bs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_INSTRUCT)
    parser.add_argument("--n", type=int, default=24)
    parser.add_argument(
        "--max-new-tokens", type=int, default=128, help="the attacker's cap (max_prompt_tokens)"
    )
    parser.add_argument(
        "--compile", action="store_true", help="also time static cache + torch.compile"
    )
    args = parser.parse_args()

    started = time.perf_counter()
    gen = load(args.model)
    print(
        f"model {args.model}: loaded in {time.perf_counter() - started:.1f} s; {args.n} completions, "
        f"max {args.max_new_tokens} new tokens, CPU threads {_threads()}, "
        f"attention {gen.manifest().get('attn_implementation')}"
    )
    gen.generate([REQUEST], n=2, max_new_tokens=4, temperature=1.0, seed=0)  # warm-up
    mine = ours(gen, args.n, args.max_new_tokens)
    theirs = plain(gen, args.n, args.max_new_tokens)
    show("memprobe", mine)
    show("transformers", theirs)
    (ours_tps, ours_wall), (their_tps, their_wall) = ratio(mine), ratio(theirs)
    print(
        f"batched vs sequential (tokens/s): memprobe {ours_tps:.2f}x, transformers {their_tps:.2f}x "
        f"(wall: {ours_wall:.2f}x, {their_wall:.2f}x)"
    )
    b_ours, b_theirs = mine["batched"], theirs["batched"]
    print(
        f"memprobe / transformers, batched tokens/s: "
        f"{(b_ours[0] / b_ours[1]) / (b_theirs[0] / b_theirs[1]):.2f}x"
    )
    if args.compile:
        compiled = plain(gen, args.n, args.max_new_tokens, compile_=True)
        show("transformers+compile", compiled)
        c = compiled["batched"]
        print(
            f"static cache + torch.compile / memprobe, batched tokens/s: "
            f"{(c[0] / c[1]) / (b_ours[0] / b_ours[1]):.2f}x (compile took {compiled['compile (first call)'][1]:.0f} s)"
        )


def _threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    main()
