"""How close to chance is the blind baseline on the canary split, over many random assignments?

The canary demo (docs/method.md §11, ``memprobe audit --corpus --canaries``) assigns a random half
of a generated pool to the model's fine-tuning data, so a classifier on the texts alone should
give AUROC 0.5 *in expectation*; any one assignment scatters around it. This script draws
``--assignments`` assignments of this machine's pool (``CanarySettings.seed`` 0, 1, …) and prints
the blind baseline's out-of-fold AUROC for each (the report's classifier and folds, snippet ids
in the report's order), then their mean, standard deviation and range. No model is loaded.

    python bench/canary_blind.py                     # 20 + 20 texts, 40 assignments
    python bench/canary_blind.py --per-side 50 --assignments 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memprobe_core.membership import canaries
from memprobe_core.membership.blind import blind_baseline
from memprobe_core.snippets import nonmembers


def main(argv: list[str] | None = None) -> list[float]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--per-side", type=int, default=20)
    p.add_argument("--domain", default="legal")
    p.add_argument("--assignments", type=int, default=40)
    args = p.parse_args(argv)
    pool_seed = nonmembers.ensure().seed
    values = []
    for seed in range(args.assignments):
        settings = canaries.CanarySettings(domain=args.domain, per_side=args.per_side, seed=seed)
        pool = canaries.pool(settings, pool_seed)
        blind = blind_baseline(
            {s.id: s.text for s in pool},
            {s.id: s.label for s in pool},
            resamples=100,
            seed=0,
        )
        values.append(blind.figure("auroc"))
        print(f"assignment seed {seed}: blind baseline AUROC {values[-1]:.3f}", flush=True)
    print(
        f"\n{args.assignments} assignments of {args.per_side} + {args.per_side} {args.domain} "
        f"texts (pool seed {pool_seed}): mean {statistics.mean(values):.3f}, SD "
        f"{statistics.stdev(values):.3f}, range {min(values):.3f}–{max(values):.3f}; "
        f"{sum(v < 0.3 or v > 0.7 for v in values)} outside [0.3, 0.7]"
    )
    return values


if __name__ == "__main__":
    main()
