"""Verbatim-only units (teacher forcing) against generating P-S-Base units, side by side.

Over the same demo-corpus snippets on the embedded victim (Gemma-3-270M base, also the base
model), each unit measured as an audit measures it (the method, then its measurements), every
cache emptied before each unit so that each mode pays for its own passes:

- ``ps_plain``: P-S-Base generating one token per step (``--no-speculative``);
- ``ps_drafted``: P-S-Base drafting from the true suffix (the default);
- ``verbatim``: ``--verbatim-only``, one unit at a time;
- ``verbatim_batched``: ``--verbatim-only`` as the local executor runs it: the snippets'
  teacher-forced passes batched ahead of the units (``MethodSpec.prefetch``, windows of 16).

Prints seconds per unit and the ratios, and checks that the teacher-forced greedy match equals
the one of P-S-Base's generated tokens on every snippet, and that the drafted and plain answers
are the same (the run stops otherwise).

    python bench/verbatim_only.py                          # length 100, 16 snippets, all measured
    python bench/verbatim_only.py --no-signals --no-pz     # an extraction-rate audit
    python bench/verbatim_only.py --length 200 --snippets 4
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from memprobe_core.attacks import AttackOptions, ModelSet, registry, run_method, verbatim_only
from memprobe_core.executors.local import PREFETCH_WINDOW
from memprobe_core.membership import extraction_probability, signals
from memprobe_core.membership.measure import measure_result
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.membership.verbatim import leading_match
from memprobe_core.models import load
from memprobe_core.models.embedded import DEFAULT_VICTIM
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import DataError, split


def pieces(victim: Any, length: int, count: int) -> list[Any]:
    out = []
    for snippet in demo_corpus():
        try:
            out.append(split(snippet, victim.tokenizer, length))
        except DataError:
            continue
        if len(out) == count:
            break
    return out


def fresh() -> None:
    """Empty every cache a unit reads, so a mode pays for its own passes."""
    signals.clear_cache()
    extraction_probability.clear_cache()
    verbatim_only.clear_cache()


def unit(method: str, piece: Any, models: ModelSet, options: AttackOptions) -> tuple[Any, float]:
    """One unit as the runner does it: the method, then its measurements; (result, seconds)."""
    started = time.perf_counter()
    result = run_method(method, piece, models, options)
    measure_result(result, piece, models, options.measure)
    return result, time.perf_counter() - started


def batched(chosen: list[Any], models: ModelSet, options: AttackOptions) -> tuple[list[Any], float]:
    """The verbatim units as the local executor runs them: each window prefetched, then run."""
    started = time.perf_counter()
    results = []
    spec = registry.get_method("verbatim")
    assert spec.prefetch is not None
    for start in range(0, len(chosen), PREFETCH_WINDOW):
        window = chosen[start : start + PREFETCH_WINDOW]
        spec.prefetch(window, models, options)
        for piece in window:
            result = run_method("verbatim", piece, models, options)
            measure_result(result, piece, models, options.measure)
            results.append(result)
    return results, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--snippets", type=int, default=16)
    parser.add_argument("--no-signals", action="store_true", help="measure no membership signal")
    parser.add_argument("--no-pz", action="store_true", help="measure no extraction probability")
    args = parser.parse_args()

    victim = load(DEFAULT_VICTIM)
    models = ModelSet(victim=victim, base=victim)
    measure = MeasureOptions(signals=not args.no_signals, pz=not args.no_pz)
    drafted = AttackOptions(measure=measure)
    plain = replace(drafted, speculative=False)
    seconds = {"ps_plain": 0.0, "ps_drafted": 0.0, "verbatim": 0.0, "verbatim_batched": 0.0}
    chosen = pieces(victim, args.length, args.snippets)
    # Warm-up, not timed: the first forward passes of a process pay for kernels and caches.
    unit("verbatim", chosen[0], models, drafted)
    unit("ps_base", chosen[0], models, replace(plain, measure=MeasureOptions(signals=False)))
    matches = []
    for piece in chosen:
        fresh()
        tf, seconds_tf = unit("verbatim", piece, models, drafted)
        fresh()
        ps, seconds_plain = unit("ps_base", piece, models, plain)
        fresh()
        ps_d, seconds_drafted = unit("ps_base", piece, models, drafted)
        seconds["verbatim"] += seconds_tf
        seconds["ps_plain"] += seconds_plain
        seconds["ps_drafted"] += seconds_drafted
        # P-S-Base's generated tokens (its answer re-asked with the ids kept).
        answer = victim.generate([piece.prefix], max_new_tokens=piece.suffix_tokens)[0][0]
        generated = leading_match(answer.token_ids, piece.suffix_ids)
        if tf.verbatim["match_tokens"] != generated or ps.output != ps_d.output:
            raise SystemExit(f"{piece.snippet.id}: teacher forcing or drafting disagrees")
        matches.append(generated)
        print(
            json.dumps(
                {
                    "snippet": piece.snippet.id,
                    "match_tokens": generated,
                    "extractable": tf.verbatim["extractable"],
                    "ps_plain_s": round(seconds_plain, 2),
                    "ps_drafted_s": round(seconds_drafted, 2),
                    "verbatim_s": round(seconds_tf, 2),
                }
            ),
            flush=True,
        )
    fresh()
    results, seconds["verbatim_batched"] = batched(chosen, models, drafted)
    if [r.verbatim["match_tokens"] for r in results] != matches:
        raise SystemExit("batched teacher forcing disagrees with generation")
    n = len(chosen)
    per_unit = {mode: round(total / n, 3) for mode, total in seconds.items()}
    print(json.dumps({"snippets": n, "length": args.length, "seconds_per_unit": per_unit}))
    print(
        f"measured: signals {'off' if args.no_signals else 'on'}, p_z "
        f"{'off' if args.no_pz else 'on'}; per unit: P-S-Base plain {per_unit['ps_plain']} s, "
        f"drafted {per_unit['ps_drafted']} s; verbatim-only {per_unit['verbatim']} s one at a "
        f"time, {per_unit['verbatim_batched']} s batched. Verbatim-only batched is "
        f"{seconds['ps_plain'] / seconds['verbatim_batched']:.1f}x plain and "
        f"{seconds['ps_drafted'] / seconds['verbatim_batched']:.1f}x drafted P-S-Base "
        f"(one at a time: {seconds['ps_plain'] / seconds['verbatim']:.1f}x / "
        f"{seconds['ps_drafted'] / seconds['verbatim']:.1f}x); same greedy match on every snippet"
    )


if __name__ == "__main__":
    main()
