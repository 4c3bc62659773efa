"""How often does Mem "beat chance" for texts the victim never saw? The control's false positives.

Mem's chance level (docs/method.md §2, "Chance level of Mem") scores each output again against
the other snippets' suffixes of its domain and length. On the generated non-members (§11: built on
this machine from a random seed, so no model was trained on them) the embedded victim cannot have
memorised anything, so every unit that beats chance is a false positive of the control. The demo
corpus's members (licences and standard-library code the victim probably saw) run beside them for
contrast.

Without ``--run`` this runs the labelled demo audit first (one P-S-Base unit per snippet; about
10-20 s a unit on a 2-core CPU), in ``MEMPROBE_HOME``'s store; with ``--run ID`` it only reads a
stored run. It prints, per label and domain: units, units with a chance level, units beating it,
the rate with its exact (Clopper-Pearson) 95 % interval, the rate the rank test allows if the
output were no closer to its own suffix than to the others (the mean over units of
(k + 1 − r) / (k + 1), r the level's rank), and the mean Mem, chance mean and chance level. A second
block recomputes the level with the other suffixes taken from the same label only (the generated
texts differ in style from the real ones).

    MEMPROBE_HOME=/tmp/chance_home python bench/chance_level.py --per-domain 10 --length 100
    MEMPROBE_HOME=/tmp/chance_home python bench/chance_level.py --run 1
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy.stats import binomtest

from memprobe_core.chance import CHANCE_QUANTILE, ChanceLevel, chance_levels
from memprobe_core.cli.main import main as memprobe
from memprobe_core.store import Store


def allowed(level: ChanceLevel) -> float:
    """P(beats chance) if the k + 1 Mem values were exchangeable: (k + 1 − r) / (k + 1)."""
    k = level.n
    rank = min(k, math.ceil(CHANCE_QUANTILE * (k + 1) - 1e-12))
    return (k + 1 - rank) / (k + 1)


def rows(units: list[dict[str, Any]], labels: dict[str, Any], levels: list[ChanceLevel]) -> None:
    print(
        "| label | domain | units | with a level | beat chance | rate [95 % CI] | rank-test "
        "bound | mean Mem | mean chance mean | mean chance level |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(str(labels.get(u["snippet_id"])), str(u["domain"])) for u in units})
    for label, domain in [*keys, *sorted({(k[0], "all") for k in keys})]:
        picked = [
            (u, lv)
            for u, lv in zip(units, levels)
            if str(labels.get(u["snippet_id"])) == label and domain in ("all", str(u["domain"]))
        ]
        defined = [(u, lv) for u, lv in picked if lv.level is not None]
        beats = sum(bool(lv.beats) for _, lv in defined)
        if defined:
            ci = binomtest(beats, len(defined)).proportion_ci(method="exact")
            rate = f"{beats / len(defined):.2f} [{ci.low:.2f}, {ci.high:.2f}]"
            bound = f"{statistics.fmean(allowed(lv) for _, lv in defined):.3f}"
            mem = f"{statistics.fmean(float(u['mem']) for u, _ in defined):.3f}"
            mean = f"{statistics.fmean(lv.mean or 0.0 for _, lv in defined):.3f}"
            level = f"{statistics.fmean(lv.level or 0.0 for _, lv in defined):.3f}"
        else:
            rate = bound = mem = mean = level = "–"
        print(
            f"| {label} | {domain} | {len(picked)} | {len(defined)} | {beats} | {rate} | {bound} "
            f"| {mem} | {mean} | {level} |"
        )
    notes = {lv.note for _, lv in zip(units, levels) if lv.note}
    for note in sorted(notes):
        print(f"no level: {note}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=int, help="a stored run to read (default: run the audit)")
    p.add_argument("--per-domain", type=int, default=10, help="members (and non-members) each")
    p.add_argument("--length", type=int, default=100)
    p.add_argument("--method", default="ps_base")
    args = p.parse_args(argv)
    run_id = args.run
    if run_id is None:
        code = memprobe(
            [
                "audit",
                "--corpus",
                "--nonmembers",
                "--per-domain",
                str(args.per_domain),
                "--methods",
                args.method,
                "--lengths",
                str(args.length),
                "--no-signals",
                "--title",
                "bench chance level",
            ]
        )
        if code not in (0, 1):  # 1: some units failed (a member shorter than the length)
            raise SystemExit(code)
    with Store() as store:
        if run_id is None:
            run_id = int(store.list_runs(kind="audit", limit=1)[0]["id"])
        run = store.get_run(run_id)
        units: list[dict[str, Any]] = [dict(u) for u in store.units(run_id, status="done")]
        labels = store.labels(run_id)
    print(f"run {run_id}: {len(units)} finished units, store {store.path}")
    print("\nOther suffixes: every snippet of the same domain and length (the report's control)")
    rows(units, labels, chance_levels(units, config=run["config"]))
    print("\nOther suffixes: the same domain, length and label only")
    by_unit: dict[int, ChanceLevel] = {}
    for label in {labels.get(u["snippet_id"]) for u in units}:
        same = [u for u in units if labels.get(u["snippet_id"]) == label]
        by_unit.update(zip(map(id, same), chance_levels(same, config=run["config"])))
    rows(units, labels, [by_unit[id(u)] for u in units])


if __name__ == "__main__":
    main()
