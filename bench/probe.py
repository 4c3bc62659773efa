"""CPU probe: one full attacker-loop probe (3 × 24, length 200) on the embedded models.

Victim: Gemma-3-270M base (it continues public texts it has seen); attacker and init model:
SmolLM2-135M-Instruct. The snippet is the first demo-corpus snippet of the chosen domain that has
200 victim tokens. The same probe runs twice, side by side: batched (one attacker call and one
victim call per round, the product's default) and unbatched (one call per candidate), and the
time is split into attacker generation, victim generation and scoring.

    python bench/probe.py                 # 3 × 24 at length 200 (several minutes on 2 cores)
    python bench/probe.py --rounds 1 --n 4
    python bench/probe.py --modes batched --profile         # cProfile: where the time goes
    python bench/probe.py --modes batched --profile torch   # per torch operator
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pick_split(victim: Any, length: int, domain: str) -> Any:
    from memprobe_core.corpus import demo_corpus
    from memprobe_core.data import DataError, split

    for snippet in demo_corpus(domains=[domain]):
        try:
            return split(snippet, victim.tokenizer, length)
        except DataError:
            continue
    raise SystemExit(f"no demo snippet of domain {domain!r} has {length} tokens")


@contextlib.contextmanager
def profiled(kind: str | None, top: int, label: str) -> Iterator[None]:
    """Run the block under cProfile or the torch profiler and print the top entries."""
    if kind is None:
        yield
        return
    if kind == "torch":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            yield
        print(f"\n--- torch profile ({label}) ---")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top))
        return
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
    for order in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(order).print_stats(top)
        body = buf.getvalue()
        print(f"\n--- cProfile ({label}) by {order} ---")
        print(body[body.find("   ncalls"):] if "   ncalls" in body else body)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--victim", default="gemma-3-270m")
    p.add_argument("--attacker", default="smollm2-135m-instruct")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--n", type=int, default=24)
    p.add_argument("--length", type=int, default=200)
    p.add_argument("--domain", default="legal")
    p.add_argument("--modes", default="batched,unbatched", help="comma list of batched/unbatched")
    p.add_argument("--json", default=None, help="also write the rows to this file")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--profile", nargs="?", const="cprofile", choices=["cprofile", "torch"], default=None,
                   help="profile each mode's run and print where the time goes (cprofile: Python "
                        "functions incl. torch ops; torch: per-operator table)")
    p.add_argument("--top", type=int, default=25, help="rows of each profile table")
    args = p.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)  # a benchmark script may; library code never does

    from memprobe_core.attacks import AttackOptions, ModelSet, run_interactive
    from memprobe_core.models import load

    t0 = time.perf_counter()
    victim, attacker = load(args.victim), load(args.attacker)
    print(f"models loaded in {time.perf_counter() - t0:.1f} s: victim {victim.model_id}, "
          f"attacker {attacker.model_id}", flush=True)
    sp = pick_split(victim, args.length, args.domain)
    print(f"snippet {sp.snippet.id} ({sp.snippet.domain}): {len(sp.prefix_ids)} + {sp.suffix_tokens} tokens",
          flush=True)
    rows = []
    for mode in args.modes.split(","):
        options = AttackOptions(rounds=args.rounds, n_candidates=args.n, seed=0, batched=mode == "batched")
        with profiled(args.profile, args.top, mode):
            res = run_interactive(sp, ModelSet(victim=victim, attacker=attacker), options)
        c = res.costs
        rows.append(dict(
            mode=mode, wall_s=round(c.wall_seconds, 1), attacker_s=round(c.attacker_seconds, 1),
            victim_s=round(c.victim_seconds, 1), scoring_s=round(c.scoring_seconds, 3),
            other_s=round(c.wall_seconds - c.attacker_seconds - c.victim_seconds - c.scoring_seconds, 2),
            attacker_queries=c.attacker_queries, victim_queries=c.victim_queries,
            tokens=c.generated_tokens, tokens_per_s=round(c.generated_tokens / c.wall_seconds, 1),
            mem=round(res.mem, 3), lcs_p=round(res.lcs_p, 3), objective=round(res.objective, 3),
        ))
        print(json.dumps(rows[-1]), flush=True)
    head = list(rows[0])
    print("\n" + " | ".join(f"{h:>14}" for h in head))
    for row in rows:
        print(" | ".join(f"{row[h]!s:>14}" for h in head))
    by = {r["mode"]: r for r in rows}
    if {"batched", "unbatched"} <= set(by):
        b, u = by["batched"], by["unbatched"]
        print(f"\nunbatched / batched: wall {u['wall_s'] / b['wall_s']:.2f}x, attacker "
              f"{u['attacker_s'] / max(b['attacker_s'], 1e-9):.2f}x, victim "
              f"{u['victim_s'] / max(b['victim_s'], 1e-9):.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
