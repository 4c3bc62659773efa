"""How far apart are the demo corpus's members and the generated non-members, with and without a model?

For the labelled selection ``demo_corpus(nonmembers=True)`` (members: licences and standard-library
code; non-members: the generated set in ``<memprobe home>/nonmembers.json``), per domain, on the
first ``--length`` tokens of each snippet under the embedded victim's (Gemma-3-270M) tokenizer:

- **loss**: the victim's mean next-token loss (lower = member): a membership signal;
- **loss / zlib**: loss over the zlib-compressed size of the same text (Carlini et al. 2021);
- **blind: tokens per character**: no model at all, only the tokenizer (fewer tokens per
  character = member). Its AUROC measures the distribution shift between the two sets: what a
  membership signal could score without any membership information (Duan et al. 2024; Das et al.
  2024, "Blind Baselines Beat Membership Inference Attacks for Foundation Models").

AUROC (ties count half) with 95 % percentile-bootstrap intervals (1,000 resamples of members and
non-members separately). One forward pass per snippet; on a 2-core CPU ~7 s per snippet.

    python bench/nonmember_shift.py --per-domain 40
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import zlib

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from memprobe_core.models import embedded
from memprobe_core.snippets.corpus import demo_corpus


def auroc(pos: list[float], neg: list[float]) -> float:
    """P(member score > non-member score), ties half (Mann-Whitney)."""
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def interval(pos: list[float], neg: list[float], seed: int = 0) -> tuple[float, float]:
    rng = random.Random(seed)
    values = sorted(
        auroc([rng.choice(pos) for _ in pos], [rng.choice(neg) for _ in neg]) for _ in range(1000)
    )
    return values[25], values[974]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-domain", type=int, default=40, help="members per domain")
    parser.add_argument("--length", type=int, default=200, help="tokens scored per snippet")
    args = parser.parse_args()
    folder = embedded.ensure_cache("gemma-3-270m")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    chosen = demo_corpus(nonmembers=True, limit_per_domain=args.per_domain)
    started = time.perf_counter()
    rows = []
    with torch.no_grad():
        for snippet in chosen:
            ids = tokenizer(snippet.text, add_special_tokens=False)["input_ids"][: args.length]
            if len(ids) < args.length:
                continue  # too short for this length (some licences): left out of both sets
            x = torch.tensor([[tokenizer.bos_token_id, *ids]])  # (1, 1 + length)
            loss = model(x, labels=x).loss.item()
            text = tokenizer.decode(ids)
            zsize = len(zlib.compress(text.encode("utf-8")))
            rows.append((snippet.domain, snippet.label, loss, zsize, args.length / len(text)))
    print(f"{len(rows)} snippets at {args.length} tokens, {time.perf_counter() - started:.0f} s")
    scores = {
        "loss": lambda r: -r[2],
        "loss / zlib": lambda r: -r[2] / r[3],
        "blind: tokens per character": lambda r: -r[4],
    }
    print("| domain | members / non-members | score | AUROC [95 % CI] |\n|---|---|---|---|")
    for domain in ("legal", "code"):
        members = [r for r in rows if r[0] == domain and r[1] == "member"]
        others = [r for r in rows if r[0] == domain and r[1] == "nonmember"]
        if not members or not others:
            continue
        for name, score in scores.items():
            pos, neg = [score(r) for r in members], [score(r) for r in others]
            low, high = interval(pos, neg)
            count = f"{len(members)} / {len(others)}"
            print(
                f"| {domain} | {count} | {name} | {auroc(pos, neg):.3f} [{low:.3f}, {high:.3f}] |"
            )
        median_m = statistics.median(r[2] for r in members)
        median_n = statistics.median(r[2] for r in others)
        print(f"| {domain} | | median loss | members {median_m:.2f}, non-members {median_n:.2f} |")


if __name__ == "__main__":
    main()
