"""``--verbatim-only`` on Ray against the local executor, side by side in one run.

The same verbatim-only audit (``--snippets`` demo-corpus snippets at ``--length`` tokens on the
embedded victim, Gemma-3-270M, the audit's default measurements) runs three times:

- ``local``: the local executor (teacher-forced passes batched in windows of 16);
- ``ray, window 1``: Ray workers given one unit at a time (``--prefetch-window 1``: every unit
  makes its own pass, as the Ray executor did before windows);
- ``ray, window 16``: Ray workers given windows of units whose passes are batched
  (``--prefetch-window 16``, the default).

Each figure is units per second from the first unit's start to the last unit's end (actor
start-up and model loading left out; they are printed apart), and the three runs' records are
compared unit by unit: the greedy match and the verdict must be equal, and every measured
signal equal to 1e-5 relative (a worker's torch uses its own thread count, which may change the
last bits of a sum); the run stops otherwise. The Ray instance gets ``--workers`` CPUs, one per worker.

With the default measurements a unit's time is mostly its signals and p_z, which each unit
computes alone; ``--no-signals --no-pz`` (an extraction-rate audit) leaves the greedy match,
which is what the windows batch.

Run: ``python bench/ray_verbatim.py [--snippets 48] [--length 100] [--workers 2]
[--no-signals] [--no-pz]``.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import ray  # noqa: E402

from memprobe_core.attacks import AttackOptions, verbatim_only  # noqa: E402
from memprobe_core.audit import AuditProgress, run_audit, start_audit  # noqa: E402
from memprobe_core.executors.base import Executor  # noqa: E402
from memprobe_core.executors.local import LocalExecutor  # noqa: E402
from memprobe_core.executors.ray import RayExecutor, RayOptions  # noqa: E402
from memprobe_core.membership import extraction_probability, signals  # noqa: E402
from memprobe_core.membership.options import MeasureOptions  # noqa: E402
from memprobe_core.snippets.corpus import demo_corpus  # noqa: E402
from memprobe_core.store import Store  # noqa: E402


def run_once(
    executor: Executor, args: argparse.Namespace, path: Path
) -> tuple[float, float, dict[Any, Any]]:
    """``(units/s from the first start to the last end, seconds before the first start,
    records by unit)`` of one fresh verbatim-only audit."""
    for cache in (signals, extraction_probability, verbatim_only):
        cache.clear_cache()  # the local run pays for its own passes, as each new worker does
    store = Store(path)
    measure = MeasureOptions(signals=not args.no_signals, pz=not args.no_pz)
    run_id = start_audit(
        store,
        demo_corpus()[: args.snippets],
        ["verbatim"],
        [args.length],
        AttackOptions(measure=measure),
    )
    starts: list[float] = []
    ends: list[float] = []

    def on_progress(progress: AuditProgress) -> None:
        now = time.perf_counter()
        if progress.current is not None and not starts:
            starts.append(now)
        if progress.done > len(ends):
            ends.extend([now] * (progress.done - len(ends)))

    began = time.perf_counter()
    summary = run_audit(store, run_id, executor=executor, on_progress=on_progress)
    if summary.status != "finished" or summary.errors:
        raise SystemExit(f"{executor.name}: the audit did not finish cleanly: {summary}")
    records = {unit["key"]: (unit["verbatim"], unit["membership"]) for unit in store.units(run_id)}
    return (len(ends) - 1) / (ends[-1] - starts[0]), starts[0] - began, records


def same(a: Any, b: Any) -> bool:
    """Equal, floats to 1e-5 relative, through dicts and lists."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-9) or (a != a and b != b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snippets", type=int, default=48, help="units (at most 154)")
    parser.add_argument("--length", type=int, default=100, help="tokens per split")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (one CPU each)")
    parser.add_argument("--no-signals", action="store_true", help="measure no membership signal")
    parser.add_argument("--no-pz", action="store_true", help="measure no extraction probability")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    ray.init(
        address="local",
        num_cpus=args.workers,
        _node_ip_address="127.0.0.1",
        include_dashboard=False,
        log_to_driver=False,
    )
    modes: list[tuple[str, Executor]] = [
        ("local", LocalExecutor()),
        ("ray, window 1", RayExecutor(RayOptions(workers=args.workers, prefetch_window=1))),
        ("ray, window 16", RayExecutor(RayOptions(workers=args.workers, prefetch_window=16))),
    ]
    figures = {}
    with tempfile.TemporaryDirectory() as folder:
        for index, (name, executor) in enumerate(modes):
            figures[name] = run_once(executor, args, Path(folder) / f"{index}.sqlite")
            print(
                f"{name:<15} {figures[name][0]:6.2f} units/s "
                f"({figures[name][1]:.0f} s before the first unit)",
                flush=True,
            )
    ray.shutdown()
    reference = figures["local"][2]
    for name, (_, _, records) in figures.items():
        differ = [key for key in reference if not same(records.get(key), reference[key])]
        if differ or records.keys() != reference.keys():
            raise SystemExit(f"{name}: records differ from local on {differ[:5]}")
    local, one, windows = (figures[name][0] for name, _ in modes)
    print(
        f"verbatim-only {args.snippets} units, length {args.length}, {args.workers} workers, "
        f"signals {'off' if args.no_signals else 'on'}, p_z {'off' if args.no_pz else 'on'}: "
        f"local {local:.2f} u/s, ray window 1 {one:.2f} u/s, ray window 16 {windows:.2f} u/s; "
        f"windows vs one unit a call {windows / one:.2f}x, ray vs local {windows / local:.2f}x; "
        "records identical unit by unit"
    )


if __name__ == "__main__":
    main()
