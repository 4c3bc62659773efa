"""GPU probe: one attacker-loop probe (3 × 24, length 200) on 7B-shaped random models, vs the floor.

Builds randomly initialised models of real shapes — a Llama-2-7B-shaped victim and a
Mistral-7B-shaped attacker (the paper's Zephyr is a Mistral-7B fine-tune), bf16 — with
``from_config`` on the meta device, then materialises them on the device (no CPU copy of the
weights, no download). A trivial word tokenizer stands in for the real one. Then it runs the
product's own ``run_interactive`` once and reports per round: seconds, generated tokens/s, and the
memory-bandwidth floor — each decoding step must read every weight once, so a step takes at least
``weight bytes ÷ bandwidth`` (H200: ~4.8 TB/s; ``--bandwidth-tbs``). Random weights almost never
emit EOS, so every sequence runs to ``max_new_tokens``: the worst case for time.

Then, on the same victim and snippet, the two white-box passes a GPU audit adds: a GCG search
(``run_gcg`` with the victim as base: ``--gcg-steps`` × ``--gcg-width``, seconds per step) and the
membership signals (``compute_signals``, cache cleared: seconds, against one plain forward pass of
the same ids).

    python bench/gpu_probe.py                 # on a CUDA GPU (~30 GB of GPU memory)
    python bench/gpu_probe.py --tiny          # tiny shapes on the CPU (what the test runs)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memprobe_core.attacks.options import InteractiveOptions

SHAPES: dict[str, dict[str, Any]] = {
    # Llama-2-7B (victim) and Mistral-7B-v0.1 (attacker) shapes.
    "llama-7b": dict(
        arch="llama",
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=32000,
    ),
    "mistral-7b": dict(
        arch="mistral",
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=32000,
    ),
    "llama-tiny": dict(
        arch="llama",
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=512,
    ),
    "mistral-tiny": dict(
        arch="mistral",
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=512,
    ),
}


def trivial_tokenizer(vocab_size: int) -> Any:
    """Word-level tokenizer over ``t0 … t{V-3}`` plus <pad>/<eos>, with a minimal chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<eos>"] + [f"t{i}" for i in range(vocab_size - 2)]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>")
    tok.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    tok.name_or_path = f"trivial-words-{vocab_size}"
    return tok


def build_model(shape: str, device: str, dtype: Any, seed: int = 0) -> Any:
    """A random model of ``SHAPES[shape]``: built on meta, materialised on ``device``, initialised."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig

    spec = dict(SHAPES[shape])
    arch = spec.pop("arch")
    cls = LlamaConfig if arch == "llama" else MistralConfig
    cfg = cls(
        **spec,
        max_position_embeddings=4096,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model = model.to_empty(device=device).eval()
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for _name, p in model.named_parameters():
            if p.dim() == 1:  # RMSNorm weights
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=gen)
        # Non-persistent buffers (rotary inverse frequencies) are garbage after to_empty: recompute.
        for module in model.modules():
            if hasattr(module, "inv_freq") and hasattr(module, "compute_default_rope_parameters"):
                inv_freq, scaling = module.compute_default_rope_parameters(
                    module.config, device=device
                )
                module.inv_freq.copy_(inv_freq)
                if hasattr(module, "original_inv_freq"):
                    module.original_inv_freq.copy_(inv_freq)
                module.attention_scaling = scaling
    return model


def weight_bytes(model: Any) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def run_probe(args: argparse.Namespace) -> dict[str, Any]:
    """Build both models, run one probe, return the figures (also printed)."""
    import torch

    from memprobe_core.attacks import AttackOptions, ModelSet, run_interactive
    from memprobe_core.models.hf import HFGenerator
    from memprobe_core.snippets.split import Snippet, split

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = getattr(torch, args.dtype)
    suffix = "-tiny" if args.tiny else "-7b"
    t0 = time.perf_counter()
    victim_model = build_model("llama" + suffix, device, dtype, seed=1)
    attacker_model = build_model("mistral" + suffix, device, dtype, seed=2)
    build_s = time.perf_counter() - t0
    vocab = victim_model.config.vocab_size
    victim = HFGenerator(victim_model, trivial_tokenizer(vocab), model_id="random/llama" + suffix)
    attacker = HFGenerator(
        attacker_model, trivial_tokenizer(vocab), model_id="random/mistral" + suffix
    )
    rng = random.Random(0)
    text = " ".join(f"t{rng.randrange(vocab - 2)}" for _ in range(args.length + 50))
    sp = split(Snippet("random", text, domain="cc"), victim.tokenizer, args.length)
    options = AttackOptions(
        seed=0,
        interactive=InteractiveOptions(
            rounds=args.rounds, n_candidates=args.n, max_prompt_tokens=args.max_prompt_tokens
        ),
    )
    # Warm-up (CUDA context, kernels) outside the timed probe.
    victim.generate(["t1 t2"], max_new_tokens=2)
    attacker.generate(["t1 t2"], max_new_tokens=2)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    rows: list[dict[str, Any]] = []
    marks: dict[int, float] = {}
    snaps: dict[int, tuple[Any, Any]] = {}

    def on_event(event: Any) -> None:
        r = getattr(event, "round", None)
        if event.kind == "round_started":
            marks[r] = time.perf_counter()
            snaps[r] = (attacker.stats.snapshot(), victim.stats.snapshot())
        elif event.kind == "round_finished":
            a0, v0 = snaps[r]
            rows.append(
                dict(
                    round=r,
                    seconds=time.perf_counter() - marks[r],
                    attacker=attacker.stats.since(a0),
                    victim=victim.stats.since(v0),
                )
            )

    result = run_interactive(
        sp, ModelSet(victim=victim, attacker=attacker), options, on_event=on_event
    )
    bw = args.bandwidth_tbs * 1e12
    a_step, v_step = weight_bytes(attacker_model) / bw, weight_bytes(victim_model) / bw
    out_rows = []
    for row in rows:
        a, v = row["attacker"], row["victim"]
        # Floor: each decoding step reads all weights once (batched sequences share the step).
        a_steps = options.interactive.max_prompt_tokens * a.calls
        v_steps = sp.suffix_tokens * v.calls
        floor = a_steps * a_step + v_steps * v_step
        tokens = a.generated_tokens + v.generated_tokens
        out_rows.append(
            dict(
                round=row["round"],
                seconds=round(row["seconds"], 3),
                attacker_s=round(a.seconds, 3),
                victim_s=round(v.seconds, 3),
                attacker_tokens=a.generated_tokens,
                victim_tokens=v.generated_tokens,
                tokens_per_s=round(tokens / row["seconds"], 1) if row["seconds"] else None,
                floor_s=float(f"{floor:.4g}"),
                x_floor=round(row["seconds"] / floor, 1) if floor else None,
            )
        )
    figures = dict(
        device=device if not device.startswith("cuda") else torch.cuda.get_device_name(),
        dtype=args.dtype,
        shapes=["llama-7b", "mistral-7b"] if not args.tiny else ["llama-tiny", "mistral-tiny"],
        victim_gb=float(f"{weight_bytes(victim_model) / 1e9:.4g}"),
        attacker_gb=float(f"{weight_bytes(attacker_model) / 1e9:.4g}"),
        bandwidth_tbs=args.bandwidth_tbs,
        build_seconds=round(build_s, 1),
        step_floor_ms={
            "attacker": float(f"{a_step * 1e3:.4g}"),
            "victim": float(f"{v_step * 1e3:.4g}"),
        },
        rounds=out_rows,
        total_seconds=round(result.costs.wall_seconds, 2),
        victim_queries=result.costs.victim_queries,
        attacker_queries=result.costs.attacker_queries,
        generated_tokens=result.costs.generated_tokens,
        status=result.status,
    )
    figures["gcg"] = gcg_pass(victim, sp, args, device)
    figures["membership"] = membership_pass(victim, sp, device)
    return figures


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def gcg_pass(victim: Any, sp: Any, args: argparse.Namespace, device: str) -> dict[str, Any]:
    """The product's GCG (``run_gcg``) on the victim as its own base: seconds per search step."""
    from memprobe_core.attacks import AttackOptions, GCGOptions, ModelSet, run_gcg

    options = AttackOptions(
        seed=0,
        gcg=GCGOptions(steps=args.gcg_steps, top_k=args.gcg_topk, search_width=args.gcg_width),
    )
    _sync(device)
    result = run_gcg(sp, ModelSet(victim=victim, base=victim), options)
    _sync(device)
    c = result.costs
    return dict(
        steps=args.gcg_steps,
        width=args.gcg_width,
        top_k=args.gcg_topk,
        search_seconds=round(c.search_seconds, 3),
        seconds_per_step=round(c.search_seconds / max(1, args.gcg_steps), 3),
        forward_passes=c.search_forward_passes,
        backward_passes=c.search_backward_passes,
        wall_seconds=round(c.wall_seconds, 3),
    )


def membership_pass(victim: Any, sp: Any, device: str) -> dict[str, Any]:
    """The membership signals of the snippet (cache cleared) vs one plain forward of its ids."""
    import torch

    from memprobe_core.membership import MeasureOptions
    from memprobe_core.membership.signals import clear_cache, compute_signals

    ids = torch.tensor([list(sp.prefix_ids) + list(sp.suffix_ids)], device=device)
    _sync(device)
    t0 = time.perf_counter()
    with torch.inference_mode():
        victim.torch_model(input_ids=ids)
    _sync(device)
    forward_s = time.perf_counter() - t0
    clear_cache()
    t0 = time.perf_counter()
    signals = compute_signals(victim, sp, MeasureOptions())
    _sync(device)
    signals_s = time.perf_counter() - t0
    return dict(
        signals_seconds=round(signals_s, 4),
        forward_seconds=round(forward_s, 4),
        x_forward=round(signals_s / forward_s, 2) if forward_s else None,
        tokens=signals.get("tokens"),
        loss=signals.get("loss"),
    )


def print_figures(f: dict[str, Any]) -> None:
    print(
        f"device {f['device']}  dtype {f['dtype']}  weights: victim {f['victim_gb']} GB, "
        f"attacker {f['attacker_gb']} GB  bandwidth {f['bandwidth_tbs']} TB/s  build {f['build_seconds']} s"
    )
    print(
        f"floor per decoding step: attacker {f['step_floor_ms']['attacker']} ms, "
        f"victim {f['step_floor_ms']['victim']} ms"
    )
    head = [
        "round",
        "seconds",
        "attacker_s",
        "victim_s",
        "attacker_tokens",
        "victim_tokens",
        "tokens_per_s",
        "floor_s",
        "x_floor",
    ]
    print(" | ".join(f"{h:>15}" for h in head))
    for row in f["rounds"]:
        print(" | ".join(f"{row[h]!s:>15}" for h in head))
    print(
        f"total {f['total_seconds']} s; victim queries {f['victim_queries']}, attacker queries "
        f"{f['attacker_queries']}, generated tokens {f['generated_tokens']}"
    )
    g, m = f["gcg"], f["membership"]
    print(
        f"GCG {g['steps']} steps × width {g['width']}: {g['seconds_per_step']} s/step "
        f"({g['forward_passes']} forward, {g['backward_passes']} backward passes)"
    )
    print(
        f"membership signals: {m['signals_seconds']} s = {m['x_forward']}× one forward pass "
        f"({m['forward_seconds']} s) over {m['tokens']} tokens"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="tiny shapes (CPU test of this script)")
    p.add_argument("--device", default=None, help="cuda / cpu (default: cuda when present)")
    p.add_argument(
        "--dtype", default=None, help="bfloat16 (default on 7B) or float32 (default tiny)"
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--n", type=int, default=24)
    p.add_argument("--length", type=int, default=200)
    p.add_argument("--max-prompt-tokens", type=int, default=128)
    p.add_argument("--bandwidth-tbs", type=float, default=4.8, help="memory bandwidth (H200: 4.8)")
    p.add_argument("--gcg-steps", type=int, default=None, help="GCG steps (default 10; tiny 2)")
    p.add_argument("--gcg-width", type=int, default=None, help="GCG width (default 128; tiny 8)")
    p.add_argument("--gcg-topk", type=int, default=None, help="GCG top-k (default 256; tiny 8)")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    args = p.parse_args(argv)
    args.dtype = args.dtype or ("float32" if args.tiny else "bfloat16")
    args.gcg_steps = args.gcg_steps or (2 if args.tiny else 10)
    args.gcg_width = args.gcg_width or (8 if args.tiny else 128)
    args.gcg_topk = args.gcg_topk or (8 if args.tiny else 256)
    figures = run_probe(args)
    print_figures(figures)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
