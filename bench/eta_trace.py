"""ETA trace: a probe and a comparison on the embedded models, the shown time left read each second.

Runs what the Probe and Compare pages run (``memprobe_core.runs.probe.run_probe`` on a recorded
run) and feeds two ETA models (``memprobe_core.runs.eta.EtaModel``) from its events:

- ``batched``: the calls the dashboard should make — ``start`` as a unit starts,
  ``round_started(method, now, n)`` at each round (its candidates are one batch), ``step`` per
  candidate or search step, ``finish`` as the unit ends;
- ``per-step``: the calls ``ui_common.job_runner`` made until then (``start`` at each round,
  no batch size): every candidate its own batch;
- ``load``: ``batched`` following the load as the dashboard now does (``cores`` given, the
  cores other processes keep busy observed at each event and reading).

Each second it reads both, as the page's status line does, and logs elapsed, steps done and the
figure shown (or "over": taking longer than estimated). At the end, per run and model: the first
estimate, the time the run really took, and the worst ratio of the shown time left to the time
really left, over the readings once 10 % of the steps were done (the goal: at most 2).

``--busy N`` starts N processes that spin on a core for the whole trace (an artificial load of
N; this machine's other work comes on top), to measure the estimates on a shared CPU;
``--busy-for S`` stops them after S seconds (a load that goes away mid-run).

    python bench/eta_trace.py --rounds 1 --n 4 --length 60             # load 1 (this process)
    python bench/eta_trace.py --rounds 1 --n 4 --length 60 --busy 3    # load 4
    python bench/eta_trace.py --only probe --log eta-probe.tsv
    python bench/eta_trace.py --only probe --busy 3 --busy-for 120   # load 4, then 1
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _shared import pick_split  # after the environment above: it imports memprobe_core

from memprobe_core import models as model_loader
from memprobe_core.attacks.events import CandidateScored, RoundStarted, SearchStep
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions, GCGOptions, InteractiveOptions
from memprobe_core.attacks.registry import expected_candidates
from memprobe_core.machine_load import LoadSampler, cpu_cores
from memprobe_core.runs.eta import EtaModel
from memprobe_core.runs.probe import run_probe, start_probe
from memprobe_core.store import Store

GOAL_FROM = 0.10  # readings once this share of the steps is done count towards the worst ratio


def spin() -> None:  # pragma: no cover - runs in a child process until killed
    while True:
        pass


class Feeds:
    """The two ETA models of one run, fed under one lock from the run's events."""

    def __init__(self, plan: dict[str, int]) -> None:
        self.models = {
            "batched": EtaModel(plan),
            "per-step": EtaModel(plan),
            "load": EtaModel(plan, cores=cpu_cores()),
        }
        self.lock = threading.Lock()
        self.load = LoadSampler()

    def observe(self, now: float) -> None:
        """The load since the last event or reading, for the model that follows it (held lock)."""
        self.models["load"].observe_load(now, self.load.sample())

    def call(self, name: str, *args: object) -> None:
        now = time.monotonic()
        with self.lock:
            self.observe(now)
            for label, model in self.models.items():
                if name == "round_started" and label == "per-step":
                    model.start(str(args[0]), now)  # what job_runner did at a round
                else:
                    getattr(model, name)(*args[:1], now, *args[1:])

    def events(self, method: str):  # type: ignore[no-untyped-def]
        self.call("start", method)

        def on_event(event: object) -> None:
            if isinstance(event, CandidateScored):
                self.call("step", method)
            elif isinstance(event, RoundStarted):
                self.call("round_started", method, event.n)
            elif isinstance(event, SearchStep):
                with self.lock:
                    for model in self.models.values():
                        model.replan(method, event.steps + 1)
                self.call("step", method)

        return on_event


def trace(store: Store, piece, methods, length, model_set, options, kind, log):  # type: ignore[no-untyped-def]
    """Run one recorded job and read its ETAs each second; returns {model: readings} and seconds."""
    run_id = start_probe(store, piece.snippet, methods, length, model_set, options, kind=kind)
    plan = {m: expected_candidates(m, options) for m in methods}
    feeds = Feeds(plan)
    start = time.monotonic()
    worker = threading.Thread(
        target=run_probe,
        args=(store, run_id, model_set),
        kwargs={
            "on_event": lambda unit: feeds.events(unit.method),
            "on_unit": lambda outcome: feeds.call("finish", outcome.unit.method),
        },
        daemon=True,
    )
    worker.start()
    readings: dict[str, list[tuple[float, float, float | None]]] = {m: [] for m in feeds.models}
    while worker.is_alive():
        worker.join(timeout=1.0)
        now = time.monotonic()
        with feeds.lock:
            feeds.observe(now)
            shown = {label: m.reading(now) for label, m in feeds.models.items()}
            done = feeds.models["batched"].fraction_done
        cells = []
        for label, reading in shown.items():
            readings[label].append((now - start, done, reading.seconds))
            cells.append("over" if reading.overrun else _fmt(reading.seconds))
        line = f"{kind}\t{now - start:.0f}\t{done:.2f}\t" + "\t".join(cells)
        print(line, flush=True)
        log.write(line + "\n")
    return readings, time.monotonic() - start


def _fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f}"


def summary(readings: list[tuple[float, float, float | None]], took: float) -> str:
    """First estimate, the real total and the worst shown / real time left after 10 %."""
    first = next(((t, s) for t, _, s in readings if s is not None), None)
    ratios = [
        s / (took - t)
        for t, done, s in readings
        if s is not None and done >= GOAL_FROM and took - t > 0.5
    ]
    first_text = "never" if first is None else f"{first[1]:.0f} s at {first[0]:.0f} s"
    worst = f"{max(ratios):.2f}" if ratios else "-"
    return f"first estimate {first_text}; actual {took:.0f} s; worst shown/actual left {worst}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--length", type=int, default=60)
    parser.add_argument("--gcg-steps", type=int, default=2)
    parser.add_argument("--domain", default="legal")
    parser.add_argument("--only", choices=["probe", "compare"], default=None)
    parser.add_argument("--busy", type=int, default=0, help="processes spinning meanwhile")
    parser.add_argument(
        "--busy-for", type=float, default=None, help="stop the spinning processes after S s"
    )
    parser.add_argument("--log", default=None, help="also write the trace (TSV) to this file")
    args = parser.parse_args()

    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for proc in spinners:
        proc.start()
    if args.busy_for is not None:
        # A load that goes away mid-run: the spinners end, the run goes on.
        threading.Timer(args.busy_for, lambda: [p.terminate() for p in spinners]).start()
    sampler = LoadSampler()
    sampler.sample()
    try:
        run(args)
    finally:
        others = sampler.sample()
        for proc in spinners:
            proc.terminate()
            proc.join()
    if others is not None:
        print(
            f"other processes kept {others:.2f} of {cpu_cores()} cores busy on average "
            f"({args.busy} spinning, the rest this machine's other work)"
        )


def run(args: argparse.Namespace) -> None:
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
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "runs.sqlite")
        with open(args.log or os.devnull, "w", encoding="utf-8") as log:
            header = "run\telapsed_s\tdone\tbatched_eta_s\tper_step_eta_s\tload_eta_s"
            log.write(header + "\n")
            print(header)
            for kind, methods in runs.items():
                if args.only and kind != args.only:
                    continue
                results[kind] = trace(
                    store, piece, methods, args.length, model_set, options, kind, log
                )
    until = "" if args.busy_for is None else f" for the first {args.busy_for:.0f} s"
    print(f"load: this process + {args.busy} spinning{until}")
    for kind, (readings, took) in results.items():
        for label, series in readings.items():
            print(f"{kind} [{label}]: {summary(series, took)}")


if __name__ == "__main__":
    main()
