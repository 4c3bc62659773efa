"""Whole documents on the embedded Gemma (docs/method.md §19, §20), side by side in one process.

Run: ``python bench/document.py [--part verify|scale|canary|all] [--tokens N] [--turns T]
[--canary-words W] [--canary-fp32] [--canary-maps-only]``.

- ``verify``: the built-in Apache License 2.0 text mapped by teacher forcing, then every window
  generated greedily with ``model.generate``: greedy verdicts and match lengths compared on every
  window, and the two times (goal: teacher forcing at least 20× faster). Also the licence's
  teacher-forced top-1 agreement over all its tokens and the longest greedy run of the map.
- ``scale``: the map of a ``--tokens``-token document (default 100,000: generated legal text)
  through the stored run (``start_map`` + ``run_map``, batches of 16): windows per second and
  the total (goal: under 20 minutes on a 2-core CPU).
- ``canary``: the document canary (a generated 3,000-word document fine-tuned into a copy of
  the embedded Gemma; built on first use) mapped on the base model and on the copy, and two
  continuations of it on both, scored with nv-recall: the default context (the whole text
  while it fits in 4,096 tokens; ``--turns``, default 24, of 256 tokens) and a short one (the
  last 100 tokens, as long as the copy's training rows; twice the turns, of 128 tokens).
  Each map's rank-based cost too (b, the greedy-extractable rate, and the share of tokens in
  each band of the Document page's cost colouring).

Last line of each part: ``verify: teacher forcing A s, generation B s, ratio R, verdicts
identical on N/N windows``; ``scale: N tokens, W windows, T s, R windows/s``; ``canary: base
map X extractable, nv-recall Y / Z; copy map X', nv-recall Y' / Z' (whole context / last 100
tokens)``.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memprobe_core.documents.builtin import builtin_document
from memprobe_core.documents.canary import DocumentCanarySettings, ensure_document_canary
from memprobe_core.documents.continuation import ContinuationOptions
from memprobe_core.documents.continuation_run import (
    read_continuation,
    run_continuation_stored,
    start_continuation,
)
from memprobe_core.documents.extraction_map import front_ids, score_windows, summarise
from memprobe_core.documents.map_run import run_map, start_map
from memprobe_core.documents.rank_cost import document_token_bits
from memprobe_core.documents.windows import MapOptions, cut_windows
from memprobe_core.measuring.sampler import SamplingScheme
from memprobe_core.models import load
from memprobe_core.snippets import nonmembers
from memprobe_core.store import Store


def verify(victim) -> None:
    import torch

    text, source = builtin_document("apache-2.0")
    tok = victim.tokenizer
    ids = tok.encode(text, add_special_tokens=False)
    windows = cut_windows(len(ids), MapOptions())
    front = front_ids(tok, text)
    started = time.perf_counter()
    scores = []
    for first in range(0, len(windows), 16):
        scores += score_windows(
            victim.torch_model,
            ids,
            windows[first : first + 16],
            front=front,
            scheme=SamplingScheme(),
            discover_p=0.5,
        )
    forced = time.perf_counter() - started
    started = time.perf_counter()
    same = 0
    for window, score in zip(windows, scores):
        prompt = torch.tensor([[*front, *window.prefix_ids(ids)]])
        with torch.inference_mode():
            out = victim.torch_model.generate(
                prompt,
                max_new_tokens=window.suffix_tokens,
                min_new_tokens=window.suffix_tokens,
                do_sample=False,
            )[0, prompt.shape[1] :].tolist()
        suffix = window.suffix_ids(ids)
        lead = next((i for i, (a, b) in enumerate(zip(out, suffix)) if a != b), len(suffix))
        same += int(lead == score.match_tokens and (lead == len(suffix)) == score.extractable)
    generated = time.perf_counter() - started
    with torch.inference_mode():
        logits = victim.torch_model(torch.tensor([[*front, *ids]])).logits[0, len(front) - 1 : -1]
    agreement = float((logits.argmax(-1) == torch.tensor(ids)).float().mean())
    summary = summarise(scores, len(ids))
    print(f"document: {source}, {len(ids):,} tokens, {len(windows)} windows of 50 + 50")
    print(
        f"teacher-forced top-1 agreement over the whole text: {agreement:.3f}; longest greedy "
        f"run from a window's start: {max(s.match_tokens for s in scores)} tokens; windows "
        f"extractable: {summary.extractable}"
    )
    print(
        f"verify: teacher forcing {forced:.1f} s, generation {generated:.1f} s, ratio "
        f"{generated / forced:.1f}, verdicts identical on {same}/{len(windows)} windows"
    )


def scale(victim, tokens: int) -> None:
    seed = nonmembers.ensure().seed
    parts, count, index = [], 0, 500_000
    tok = victim.tokenizer
    while count < tokens:
        text = nonmembers.generate_text("legal", seed, index)
        parts.append(text)
        count += len(tok.encode(text, add_special_tokens=False)) + 1
        index += 1
    document = "\n\n".join(parts)
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "runs.sqlite")
        started = time.perf_counter()
        run_id = start_map(store, document, victim, name="generated", victim_name="gemma")
        last = [0.0]

        def progress(p) -> None:
            now = time.perf_counter()
            if now - last[0] > 60:
                last[0] = now
                print(f"  {p.done}/{p.total} windows, {p.rate:.2f}/s", flush=True)

        stored = run_map(store, run_id, victim, on_progress=progress)
        seconds = time.perf_counter() - started
    n = stored.summary.windows
    print(
        f"scale: {stored.document_tokens:,} tokens, {n:,} windows, {seconds:.0f} s, "
        f"{n / seconds:.2f} windows/s"
    )


def canary(
    base, turns: int, settings: DocumentCanarySettings, *, continuations: bool = True
) -> None:
    built = time.perf_counter()
    made = ensure_document_canary(
        settings,
        on_progress=lambda d, n, m: print(f"  fine-tuning {d}/{n}: {m}", flush=True),
    )
    print(f"document canary: {made.model_path} ({time.perf_counter() - built:.0f} s to get)")
    print(
        f"  {made.record['document_words']} words, {made.record['rows']} rows, "
        f"{made.record['steps']} steps, loss {made.record['first_loss']:.3f} → "
        f"{made.record['final_loss']:.3f}, trained in {made.record['train_seconds']} s"
    )
    copy = load(str(made.model_path))
    figures = {}
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "runs.sqlite")
        for label, victim in (("base", base), ("copy", copy)):
            started = time.perf_counter()
            run_id = start_map(store, made.text, victim, name="canary", victim_name=label)
            stored = run_map(store, run_id, victim)
            s = stored.summary
            print(
                f"{label} map: {s.extractable}/{s.windows} windows extractable, "
                f"{s.extracted_share:.1%} of the document written back, longest stretch "
                f"{s.longest_stretch} tokens, median log10 p_z {s.median_log10_p_z} "
                f"({time.perf_counter() - started:.0f} s)"
            )
            print(f"{label} cost: {cost_line(stored)}")
            if not continuations:
                figures[label] = (s.extractable_share,)
                continue
            recalls = []
            for context, options in (
                ("whole context", ContinuationOptions(max_turns=turns, turn_tokens=256)),
                (
                    "last 100 tokens",
                    ContinuationOptions(
                        max_turns=2 * turns, turn_tokens=128, context="last", context_tokens=100
                    ),
                ),
            ):
                recalls.append(continuation(store, made.text, victim, label, context, options))
            figures[label] = (s.extractable_share, *recalls)
    if not continuations:
        print(
            f"canary: base map {figures['base'][0]:.1%} extractable; copy map "
            f"{figures['copy'][0]:.1%} extractable (maps only)"
        )
        return
    print(
        f"canary: base map {figures['base'][0]:.1%} extractable, nv-recall "
        f"{figures['base'][1]:.3f} / {figures['base'][2]:.3f}; copy map "
        f"{figures['copy'][0]:.1%} extractable, nv-recall {figures['copy'][1]:.3f} / "
        f"{figures['copy'][2]:.3f} (whole context / last 100 tokens)"
    )


def cost_line(stored) -> str:
    """The map's rank-based cost (docs/method.md §21) and the colouring of the Document page's
    cost view: the share of tokens whose cheapest window falls in each band of b."""
    cost = stored.rank_cost or {}
    per_token = document_token_bits(cost, stored.document_tokens) if cost else None
    if per_token is None:
        return "not recorded"
    bands = [(1, "under 1 bit"), (10, "1-10"), (20, "10-20"), (40, "20-40"), (math.inf, "40+")]
    counts = [0] * len(bands)
    for bits in per_token:
        if math.isfinite(bits):
            counts[next(i for i, (high, _) in enumerate(bands) if bits < high)] += 1
    shares = ", ".join(
        f"{words} {n / len(per_token):.1%}" for (_, words), n in zip(bands, counts, strict=True)
    )
    return (
        f"b = {cost['extraction_bits']:.1f} bits, greedy-extractable rate "
        f"{cost['greedy_extractable_rate']:.3f}; tokens by their cheapest window's b: {shares}"
    )


def continuation(store, text: str, victim, label: str, context: str, options) -> float:
    """One stored continuation of ``text``; its nv-recall (and a line of figures)."""
    started = time.perf_counter()
    run_id = start_continuation(
        store, text, victim, name="canary", victim_name=label, options=options
    )
    run_continuation_stored(store, run_id, victim)
    found = read_continuation(store, run_id)
    print(
        f"{label} continuation, {context}: nv-recall {found.score.nv_recall:.3f} "
        f"({found.score.matched_words}/{found.score.reference_words} words, "
        f"{len(found.score.blocks)} blocks, longest {found.score.longest_block}), "
        f"{len(found.turns)} turns, stopped {found.stop_reason} "
        f"({time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    return found.score.nv_recall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["verify", "scale", "canary", "all"], default="all")
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument(
        "--turns",
        type=int,
        default=24,
        help="the canary continuation's turn budget (256 tokens a turn; the canary document is "
        "about 5,000 tokens, so 12 turns cannot cover it; the short-context continuation gets "
        "twice as many turns of 128 tokens)",
    )
    parser.add_argument(
        "--canary-words",
        type=int,
        default=DocumentCanarySettings().words,
        help="the canary document's least word count (a shorter one trains in proportion less "
        "time: its own copy, cached beside the default one)",
    )
    parser.add_argument(
        "--canary-fp32",
        action="store_true",
        help="fine-tune the canary without bfloat16 autocast (a CPU without AVX512-BF16 or AMX "
        "emulates bfloat16 and is many times slower with it)",
    )
    parser.add_argument(
        "--canary-maps-only",
        action="store_true",
        help="the canary's maps and their costs only, no continuations",
    )
    args = parser.parse_args()
    base = load("gemma-3-270m")
    if args.part in ("verify", "all"):
        verify(base)
    if args.part in ("canary", "all"):
        settings = DocumentCanarySettings(
            words=args.canary_words, bf16_autocast=not args.canary_fp32
        )
        canary(base, args.turns, settings, continuations=not args.canary_maps_only)
    if args.part in ("scale", "all"):
        scale(base, args.tokens)


if __name__ == "__main__":
    main()
