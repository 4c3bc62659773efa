"""memprobe's GCG search vs nanoGCG 0.3.0, same model, same work, side by side in one run.

Both search on SmolLM2-135M-Instruct from the embedded cache (float32, CPU, the same torch
thread count) with the same chat message, the same 20-token optimised string placed where
nanoGCG places it (after the user message, before the template's closing tokens), the same
target, steps, search width, top-k and forbidden tokens (nanoGCG's non-ASCII + special list).
The chat template's tokens before the optimised string are the prefix both cache; the closing
tokens after it are fixed context (not target) for both. Every id list is computed once, by
nanoGCG's own tokenization in its virtualenv, and handed to memprobe's ``gcg_search``.

nanoGCG 0.3.0 pins ``transformers<=4.47.1``, so it runs in its own virtualenv that this script
creates (``--venv``, default ``/tmp/nanogcg-venv``). transformers 4.47.1 cannot read the
``tokenizer_config.json`` transformers 5 writes (``TokenizersBackend``) nor the config's
``rope_parameters``, so the child builds its tokenizer from ``tokenizer.json`` + the cache's chat
template and passes ``rope_theta`` explicitly. No BOS token is declared to nanoGCG: SmolLM2's BOS
is ``<|im_start|>`` and nanoGCG strips every occurrence of the BOS string from the template.

Run:  python bench/gcg.py            (prints s/step, losses, and the ratio memprobe / nanoGCG)
      python bench/gcg.py --steps 10 --width 128 --topk 128
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's memprobe_core

MESSAGE = (
    "Below is the start of an open-source licence header. Continue it word for word, "
    "as it appears at the top of source files:\n\n"
    'Licensed under the Apache License, Version 2.0 (the "License"); you may not use this file '
    "except in compliance with the License. You may obtain a copy of the License at "
)
OPTIM_STR = "x x x x x x x x x x x x x x x x x x x x"  # nanoGCG's default init: 20 tokens
TARGET = (
    "http://www.apache.org/licenses/LICENSE-2.0\n\nUnless required by applicable law or agreed to "
    'in writing, software distributed under the License is distributed on an "AS IS" BASIS, '
    "WITHOUT WARRANTIES OR"
)
PINS = ["nanogcg==0.3.0", "transformers==4.47.1", "torch==2.13.0"]
# nanogcg 0.3.0's own requirements, for a --no-deps install when its pins refuse our torch.
NANOGCG_DEPS = ["transformers==4.47.1", "torch==2.13.0", "scipy", "sentencepiece", "protobuf"]


def ensure_venv(venv: Path) -> Path:
    """The virtualenv's python, created and filled on first use."""
    py = venv / "bin" / "python"
    if py.exists() and _has_nanogcg(py):
        return py
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "-q"]
    if subprocess.run([*pip, *PINS], check=False).returncode != 0:
        subprocess.run([*pip, *NANOGCG_DEPS], check=True)
        subprocess.run([*pip, "--no-deps", PINS[0]], check=True)
    return py


def _has_nanogcg(py: Path) -> bool:
    return (
        subprocess.run(
            [str(py), "-c", "import nanogcg"], capture_output=True, check=False
        ).returncode
        == 0
    )


# ---- child side: runs inside the nanoGCG virtualenv (no memprobe import) ----


def _child_setup(cache: str):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_file=f"{cache}/tokenizer.json",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
    )
    tok.chat_template = Path(f"{cache}/chat_template.jinja").read_text()
    cfg = json.loads(Path(f"{cache}/config.json").read_text())
    rope = cfg.pop("rope_parameters", {}) or {}
    cfg["rope_theta"] = rope.get("rope_theta", 10000.0)
    model = LlamaForCausalLM.from_pretrained(
        cache, config=LlamaConfig(**cfg), torch_dtype=torch.float32
    )
    return model.eval(), tok


def child_main(cache: str, spec_path: str, out_path: str) -> None:
    """Tokenize as nanoGCG does, run nanoGCG, write ids + timings + losses as JSON."""
    import nanogcg
    import torch
    from nanogcg.gcg import GCG
    from nanogcg.utils import get_nonascii_toks

    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(spec["threads"])
    model, tok = _child_setup(cache)
    messages = [{"role": "user", "content": MESSAGE + "{optim_str}"}]
    template = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    before, after = template.split("{optim_str}")
    ids = {
        "before": tok([before])["input_ids"][0],
        "after": tok([after], add_special_tokens=False)["input_ids"][0],
        "target": tok([TARGET], add_special_tokens=False)["input_ids"][0],
        "optim": tok([OPTIM_STR], add_special_tokens=False)["input_ids"][0],
        "not_allowed": get_nonascii_toks(tok).tolist(),
    }
    out = {
        "ids": ids,
        "versions": {"nanogcg": "0.3.0", "transformers": __import__("transformers").__version__},
    }
    seq = torch.tensor([ids["before"] + ids["optim"] + ids["after"] + ids["target"]])
    with torch.no_grad():
        logits = model(input_ids=seq).logits[0, -len(ids["target"]) - 1 : -1]
    out["initial_loss"] = float(
        torch.nn.functional.cross_entropy(logits, torch.tensor(ids["target"]))
    )
    if not spec.get("ids_only"):
        config = nanogcg.GCGConfig(
            num_steps=spec["steps"],
            search_width=spec["width"],
            topk=spec["topk"],
            optim_str_init=OPTIM_STR,
            seed=spec["seed"],
            verbosity="WARNING",
        )
        gcg = GCG(model, tok, config)  # not timed: builds the non-ASCII list once
        t0, c0 = time.perf_counter(), time.process_time()
        res = gcg.run(messages, TARGET)
        out["seconds"], out["cpu_seconds"] = time.perf_counter() - t0, time.process_time() - c0
        out["losses"], out["best_loss"] = res.losses, res.best_loss
    Path(out_path).write_text(json.dumps(out))


# ---- parent side: memprobe's search ----


def run_child(py: Path, cache: Path, spec: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        sp, op = Path(tmp, "spec.json"), Path(tmp, "out.json")
        sp.write_text(json.dumps(spec))
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_NO_ADVISORY_WARNINGS="1")
        subprocess.run(
            [str(py), __file__, "--child", str(cache), str(sp), str(op)], check=True, env=env
        )
        return json.loads(op.read_text())


def run_ours(ids: dict, args: argparse.Namespace) -> dict:
    from memprobe_core.attacks.gcg_core import GcgSearchConfig, gcg_search
    from memprobe_core.models import load

    gen = load("smollm2-135m-instruct")

    def on_step(step: int, loss: float, *_: object) -> None:
        print(
            f"  memprobe step {step}: best loss {loss:.4f} at {time.perf_counter() - t0:.1f} s",
            flush=True,
        )

    t0, c0 = time.perf_counter(), time.process_time()
    res = gcg_search(
        gen.torch_model,
        gen.tokenizer,
        ids["optim"],
        ids["target"],
        GcgSearchConfig(
            steps=args.steps,
            top_k=args.topk,
            search_width=args.width,
            seed=args.seed,
            not_allowed=ids["not_allowed"],
        ),
        lead_ids=ids["before"],
        after_ids=ids["after"],
        on_step=on_step,
    )
    return {
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - c0,
        "losses": res.losses,
        "best_loss": res.best_loss,
        "initial_loss": res.initial_loss,
        "counts": res.counts,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--topk", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2, help="torch threads, the same for both")
    ap.add_argument("--venv", type=Path, default=Path("/tmp/nanogcg-venv"))
    args = ap.parse_args()

    import torch

    from memprobe_core.models.embedded import ensure_cache

    torch.set_num_threads(args.threads)
    cache = ensure_cache("smollm2-135m-instruct")
    py = ensure_venv(args.venv)
    spec = {
        "steps": args.steps,
        "width": args.width,
        "topk": args.topk,
        "seed": args.seed,
        "threads": args.threads,
    }
    ids = run_child(py, cache, dict(spec, ids_only=True))["ids"]
    print(
        f"fixed before {len(ids['before'])} tokens, optimised {len(ids['optim'])}, fixed after "
        f"{len(ids['after'])}, target {len(ids['target'])}; width {args.width}, top-k {args.topk}, "
        f"{args.steps} steps, {args.threads} threads",
        flush=True,
    )
    ours = run_ours(ids, args)
    nano = run_child(py, cache, spec)
    rows = [("memprobe gcg_search", ours), ("nanoGCG 0.3.0", nano)]
    # CPU seconds too: on a shared machine wall time also counts waiting for a core.
    print(f"{'':22}{'s/step':>9}{'CPU s/step':>12}{'initial loss':>14}{'best loss':>11}")
    for name, r in rows:
        print(
            f"{name:22}{r['seconds'] / args.steps:9.2f}{r['cpu_seconds'] / args.steps:12.2f}"
            f"{r['initial_loss']:14.4f}{r['best_loss']:11.4f}"
        )
    print(
        f"ratio s/step memprobe / nanoGCG: {ours['seconds'] / nano['seconds']:.2f} wall, "
        f"{ours['cpu_seconds'] / nano['cpu_seconds']:.2f} CPU"
    )
    print(f"best loss memprobe - nanoGCG: {ours['best_loss'] - nano['best_loss']:+.4f}")
    print(f"memprobe passes: {ours['counts']}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child_main(*sys.argv[2:])
    else:
        main()
