"""CPU probe: one full attacker-loop probe (3 × 24, length 200) on the embedded models.

Victim: Gemma-3-270M base (it continues public texts it has seen); attacker and init model:
SmolLM2-135M-Instruct. The snippet is the first demo-corpus snippet of the chosen domain that has
200 victim tokens. The same probe runs twice, side by side: batched (one attacker call and one
victim call per round, the product's default) and unbatched (one call per candidate), and the
time is split into attacker generation, victim generation and scoring. ``--loops`` runs it once
per hf generation loop on the same loaded models (memprobe's own loop vs ``model.generate``)
and then checks that both give the same greedy victim outputs for the last round's prompts.

    python bench/probe.py                 # 3 × 24 at length 200 (several minutes on 2 cores)
    python bench/probe.py --rounds 1 --n 4
    python bench/probe.py --modes batched --loops memprobe,transformers   # own loop vs model.generate
    python bench/probe.py --modes batched --profile         # cProfile: where the time goes
    python bench/probe.py --modes batched --profile torch   # per torch operator
    python bench/probe.py --modes batched --drafting on,off  # victim drafting from the suffix vs not
    python bench/probe.py --modes batched --buckets on,off   # victim prefill in length buckets vs not
    python bench/probe.py --modes batched --screen on,off    # victim's projection screened in bf16 vs not
    python bench/probe.py --dtypes float32,auto   # every role float32 vs each role's auto dtype

``--dtypes`` loads the models as a run does (``ModelNames.resolved`` + ``load_models``) once per
setting, runs the batched probe with each, prints every role's dtype and checks that the victim
is the same float32 model in both (its greedy answers to the same prompts identical). Last line:
``probe 3x24: float32 A s, auto B s, ratio R``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _shared import pick_split  # after the environment above: it imports memprobe_core

from memprobe_core.attacks.options import InteractiveOptions


def with_loop(gen: Any, loop: str) -> Any:
    """``gen`` driven by generation loop ``loop`` (hf models; other backends as they are)."""
    return gen.variant(generation_loop=loop) if hasattr(gen, "variant") else gen


def summary(loop: str, mode: str, res: Any, cpu_s: float) -> dict[str, Any]:
    """One result row; ``cpu_s`` (CPU seconds of the process) varies less than wall time on a shared machine."""
    c = res.costs
    return dict(
        loop=loop,
        mode=mode,
        wall_s=round(c.wall_seconds, 1),
        cpu_s=round(cpu_s, 1),
        attacker_s=round(c.attacker_seconds, 1),
        victim_s=round(c.victim_seconds, 1),
        scoring_s=round(c.scoring_seconds, 3),
        other_s=round(
            c.wall_seconds - c.attacker_seconds - c.victim_seconds - c.scoring_seconds, 2
        ),
        attacker_queries=c.attacker_queries,
        victim_queries=c.victim_queries,
        tokens=c.generated_tokens,
        tokens_per_s=round(c.generated_tokens / c.wall_seconds, 1),
        mem=round(res.mem, 3),
        lcs_p=round(res.lcs_p, 3),
        objective=round(res.objective, 3),
    )


def ratios(slow: dict[str, Any], fast: dict[str, Any]) -> str:
    return ", ".join(
        f"{k.removesuffix('_s')} {slow[k] / max(fast[k], 1e-9):.2f}x"
        for k in ("wall_s", "cpu_s", "attacker_s", "victim_s")
    )


def print_identical(what: str, first: list[Any], second: list[Any]) -> None:
    """Print how many victim outputs of two runs' traces are equal, candidate by candidate."""
    a, b = ([c.output for c in trace] for trace in (first, second))
    same = sum(x == y for x, y in zip(a, b))
    print(f"{what}: {same}/{len(a)}", flush=True)


def check_victim(victim: Any, trace: list[Any], max_new_tokens: int) -> None:
    """Greedy victim outputs of the last round's prompts through both loops: must be equal.

    The two probe runs sample different attacker prompts (the own loop draws by inverse CDF,
    ``generate`` by ``torch.multinomial``: same distribution, different random numbers), so their
    victim outputs cannot be compared directly.
    """
    from memprobe_core.attacks.victim import victim_request

    last = max(c.round for c in trace)
    prompts = list(dict.fromkeys(c.prompt for c in trace if c.round == last and c.prompt))
    requests = [victim_request(p, victim, as_chat=True) for p in prompts]
    outs = {}
    for loop in ("memprobe", "transformers"):
        gen = with_loop(victim, loop)
        started = time.perf_counter()
        outs[loop] = gen.generate(requests, max_new_tokens=max_new_tokens)
        print(
            f"victim, {len(requests)} prompts, {loop} loop: {time.perf_counter() - started:.1f} s",
            flush=True,
        )
    same = sum(a == b for a, b in zip(outs["memprobe"], outs["transformers"]))
    print(
        f"victim greedy outputs identical (text, ids, finish): {same}/{len(requests)}", flush=True
    )


@contextlib.contextmanager
def profiled(kind: str | None, top: int, label: str) -> Iterator[None]:
    """Run the block under cProfile or the torch profiler and print the top entries."""
    if kind is None:
        yield
        return
    if kind == "torch":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            yield
        print(f"\n--- torch profile ({label}) ---")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top))
        return
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
    for order in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(order).print_stats(top)
        body = buf.getvalue()
        print(f"\n--- cProfile ({label}) by {order} ---")
        print(body[body.find("   ncalls") :] if "   ncalls" in body else body)


def compare_dtypes(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The batched probe once per ``--dtypes`` setting, models loaded as a run loads them."""
    from memprobe_core.attacks import AttackOptions, run_interactive
    from memprobe_core.attacks.interactive import METHOD
    from memprobe_core.attacks.victim import victim_request
    from memprobe_core.runs.roles import ModelNames, load_models

    settings = args.dtypes.split(",")
    rows, victims, traces = [], {}, {}
    for setting in settings:
        names = ModelNames(
            victim=args.victim, attacker=args.attacker, dtypes={"*": setting}
        ).resolved()
        models = load_models(names, [METHOD])
        used = {r: names.dtypes[r] for r in ("victim", "attacker", "init")}
        print(f"{setting}: dtypes {used}", flush=True)
        sp = pick_split(models.victim, args.length, args.domain)
        for gen in {id(m): m for m in (models.victim, models.attacker)}.values():
            gen.generate(["Warm up."], max_new_tokens=2)  # first passes pay for kernels: untimed
        options = AttackOptions(
            seed=0, interactive=InteractiveOptions(rounds=args.rounds, n_candidates=args.n)
        )
        cpu0 = time.process_time()
        res = run_interactive(sp, models, options)
        rows.append(
            {"dtypes": setting, **summary("memprobe", "batched", res, time.process_time() - cpu0)}
        )
        print(json.dumps(rows[-1]), flush=True)
        victims[setting], traces[setting] = models.victim, res.trace
    first, last = settings[0], settings[-1]
    # The two runs' attackers sample different prompts (another dtype, other numbers), so the
    # victims are compared on the same prompts: the last setting's last round.
    final = max(c.round for c in traces[last])
    prompts = list(dict.fromkeys(c.prompt for c in traces[last] if c.round == final and c.prompt))
    outputs = {
        s: victims[s].generate(
            [victim_request(p, victims[s], as_chat=True) for p in prompts],
            max_new_tokens=args.length,
        )
        for s in (first, last)
    }
    same = sum(a == b for a, b in zip(outputs[first], outputs[last]))
    print(
        f"victim: {victims[first].manifest()['dtype']} under {first}, "
        f"{victims[last].manifest()['dtype']} under {last}; greedy outputs on the same "
        f"{len(prompts)} prompts identical: {same}/{len(prompts)}",
        flush=True,
    )
    print(f"\n{first} / {last}: " + ratios(rows[0], rows[-1]))
    print(
        f"probe {args.rounds}x{args.n}: {first} {rows[0]['wall_s']} s, {last} "
        f"{rows[-1]['wall_s']} s, ratio {rows[0]['wall_s'] / max(rows[-1]['wall_s'], 1e-9):.2f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--victim", default="gemma-3-270m")
    p.add_argument("--attacker", default="smollm2-135m-instruct")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--n", type=int, default=24)
    p.add_argument("--length", type=int, default=200)
    p.add_argument("--domain", default="legal")
    p.add_argument("--modes", default="batched,unbatched", help="comma list of batched/unbatched")
    p.add_argument(
        "--loops",
        default="memprobe",
        help="comma list of hf generation loops to run side by side: memprobe (own loop: "
        "shared prefill, finished rows dropped) and/or transformers (model.generate)",
    )
    p.add_argument(
        "--drafting",
        default="on",
        help="comma list: on (the victim drafts from the true suffix, the default) and/or off "
        "(--no-speculative); with both, the victim outputs of the two runs must be identical",
    )
    p.add_argument(
        "--buckets",
        default="on",
        help="comma list: on (the victim's prompts prefilled in length buckets, the default) "
        "and/or off (one padded prefill); with both, the victim outputs must be identical",
    )
    p.add_argument(
        "--screen",
        default="on",
        help="comma list: on (greedy verification screens the victim's vocabulary projection "
        "in bfloat16, decides in float32; the default) and/or off; with both, the victim "
        "outputs must be identical",
    )
    p.add_argument("--json", default=None, help="also write the rows to this file")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument(
        "--profile",
        nargs="?",
        const="cprofile",
        choices=["cprofile", "torch"],
        default=None,
        help="profile each mode's run and print where the time goes (cprofile: Python "
        "functions incl. torch ops; torch: per-operator table)",
    )
    p.add_argument("--top", type=int, default=25, help="rows of each profile table")
    p.add_argument(
        "--dtypes",
        default=None,
        help="comma list of --dtype settings for every role (float32, auto, bfloat16 …): the "
        "batched probe once per setting, side by side (other comparisons are left out)",
    )
    args = p.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)  # a benchmark script may; library code never does
    if args.dtypes:
        return compare_dtypes(args)

    from memprobe_core.attacks import AttackOptions, ModelSet, run_interactive
    from memprobe_core.models import load

    t0 = time.perf_counter()
    victim, attacker = load(args.victim), load(args.attacker)
    print(
        f"models loaded in {time.perf_counter() - t0:.1f} s: victim {victim.model_id}, "
        f"attacker {attacker.model_id}",
        flush=True,
    )
    sp = pick_split(victim, args.length, args.domain)
    print(
        f"snippet {sp.snippet.id} ({sp.snippet.domain}): {len(sp.prefix_ids)} + {sp.suffix_tokens} tokens",
        flush=True,
    )
    # Warm-up, not timed: a process's first forward passes pay for kernels and allocations
    # (the embedded Gemma's first prefill took 14 s), which would land on the first run only.
    for gen in (victim, attacker):
        gen.generate(["Warm up."], max_new_tokens=2)
    rows, traces = [], {}
    bucket_runs = args.buckets.split(",")
    screen_runs = args.screen.split(",")
    for loop in args.loops.split(","):
        for mode in args.modes.split(","):
            for drafting, buckets, screen in [
                (d, b, c)
                for d in args.drafting.split(",")
                for b in bucket_runs
                for c in screen_runs
            ]:
                looped = with_loop(victim, loop)
                if hasattr(looped, "variant"):
                    looped = looped.variant(
                        prefill_buckets=buckets == "on", screened_head=screen == "on"
                    )
                models = ModelSet(victim=looped, attacker=with_loop(attacker, loop))
                options = AttackOptions(
                    seed=0,
                    speculative=drafting == "on",
                    interactive=InteractiveOptions(
                        rounds=args.rounds, n_candidates=args.n, batched=mode == "batched"
                    ),
                )
                cpu0 = time.process_time()
                label = f"{loop}/{mode}/{drafting}/{buckets}/{screen}"
                with profiled(args.profile, args.top, label):
                    res = run_interactive(sp, models, options)
                cpu = time.process_time() - cpu0
                rows.append(
                    {
                        "drafting": drafting,
                        "buckets": buckets,
                        "screen": screen,
                        **summary(loop, mode, res, cpu),
                    }
                )
                if screen != screen_runs[0]:
                    print_identical(
                        f"{loop}/{mode}: victim outputs identical with the projection screened "
                        "and not",
                        traces[(loop, mode, drafting, "screen")],
                        res.trace,
                    )
                    print(json.dumps(rows[-1]), flush=True)
                    continue
                traces[(loop, mode, drafting, "screen")] = res.trace
                if buckets == bucket_runs[0]:
                    traces[(loop, mode, drafting)] = res.trace
                else:
                    print_identical(
                        f"{loop}/{mode}: victim outputs identical with and without prefill buckets",
                        traces[(loop, mode, drafting)],
                        res.trace,
                    )
                print(json.dumps(rows[-1]), flush=True)
            if len(args.drafting.split(",")) == 2:
                outputs = {
                    d: [c.output for c in traces[(loop, mode, d)]] for d in args.drafting.split(",")
                }
                a, b = outputs.values()
                same = sum(x == y for x, y in zip(a, b))
                print(
                    f"{loop}/{mode}: victim outputs identical with and without drafting: "
                    f"{same}/{len(a)}",
                    flush=True,
                )
    head = list(rows[0])
    print("\n" + " | ".join(f"{h:>14}" for h in head))
    for row in rows:
        print(" | ".join(f"{row[h]!s:>14}" for h in head))
    for loop in args.loops.split(","):
        for mode in args.modes.split(","):
            pair = {r["screen"]: r for r in rows if (r["loop"], r["mode"]) == (loop, mode)}
            if "on" in pair and "off" in pair:
                print(f"\n{loop}/{mode}: unscreened / screened: " + ratios(pair["off"], pair["on"]))
    first_buckets = [
        r for r in rows if r["buckets"] == bucket_runs[0] and r["screen"] == screen_runs[0]
    ]
    by = {
        (r["loop"], r["mode"]): r
        for r in first_buckets
        if r["drafting"] == args.drafting.split(",")[0]
    }
    drafted = {(r["loop"], r["mode"], r["drafting"]): r for r in first_buckets}
    for loop in args.loops.split(","):
        for mode in args.modes.split(","):
            pair = {
                r["buckets"]: r
                for r in rows
                if (r["loop"], r["mode"]) == (loop, mode) and r["screen"] == screen_runs[0]
            }
            if "on" in pair and "off" in pair:
                print(
                    f"\n{loop}/{mode}: without prefill buckets / with them: "
                    + ratios(pair["off"], pair["on"])
                )
    for loop in args.loops.split(","):
        for mode in args.modes.split(","):
            if (loop, mode, "on") in drafted and (loop, mode, "off") in drafted:
                print(
                    f"\n{loop}/{mode}: without drafting / with drafting: "
                    + ratios(drafted[(loop, mode, "off")], drafted[(loop, mode, "on")])
                )
    for loop in args.loops.split(","):
        if (loop, "batched") in by and (loop, "unbatched") in by:
            print(
                f"\n{loop}: unbatched / batched: "
                + ratios(by[(loop, "unbatched")], by[(loop, "batched")])
            )
    for mode in args.modes.split(","):
        if ("memprobe", mode) in by and ("transformers", mode) in by:
            print(
                f"\n{mode}: transformers loop / memprobe loop: "
                + ratios(by[("transformers", mode)], by[("memprobe", mode)])
            )
            first = args.drafting.split(",")[0]
            check_victim(victim, traces[("transformers", mode, first)], sp.suffix_tokens)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
