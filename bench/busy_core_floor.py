"""The floor under "the CLI beside a busy core": one torch thread's matrix products alone, then
beside a process that keeps one core busy, then alone again (no memprobe code involved).

On a machine whose cores are really free this reads about 1.0×: one thread keeps a core of its
own. A ratio well above 1 says the machine itself (shared vCPUs, other jobs) slows a single
thread beside a busy process, and no choice of torch threads can remove that.

    python bench/busy_core_floor.py [--iterations 300] [--size 512]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--size", type=int, default=512)
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)  # a benchmark script may; library code uses MEMPROBE_THREADS
    a = torch.randn(args.size, args.size)

    def run() -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        for _ in range(args.iterations):
            a @ a
        return time.perf_counter() - t, time.process_time() - c

    run()  # warm-up
    print(f"1-minute load {os.getloadavg()[0]:.1f}")
    alone = run()
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        beside = run()
    finally:
        spinner.kill()
        spinner.wait()
    again = run()
    ref = (alone[0] + again[0]) / 2
    for name, (wall, cpu) in (
        ("alone", alone),
        ("beside a busy core", beside),
        ("alone again", again),
    ):
        print(f"{name:20s} {wall:6.2f} s wall  {cpu:6.2f} s CPU")
    print(
        f"beside / alone: {beside[0] / ref:.2f}× wall, {beside[1] / ((alone[1] + again[1]) / 2):.2f}× CPU"
    )


if __name__ == "__main__":
    main()
