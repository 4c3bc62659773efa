"""NER scoring throughput: prompts × pairs scored per second, batched vs one at a time.

Scores the same prompts × name pairs on the embedded NER model (MiniLM, trained on first use,
about a minute) three ways in one run and prints filled prompts per second and the ratios:

* ``one at a time``: ``batch_size=1`` (one forward pass per filled prompt);
* ``batched``: ``batch_size=--batch-size`` (default 64), sdpa attention;
* ``batched, eager``: the same with eager attention (what heatmaps need), to show its cost.

Each way is checked to give the same confidences (to 1e-4), so the speed-up is not bought with
wrong answers.

    python bench/ner.py                      # 16 prompts × 32 pairs (1,024 filled prompts)
    python bench/ner.py --prompts 40 --pairs 100 --device cuda
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16, help="template prompts")
    parser.add_argument("--pairs", type=int, default=32, help="name pairs (2 names each)")
    parser.add_argument("--batch-size", type=int, default=64, help="batched mode's batch size")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args(argv)

    import numpy as np

    from memprobe_core.ner.embedded import embedded_name_lists, ensure_embedded_ner
    from memprobe_core.ner.model import NerModel
    from memprobe_core.ner.names import build_pairs
    from memprobe_core.ner.prompts import template_prompts
    from memprobe_core.ner.scoring import score_prompts

    started = time.perf_counter()
    folder = ensure_embedded_ner(
        lambda d, t, m: print(f"\rtraining the embedded NER model: {d}/{t} {m}", end="", flush=True)
    )
    print(f"\nmodel ready in {time.perf_counter() - started:.1f} s: {folder}")
    in_names, out_names = embedded_name_lists()
    pairs = build_pairs(in_names, out_names, max_pairs=args.pairs)
    prompts = template_prompts(args.prompts)
    texts = len(prompts) * len(pairs) * 2
    sdpa = NerModel.load(folder, device=args.device)
    eager = NerModel.load(folder, device=args.device, attentions=True)
    score_prompts(sdpa, prompts[:1], pairs[:2])  # warm-up (first call allocates)

    runs = {}
    for label, model, batch in (
        ("one at a time", sdpa, 1),
        ("batched", sdpa, args.batch_size),
        ("batched, eager", eager, args.batch_size),
    ):
        t0 = time.perf_counter()
        scores = score_prompts(model, prompts, pairs, batch_size=batch)
        runs[label] = (time.perf_counter() - t0, scores)

    reference = runs["one at a time"][1]
    base = texts / runs["one at a time"][0]
    print(
        f"\n{len(prompts)} prompts × {len(pairs)} pairs = {texts} filled prompts on {args.device}"
    )
    print(
        f"{'mode':<16} {'seconds':>8} {'texts/s':>9} {'pairs·prompts/s':>16} {'× one-at-a-time':>16}"
    )
    for label, (seconds, scores) in runs.items():
        same = np.allclose(scores.conf_in, reference.conf_in, atol=1e-4) and np.allclose(
            scores.conf_out, reference.conf_out, atol=1e-4
        )
        rate = texts / seconds
        print(
            f"{label:<16} {seconds:8.2f} {rate:9.1f} {rate / 2:16.1f} {rate / base:16.2f}"
            + ("" if same else "  (confidences differ!)")
        )
    print(f"M-MEM (pairwise) mean over prompts: {100 * reference.m_mem.mean():.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
