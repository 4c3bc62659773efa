"""Scaling of one audit over 1, 2 and 4 Ray workers, and of black-box queries over 1 vs 4 servers.

Audit half: the same fake-backend audit (deterministic models that sleep ``--latency-ms`` per
generate call, as a GPU-bound model waits on its forward pass) runs with the ``local`` executor
and then with the ``ray`` executor on 1, 2 and 4 worker actors of a local Ray instance on
127.0.0.1. Each figure is units per second in the steady state: units ended from the moment
every worker has ended its first unit (model load and first-call warm-up behind it, as they
are once per worker in a long audit) to the end; the end-to-end figure (with actor start-up and
model loading) is printed too. Ratios are against 1 worker,
measured side by side in this run. Latency-bound, so a 2-core machine is not the limit: the
workers' logical CPUs are what Ray schedules on.

Fleet half: ``bench/fleet.py``'s 1 vs 4 local OpenAI-compatible servers (``openai`` backend
with a comma-separated ``base_url``), run here in the same process.

Run: ``python bench/scale.py [--snippets 24] [--latency-ms 500] [--workers 1 2 4]`` (~5 min on
a busy 2-core machine).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import fleet  # noqa: E402 - bench/fleet.py: the fleet half
import ray  # noqa: E402

from memprobe_core.attacks.options import AttackOptions, InteractiveOptions  # noqa: E402
from memprobe_core.audit import AuditProgress, ModelNames, run_audit, start_audit  # noqa: E402
from memprobe_core.executors.base import Executor  # noqa: E402
from memprobe_core.executors.local import LocalExecutor  # noqa: E402
from memprobe_core.executors.ray import RayExecutor, RayOptions  # noqa: E402
from memprobe_core.snippets.corpus import demo_corpus  # noqa: E402
from memprobe_core.store import Store  # noqa: E402

METHODS = ["ps_inst", "interactive"]


def audit_rate(
    executor: Executor, workers: int, args: argparse.Namespace, folder: Path
) -> tuple[float, float, int]:
    """``(steady units/s, end-to-end units/s, units)`` of one fresh audit."""
    store = Store(folder / f"{executor.name}-{workers}.sqlite")
    names = ModelNames(
        victim="fake",
        base="fake",
        attacker="fake",
        backend="fake",
        load_options={"latency_s": args.latency_ms / 1000},
    )
    snippets = demo_corpus()[: args.snippets]  # 154 in all
    run_id = start_audit(
        store,
        snippets,
        METHODS,
        [40],
        AttackOptions(interactive=InteractiveOptions(rounds=1, n_candidates=4)),
        names,
        split_tokenizer="whitespace",
    )
    ends: list[float] = []
    warm: list[float] = []  # when every worker had ended a unit (its warm-up is behind it)

    def on_progress(progress: AuditProgress) -> None:
        if progress.current is not None or progress.done <= len(ends):
            return
        ends.append(time.perf_counter())
        states = getattr(executor, "worker_states", lambda: [{"units": len(ends)}])()
        if not warm and len(states) >= workers and all(w["units"] for w in states):
            warm.append(ends[-1])

    started = time.perf_counter()
    summary = run_audit(store, run_id, executor=executor, on_progress=on_progress)
    finished = time.perf_counter()
    assert summary.status == "finished" and summary.errors == 0, summary
    units = summary.total
    # Steady state: after every worker's first unit (model load and first-call warm-up behind).
    steady = sum(end > warm[0] for end in ends) / (finished - warm[0])
    return steady, units / (finished - started), units


def audit_half(args: argparse.Namespace) -> list[str]:
    ray.init(
        address="local",
        num_cpus=max(args.workers),
        _node_ip_address="127.0.0.1",
        include_dashboard=False,
        log_to_driver=False,
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        local = audit_rate(LocalExecutor(), 1, args, Path(tmp))
        rows.append(("local", local))
        for count in args.workers:
            executor = RayExecutor(RayOptions(workers=count, cpus_per_worker=1))
            rows.append((f"ray × {count}", audit_rate(executor, count, args, Path(tmp))))
    ray.shutdown()
    base = next(r for name, r in rows if name == f"ray × {min(args.workers)}")[0]
    lines = [
        (
            f"audit: {rows[0][1][2]} units ({args.snippets} snippets × {METHODS}), fake "
            f"models sleeping {args.latency_ms:g} ms per generate call"
        ),
        f"{'executor':<10} {'steady u/s':>10} {'end-to-end u/s':>15} {'× 1 worker':>11}",
    ]
    for name, (steady, total, _) in rows:
        lines.append(f"{name:<10} {steady:>10.2f} {total:>15.2f} {steady / base:>10.2f}x")
    return lines


def fleet_half(args: argparse.Namespace) -> list[str]:
    requests = [f"request {i}: Licensed under the Apache License" for i in range(args.requests)]
    latency = args.fleet_latency_ms / 1000
    with fleet._servers(1, latency) as one:
        single = fleet._throughput(one, requests, 4)
    with fleet._servers(4, latency) as many:
        four = fleet._throughput(many, requests, 4)
    return [
        (
            f"fleet: {args.requests} openai requests, {args.fleet_latency_ms:g} ms each, one "
            "at a time per server"
        ),
        f"1 server : {single:6.1f} req/s",
        f"4 servers: {four:6.1f} req/s",
        f"speed-up : {four / single:.2f}x with 4 servers",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--snippets", type=int, default=24, help="snippets (× 2 methods = units; at most 154)"
    )
    parser.add_argument("--latency-ms", type=float, default=500.0, help="per fake generate call")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--requests", type=int, default=120, help="fleet: requests")
    parser.add_argument("--fleet-latency-ms", type=float, default=50.0, help="fleet: per request")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    lines = [*audit_half(args), "", *fleet_half(args)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
