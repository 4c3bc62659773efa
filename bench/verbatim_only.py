"""A verbatim-only unit (one teacher-forced pass) against generating P-S-Base units.

Over the same demo-corpus snippets on the embedded victim (Gemma-3-270M base, also the base
model), side by side in one run, each unit measured as an audit measures it (the method, then
the membership signals):

- ``ps_plain``: P-S-Base generating one token per step (``--no-speculative``);
- ``ps_drafted``: P-S-Base drafting from the true suffix (the default);
- ``verbatim``: ``--verbatim-only`` (no generation).

Prints seconds per unit and the ratios, and checks that the teacher-forced greedy match equals
the one of P-S-Base's generated tokens on every snippet (the run stops otherwise).

    python bench/verbatim_only.py                 # length 100, 8 snippets
    python bench/verbatim_only.py --length 200 --snippets 4
    python bench/verbatim_only.py --no-signals    # the passes alone
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

from memprobe_core.attacks import AttackOptions, ModelSet, run_method
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


def unit(method: str, piece: Any, models: ModelSet, options: AttackOptions) -> tuple[Any, float]:
    """One unit as the runner does it: the method, then its measurements; (result, seconds)."""
    started = time.perf_counter()
    result = run_method(method, piece, models, options)
    measure_result(result, piece, models, options.measure)
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--snippets", type=int, default=8)
    parser.add_argument("--no-signals", action="store_true", help="measure no signal")
    args = parser.parse_args()

    victim = load(DEFAULT_VICTIM)
    models = ModelSet(victim=victim, base=victim)
    measure = MeasureOptions(signals=not args.no_signals)
    drafted = AttackOptions(measure=measure)
    plain = replace(drafted, speculative=False)
    seconds = {"ps_plain": 0.0, "ps_drafted": 0.0, "verbatim": 0.0}
    for piece in pieces(victim, args.length, args.snippets):
        tf, seconds_tf = unit("verbatim", piece, models, drafted)
        ps, seconds_plain = unit("ps_base", piece, models, plain)
        ps_d, seconds_drafted = unit("ps_base", piece, models, drafted)
        seconds["verbatim"] += seconds_tf
        seconds["ps_plain"] += seconds_plain
        seconds["ps_drafted"] += seconds_drafted
        # P-S-Base's generated tokens (its answer re-asked with the ids kept).
        answer = victim.generate([piece.prefix], max_new_tokens=piece.suffix_tokens)[0][0]
        generated = leading_match(answer.token_ids, piece.suffix_ids)
        if tf.verbatim["match_tokens"] != generated or ps.output != ps_d.output:
            raise SystemExit(f"{piece.snippet.id}: teacher forcing or drafting disagrees")
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
    print(
        f"P-S-Base plain {seconds['ps_plain']:.1f} s, drafted {seconds['ps_drafted']:.1f} s, "
        f"verbatim-only {seconds['verbatim']:.1f} s: verbatim-only is "
        f"{seconds['ps_plain'] / seconds['verbatim']:.1f}x plain P-S-Base and "
        f"{seconds['ps_drafted'] / seconds['verbatim']:.1f}x drafted P-S-Base; same greedy "
        "match on every snippet"
    )


if __name__ == "__main__":
    main()
