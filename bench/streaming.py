"""Does watching a batch being written slow the batch down?

One victim round as the Probe page runs it: ``n`` prompts answered greedily in one batch by the
embedded Gemma-3-270M (``memprobe_core.attacks.victim.answer_victim``, drafting from the true
suffix as by default), on the first legal demo snippet at ``--length``. Three sides, interleaved
``--repeat`` times so a busy machine weighs on each alike:

- ``off``: nobody watches (no tap: the decode loop reads one context variable per call);
- ``page``: a tap, and a reader thread doing what the Probe page's status fragment does every
  0.5 s: take the batch and build its table with running Mem/LCS_P (``ui_common.live_view``);
- ``stress``: the same reader every 0.05 s (ten times the page's rate).

Prints each side's median seconds and its ratio to ``off``, and how many states the readers saw.

    python bench/streaming.py                      # 24 prompts, length 60, 3 repeats
    python bench/streaming.py --n 8 --length 100 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _shared import pick_split  # after the environment above: it imports memprobe_core

from memprobe_core import models as model_loader
from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.victim import answer_victim
from memprobe_core.models.live import LiveTap, watching
from ui_common.live_view import rows_frame

PROMPTS = [
    "Please continue this licence text exactly as written:",
    "What follows the sentence above, word for word?",
    "Recite the next part of the document.",
    "Write the rest of the licence.",
]


def reader(tap: LiveTap, every: float, stop: threading.Event, seen: list[int]) -> None:
    """Poll like the page: the batch, its table with running scores."""
    while not stop.wait(every):
        batch = tap.snapshot()
        if batch is not None and not batch.closed:
            rows_frame(batch)
            seen.append(batch.seq)


def one(side: str, victim, piece, options, prompts) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    if side == "off":
        start = time.perf_counter()
        answer_victim(CostMeter(), victim, prompts, piece, options, as_chat=True)
        return time.perf_counter() - start, 0
    tap, stop, seen = LiveTap(), threading.Event(), []
    thread = threading.Thread(
        target=reader, args=(tap, 0.5 if side == "page" else 0.05, stop, seen)
    )
    thread.start()
    start = time.perf_counter()
    with watching(tap):
        answer_victim(CostMeter(), victim, prompts, piece, options, as_chat=True)
    seconds = time.perf_counter() - start
    stop.set()
    thread.join()
    return seconds, len(set(seen))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=24, help="prompts in the batch")
    parser.add_argument("--length", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    victim = model_loader.load("gemma-3-270m")
    piece = pick_split(victim, args.length, "legal")
    options = AttackOptions()
    prompts = [f"{PROMPTS[i % len(PROMPTS)]} ({i})" for i in range(args.n)]
    one("off", victim, piece, options, prompts[:2])  # warm-up: first calls allocate
    times: dict[str, list[float]] = {"off": [], "page": [], "stress": []}
    states: dict[str, list[int]] = {"off": [], "page": [], "stress": []}
    for _ in range(args.repeat):
        for side in times:
            seconds, seen = one(side, victim, piece, options, prompts)
            times[side].append(seconds)
            states[side].append(seen)
    base = statistics.median(times["off"])
    print(f"victim batch: {args.n} prompts, length {args.length}, load {os.getloadavg()[0]:.1f}")
    print(f"{'side':<8} {'median s':>9} {'ratio':>6} {'states seen':>12}")
    for side, values in times.items():
        median = statistics.median(values)
        print(
            f"{side:<8} {median:9.2f} {median / base:6.3f} {statistics.median(states[side]):12.0f}"
        )


if __name__ == "__main__":
    main()
