"""ETA trace: a probe and a comparison on the embedded models, the shown time left logged each second.

Runs what the Probe and Compare pages run (``ui_common.job_runner.recorded_methods_job`` with the
plan the pages pass), reads the job's progress snapshot once a second as the page's status line
does, and prints one line per second: elapsed, work done, the ETA shown (or "longer than
estimated"), and the revision count. At the end it says whether the ETA ever rose within one
estimate while work completed (it must not: ``memprobe_core.runs.eta``), and compares the first
ETA with the time the run really took.

    python bench/eta_trace.py                       # probe 1 × 4 and compare, length 60
    python bench/eta_trace.py --rounds 2 --n 4 --length 100 --gcg-steps 3
    python bench/eta_trace.py --only probe --log eta-probe.tsv
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _shared import pick_split  # after the environment above: it imports memprobe_core

from memprobe_core import models as model_loader
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions, GCGOptions, InteractiveOptions
from memprobe_core.attacks.registry import expected_candidates
from memprobe_core.runs.probe import start_probe
from memprobe_core.store import Store
from ui_common.job_runner import Job, recorded_methods_job


def trace(store: Store, split_piece, methods, length, model_set, options, kind, log):  # type: ignore[no-untyped-def]
    """Run one recorded job and log its ETA each second; returns (rises, first_eta, seconds)."""
    run_id = start_probe(store, split_piece.snippet, methods, length, model_set, options, kind=kind)
    plan = {m: expected_candidates(m, options) for m in methods}
    count = "candidates" if kind == "probe" else "units"
    job = Job(
        recorded_methods_job(store, run_id, model_set, count=count, plan=plan),
        name=f"{kind} trace",
        lock=None,
    )
    job.progress.set(total=sum(plan.values()) if count == "candidates" else len(methods))
    start = time.monotonic()
    job.start()
    rises, first_eta, last = 0, None, None  # last: (revisions, eta, done)
    while True:
        snap = job.progress.snapshot()
        elapsed = time.monotonic() - start
        shown = (
            "longer than estimated"
            if snap.eta_overrun
            else ("-" if snap.eta is None else f"{snap.eta:.1f}")
        )
        line = f"{kind}\t{elapsed:.0f}\t{snap.done}/{snap.total}\t{shown}\t{snap.eta_revisions}"
        print(line, flush=True)
        log.write(line + "\n")
        if snap.eta is not None and snap.state == "running":
            if first_eta is None:
                first_eta = (elapsed, snap.eta)
            if last is not None and last[0] == snap.eta_revisions and snap.eta > last[1] + 1e-6:
                rises += 1
            last = (snap.eta_revisions, snap.eta, snap.done)
        if snap.is_final:
            break
        time.sleep(1.0)
    if snap.state != "finished":
        raise SystemExit(f"{kind} ended {snap.state}: {snap.error}")
    return rises, first_eta, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--length", type=int, default=60)
    parser.add_argument("--gcg-steps", type=int, default=2)
    parser.add_argument("--domain", default="legal")
    parser.add_argument("--only", choices=["probe", "compare"], default=None)
    parser.add_argument("--log", default=None, help="also write the trace (TSV) to this file")
    args = parser.parse_args()

    victim = model_loader.load("gemma-3-270m")
    helper = model_loader.load("smollm2-135m-instruct")
    model_set = ModelSet(victim=victim, base=victim, attacker=helper, init=helper)
    options = AttackOptions(
        interactive=InteractiveOptions(rounds=args.rounds, n_candidates=args.n),
        gcg=GCGOptions(steps=args.gcg_steps, top_k=32, search_width=16),
    )
    piece = pick_split(victim, args.length, args.domain)
    runs = {
        "probe": ["interactive"],
        "compare": ["ps_base", "ps_inst", "gcg", "interactive"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "runs.sqlite")
        log_path = args.log or os.devnull
        with open(log_path, "w", encoding="utf-8") as log:
            log.write("run\telapsed_s\tdone\teta_s\trevisions\n")
            print("run\telapsed_s\tdone\teta_s\trevisions")
            results = {}
            for kind, methods in runs.items():
                if args.only and kind != args.only:
                    continue
                results[kind] = trace(
                    store, piece, methods, args.length, model_set, options, kind, log
                )
    for kind, (rises, first, took) in results.items():
        first_text = "never" if first is None else f"{first[1]:.0f} s left at {first[0]:.0f} s"
        print(
            f"{kind}: {took:.0f} s in all; first ETA {first_text}; "
            f"rises within an estimate while work completed: {rises}"
        )


if __name__ == "__main__":
    main()
