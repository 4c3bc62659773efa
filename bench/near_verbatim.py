"""The cost of the near-verbatim lower bound (docs/method.md §22) against Monte Carlo.

On the embedded victim (Gemma-3-270M base), per well-known text (counting, the MIT licence, …):
the bound under p_z's default scheme (top-k 40) with the default budget and beam, its forward
tokens and seconds; then a pilot of Monte Carlo samples from ``generate(do_sample=True)`` under
the same scheme, its share within the budget ``P̂`` and its seconds per sample. From those:

- MC at equal tightness: the fewest samples whose 95 % one-sided Clopper-Pearson lower limit
  reaches the bound when the hits come at the rate ``P̂`` (the expected count ``n·P̂``); when
  ``P̂`` is not above the bound (no hit among the pilot's samples of a rare suffix), at the rate
  ``2 × bound``, an assumption the output states;
- 25 samples per suffix, the issue's goal.

Costs in forward tokens count MC generously: the prefix once (a shared cache), then ``L`` tokens
per sample. Seconds of MC are the pilot's seconds per sample (one batched ``generate``) times n.

    python bench/near_verbatim.py                      # 4 well-known texts, 64 samples
    python bench/near_verbatim.py --samples 128 --length 64
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from rapidfuzz.distance import Levenshtein
from scipy.stats import beta

from memprobe_core.measuring.near_verbatim import (
    DEFAULT_BEAM_WIDTH,
    DEFAULT_EDITS,
    near_verbatim_bound,
)
from memprobe_core.measuring.sampler import SamplingScheme
from memprobe_core.membership.extraction_probability import suffix_row
from memprobe_core.models import load
from memprobe_core.snippets.split import DataError, Snippet, split

GOAL_SAMPLES = 25
CONFIDENCE = 0.95
SCHEME = SamplingScheme()  # p_z's default: temperature 1, top-k 40


def mc_samples_to_reach(bound: float, rate: float) -> int | None:
    """The fewest n whose one-sided Clopper-Pearson lower limit at ``CONFIDENCE``, with
    ``n·rate`` hits, reaches ``bound`` (``None`` when ``rate ≤ bound``)."""
    if rate <= bound:
        return None

    def lower(n: int) -> float:
        hits = n * rate
        return float(beta.ppf(1 - CONFIDENCE, hits, n - hits + 1)) if hits > 0 else 0.0

    high = 1
    while lower(high) < bound:
        high *= 2
    low = high // 2
    while low + 1 < high:  # the lower limit grows with n at a fixed rate
        mid = (low + high) // 2
        low, high = (low, mid) if lower(mid) >= bound else (mid, high)
    return high


def mc_tokens(prefix, suffix, samples: int) -> int:
    """Forward tokens of ``samples`` Monte Carlo samples: the prefix once, ``L`` per sample."""
    return len(prefix) + samples * len(suffix)


def pilot(model, prefix, suffix, budget, samples):
    """Monte Carlo under the scheme: share within the budget and seconds per sample."""
    started = time.perf_counter()
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(0)
        out = model.generate(
            torch.tensor([prefix]),
            do_sample=True,
            temperature=SCHEME.temperature,
            top_k=SCHEME.top_k,
            top_p=SCHEME.top_p,
            max_new_tokens=len(suffix),
            eos_token_id=None,  # p_z's samples have exactly L tokens
            num_return_sequences=samples,
        )
    seconds = (time.perf_counter() - started) / samples
    drawn = out[:, len(prefix) :].tolist()
    return sum(Levenshtein.distance(y, suffix) <= budget for y in drawn) / samples, seconds


# Texts a base model has seen many times, so that near-verbatim samples have mass to find.
TEXTS = {
    "counting": ", ".join(str(i) for i in range(1, 80)),
    "mit-licence": "Permission is hereby granted, free of charge, to any person obtaining a copy of "
    'this software and associated documentation files (the "Software"), to deal in the Software '
    "without restriction, including without limitation the rights to use, copy, modify, merge, "
    "publish, distribute, sublicense, and/or sell copies of the Software.",
    "declaration": "We hold these truths to be self-evident, that all men are created equal, that "
    "they are endowed by their Creator with certain unalienable Rights, that among these are "
    "Life, Liberty and the pursuit of Happiness.",
    "lorem-ipsum": "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud "
    "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat.",
}


def rows(victim, length: int):
    """``(name, prefix row, suffix ids)`` of each text cut at ``length`` tokens (§8's split)."""
    found = []
    for name, text in TEXTS.items():
        try:
            piece = split(Snippet(id=name, text=text, domain="legal"), victim.tokenizer, length)
        except DataError:
            continue
        row, start = suffix_row(victim.tokenizer, piece)
        found.append((name, row[:start], row[start:]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=48, help="snippet tokens (prefix + suffix)")
    parser.add_argument("--samples", type=int, default=64, help="Monte Carlo pilot samples")
    args = parser.parse_args()
    victim = load("gemma-3-270m")
    model = victim.torch_model
    for name, prefix, suffix in rows(victim, args.length):
        started = time.perf_counter()
        bound = near_verbatim_bound(
            model, prefix, suffix, SCHEME, DEFAULT_EDITS, DEFAULT_BEAM_WIDTH
        )
        bound_seconds = time.perf_counter() - started
        p_lower = 0.0 if bound.log10_lower is None else 10**bound.log10_lower
        rate, per_sample = pilot(model, prefix, suffix, bound.edits, args.samples)
        n_mc = mc_samples_to_reach(p_lower, rate)
        goal_tokens, goal_seconds = (
            mc_tokens(prefix, suffix, GOAL_SAMPLES),
            GOAL_SAMPLES * per_sample,
        )
        print(
            f"{name}: L = {len(suffix)}, d = {bound.edits}, B = {bound.beam_width}: "
            f"log10 lower = {bound.log10_lower if bound.log10_lower is None else round(bound.log10_lower, 3)} "
            f"({bound.sequences} sequences); MC pilot {args.samples} samples: P̂ = {rate:.3f}"
        )
        print(
            f"  bound: {bound.forward_tokens} forward tokens, {bound_seconds:.1f} s; "
            f"25 samples: {goal_tokens} tokens, {goal_seconds:.1f} s → ratio "
            f"{bound.forward_tokens / goal_tokens:.2f} (tokens), {bound_seconds / goal_seconds:.2f} (s)"
        )
        if n_mc is None and p_lower > 0:
            # The pilot cannot size MC here: assume a truth twice the bound (stated as such).
            n_mc, rate = mc_samples_to_reach(p_lower, 2 * p_lower), 2 * p_lower
            print(f"  MC pilot not above the bound; assuming P = 2 × bound = {rate:.3g}:")
        if n_mc is None:
            print("  MC at equal tightness: nothing to reach (the bound is 0)")
        else:
            print(
                f"  MC at equal tightness: {n_mc:.3g} samples, "
                f"{mc_tokens(prefix, suffix, n_mc):.3g} tokens, {n_mc * per_sample:.3g} s → "
                f"bound / MC {bound.forward_tokens / mc_tokens(prefix, suffix, n_mc):.3g} "
                f"(tokens), {bound_seconds / (n_mc * per_sample):.3g} (s)"
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
