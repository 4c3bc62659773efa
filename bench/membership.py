"""Cost of the membership signals next to one P-S unit, side by side in one run.

Victim: the embedded Gemma-3-270M base (``memprobe probe``'s default victim); the snippet is the
first demo-corpus snippet of the chosen domain with ``--length`` victim tokens. Each repeat
times, in turn:

- ``signals``: :func:`memprobe_core.membership.signals.compute_signals` with its cache cleared
  (x and lower(x) in one batched forward, float32 statistics over the vocabulary);
- ``forward``: one plain forward of the victim over ``[BOS] + x`` (the unit "one forward pass");
- ``stats``: the float32 statistics alone (log-softmax, μ_t, σ_t) on that forward's logits;
- ``ps unit``: one P-S unit (``run_method("ps_base" | "ps_inst", ...)``: greedy generation of
  the suffix from the true prefix, then scoring);
- ``cached``: ``compute_signals`` again (the other methods of an audit on the same snippet);
- ``recall``: ``compute_signals`` with ReCaLL's and Con-ReCall's prefixes (``--recall-shots``
  other demo-corpus texts per prefix; the values are not the point, the cost is), cache cleared;
- ``samia``: :func:`memprobe_core.membership.samia.measure_samia` with ``--samia-samples``
  continuations of the prefix (one sampled generate call of ``len(suffix)`` tokens), cache
  cleared;
- ``pac``: ``compute_signals`` with PAC's ``--pac-augmentations`` word-swapped copies (more rows
  of the one forward call), cache cleared;
- ``dc_pdd``: ``compute_signals`` with DC-PDD's token frequencies of the other demo-corpus texts
  (counted once, before the repeats; no extra forward), cache cleared.

Forward calls of the victim's torch model are counted with a hook. The issue's goal: the signals
cost at most one extra forward pass of the victim per snippet.

    python bench/membership.py                     # length 200, 3 repeats
    python bench/membership.py --method ps_inst --repeats 5 --threads 2
    python bench/membership.py --recall-shots 3
    python bench/membership.py --samia-samples 10 --pac-augmentations 5
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _shared import pick_split  # after the environment above: it imports memprobe_core

from memprobe_core.snippets.corpus import demo_corpus


def timed(fn: Callable[[], Any], calls: list[int]) -> tuple[float, int, Any]:
    """(seconds, victim forward calls, result) of ``fn()``."""
    before = len(calls)
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, len(calls) - before, out


def plain_forward(victim: Any, piece: Any) -> Any:
    """One forward of the victim over x as its tokenizer encodes it (its BOS in front when it
    adds one), batch 1, no statistics: ``(logits, row)``."""
    import torch

    from memprobe_core.membership.scoring_pass import model_row

    row, _ = model_row(victim.tokenizer, [*piece.prefix_ids, *piece.suffix_ids], piece.text)
    with torch.inference_mode():
        ids = torch.tensor([row], device=victim.device)
        return victim.torch_model(input_ids=ids, use_cache=False).logits[0], row


def stats_only(logits: Any, row: list[int]) -> Any:
    """The statistics of one row from its logits (what the signals add to a forward)."""
    import torch

    from memprobe_core.membership.scoring_pass import row_stats

    with torch.inference_mode():
        return row_stats(logits, row, calibrate=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--victim", default="gemma-3-270m")
    p.add_argument("--method", default="ps_base", choices=["ps_base", "ps_inst"])
    p.add_argument("--length", type=int, default=200)
    p.add_argument("--domain", default="legal")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument(
        "--recall-shots", type=int, default=1, help="texts per ReCaLL / Con-ReCall prefix"
    )
    p.add_argument("--samia-samples", type=int, default=10, help="SaMIA's samples (paper: 10)")
    p.add_argument(
        "--pac-augmentations", type=int, default=5, help="PAC's word-swapped copies (paper: 5)"
    )
    args = p.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)  # a benchmark script may; library code never does

    from memprobe_core.attacks import AttackOptions, ModelSet, run_method
    from memprobe_core.measuring import dc_pdd as dc
    from memprobe_core.membership import MeasureOptions
    from memprobe_core.membership import samia as sm
    from memprobe_core.membership import signals as sig
    from memprobe_core.models import load
    from memprobe_core.models import measure_cache as mc

    t0 = time.perf_counter()
    victim = load(args.victim)
    piece = pick_split(victim, args.length, args.domain)
    print(
        f"victim {victim.model_id} ({victim.device}, {victim.torch_model.dtype}, "
        f"torch threads {torch.get_num_threads()}) loaded in {time.perf_counter() - t0:.1f} s; "
        f"snippet {piece.snippet.id}: {len(piece.prefix_ids)} + {piece.suffix_tokens} tokens",
        flush=True,
    )
    calls: list[int] = []
    victim.torch_model.register_forward_hook(lambda *_: calls.append(1))
    models = ModelSet(victim=victim, base=victim)  # P-S-Base on the base victim: its own parent
    options, measure = AttackOptions(seed=0), MeasureOptions()
    others = [s.text for s in demo_corpus() if s.id != piece.snippet.id]
    shots = args.recall_shots
    with_recall = MeasureOptions(
        recall_shots=shots,
        recall_prefix_ids=tuple(f"prefix-{i}" for i in range(2 * shots)),
        recall_member_prefix=tuple(others[:shots]),
        recall_nonmember_prefix=tuple(others[shots : 2 * shots]),
    )

    def fresh_recall() -> Any:
        sig.clear_cache()
        return sig.compute_signals(victim, piece, with_recall)

    with_samia = MeasureOptions(samia_samples=args.samia_samples)

    def fresh_samia() -> Any:
        sm.clear_cache()
        return sm.measure_samia(victim, piece, with_samia, seed=0)

    with_pac = MeasureOptions(pac_augmentations=args.pac_augmentations)
    counted = dc.frequencies(
        victim.tokenizer,
        others,
        source="corpus",
        origin="the other demo-corpus texts",
        tokenizer_name=mc.tokenizer_name(victim.tokenizer),
    )
    with_dc_pdd = MeasureOptions(dc_pdd_frequencies=counted)

    def fresh(options: Any) -> Any:
        sig.clear_cache()
        return sig.compute_signals(victim, piece, options)

    def fresh_signals() -> Any:
        sig.clear_cache()
        return sig.compute_signals(victim, piece, measure)

    plain_forward(victim, piece)  # warm-up: first-call allocations are not the steady cost
    rows: list[dict[str, float]] = []
    for rep in range(args.repeats):
        s_sig, n_sig, out = timed(fresh_signals, calls)
        s_fwd, n_fwd, (logits, row) = timed(lambda: plain_forward(victim, piece), calls)
        s_stats, _, _ = timed(functools.partial(stats_only, logits, row), calls)
        s_ps, n_ps, res = timed(lambda: run_method(args.method, piece, models, options), calls)
        s_hit, n_hit, _ = timed(lambda: sig.compute_signals(victim, piece, measure), calls)
        s_rec, n_rec, _ = timed(fresh_recall, calls)
        s_sam, n_sam, sam = timed(fresh_samia, calls)
        s_pac, n_pac, pac = timed(lambda: fresh(with_pac), calls)
        s_dc, n_dc, dcp = timed(lambda: fresh(with_dc_pdd), calls)
        rows.append(
            dict(
                signals=s_sig,
                forward=s_fwd,
                stats=s_stats,
                ps=s_ps,
                cached=s_hit,
                recall=s_rec,
                samia=s_sam,
                pac=s_pac,
                dc_pdd=s_dc,
            )
        )
        print(
            f"repeat {rep + 1}: signals {s_sig:.2f} s ({n_sig} victim forward call), "
            f"forward {s_fwd:.2f} s ({n_fwd}), stats {s_stats:.2f} s, {args.method} unit {s_ps:.2f} s ({n_ps} forward "
            f"calls, {res.costs.generated_tokens} tokens), cached signals {s_hit * 1e3:.2f} ms "
            f"({n_hit}), signals with ReCaLL {s_rec:.2f} s ({n_rec}), SaMIA "
            f"{s_sam:.2f} s ({n_sam} forward calls, "
            f"{sam['samia_sampling']['generated_tokens']} tokens, samia {sam['samia']:.4f}), "
            f"signals with PAC {s_pac:.2f} s ({n_pac}, pac {pac.get('pac')}), with DC-PDD "
            f"{s_dc:.2f} s ({n_dc}, dc_pdd {dcp.get('dc_pdd')})",
            flush=True,
        )
    report(rows, args.method, out)
    return {"rows": rows, "signals": out}


def report(rows: list[dict[str, float]], method: str, out: dict[str, Any]) -> None:
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(
        f"\nmedian of {len(rows)}: signals {med['signals']:.2f} s | one forward "
        f"{med['forward']:.2f} s | its statistics {med['stats']:.2f} s | {method} unit {med['ps']:.2f} s | cached "
        f"{med['cached'] * 1e3:.2f} ms"
    )
    print(
        f"signals / {method} unit: {med['signals'] / med['ps']:.3f}x;  signals / one forward: "
        f"{med['signals'] / med['forward']:.2f}x"
    )
    print(
        f"signals with ReCaLL and Con-ReCall / {method} unit: {med['recall'] / med['ps']:.3f}x "
        f"(without: {med['signals'] / med['ps']:.3f}x)"
    )
    print(f"SaMIA / {method} unit: {med['samia'] / med['ps']:.3f}x")
    print(
        f"signals with PAC / {method} unit: {med['pac'] / med['ps']:.3f}x; with DC-PDD: "
        f"{med['dc_pdd'] / med['ps']:.3f}x"
    )
    shown = (f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in out.items())
    print("signals: " + ", ".join(shown))


if __name__ == "__main__":
    main()
