"""The canary demo with the extraction-risk bracket: canaries against their base model.

The CLI path of the release demo (docs/ci.md): ``memprobe audit --corpus --canaries`` fine-tunes a
copy of the embedded Gemma on a random half of a generated pool (cached after the first run) and
audits the copy with ``verbatim`` (p_z, the near-verbatim lower bound and the rank-based cost are
on by default); the same texts, exported with their ids and labels, are then audited on the base
model. With ``--pam`` both audits also run the prior-aware check (docs/method.md §24).

For each model and half (trained canaries / held-out texts) it prints the medians of the
bracket's three figures — the near-verbatim lower bound, p_z, the rank-based cost b — the
greedy-extracted count and, with ``--pam``, the check's verdicts; then, per trained canary, the
copy's bits against the base's (paired: the same text on both models).

    python bench/canary_bracket.py                        # 12 + 12 texts, length 64
    python bench/canary_bracket.py --per-side 6 --pam --pam-prefixes 19
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memprobe_core.cli import main as cli
from memprobe_core.store import Store, UnitKey

GROUPS = (("member", "trained canaries"), ("nonmember", "held-out texts"))


def audit_both(store: Path, folder: Path, per_side: int, length: int, extra: list[str]) -> None:
    """Run 1: the canary copy; run 2: the base model on the same texts."""
    common = ["--methods", "verbatim", "--lengths", str(length), *extra]
    started = time.perf_counter()
    argv = ["--store", str(store), "audit", "--corpus", "--canaries"]
    assert cli([*argv, "--per-domain", str(per_side), *common]) == 0
    print(f"copy audited in {time.perf_counter() - started:.0f} s", flush=True)
    with Store(store) as opened:
        texts = opened.samples(1)
    dataset = folder / "canaries.jsonl"
    rows = ({"id": s.id, "text": s.text, "domain": s.domain, "label": s.label} for s in texts)
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    started = time.perf_counter()
    on_base = [str(dataset), "--id-column", "id", "--domain-column", "domain"]
    on_base += ["--victim", "gemma-3-270m", "--base", "gemma-3-270m"]
    assert cli(["--store", str(store), "audit", *on_base, *common]) == 0
    print(f"base audited in {time.perf_counter() - started:.0f} s", flush=True)


def unit_figures(store: Path, run_id: int) -> dict[str, dict[str, Any]]:
    """snippet id → the unit's label and bracket figures (and PAM verdict, when measured)."""
    with Store(store) as opened:
        labels = opened.labels(run_id)
        figures = {}
        for unit in opened.units(run_id, status="done"):
            key = UnitKey(unit["snippet_id"], unit["method"], unit["length"])
            result = opened.result(run_id, key)
            assert result is not None
            v = result.verbatim
            figures[unit["snippet_id"]] = {
                "label": labels[unit["snippet_id"]],
                "lower": v.get("near_verbatim_log10_lower"),
                "pz": v.get("log10_p_z"),
                "bits": v.get("extraction_bits"),
                "extractable": bool(v.get("extractable")),
                "pam": v.get("pam_verdict"),
            }
    return figures


def median(values: list[Any]) -> str:
    finite = [float(v) for v in values if v is not None]
    return f"{statistics.median(finite):.2f}" if finite else "–"


def summary_line(model: str, group: str, rows: list[dict[str, Any]]) -> str:
    pam = Counter(r["pam"] for r in rows if r["pam"])
    verdicts = ", ".join(f"{n} {v}" for v, n in sorted(pam.items())) or "not run"
    return (
        f"{model:5} {group:17} n={len(rows):2}  median log10 lower {median([r['lower'] for r in rows])}"
        f"  log10 p_z {median([r['pz'] for r in rows])}  bits {median([r['bits'] for r in rows])}"
        f"  greedy-extracted {sum(r['extractable'] for r in rows)}/{len(rows)}  PAM: {verdicts}"
    )


def main(argv: list[str] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--per-side", type=int, default=12)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--pam", action="store_true", help="also run the prior-aware check")
    p.add_argument("--pam-prefixes", type=int, default=19)
    p.add_argument(
        "--store",
        type=Path,
        help="keep the two runs in this store (a store that has them already is read again, "
        "not audited again)",
    )
    args = p.parse_args(argv)
    extra = ["--pam", "--pam-prefixes", str(args.pam_prefixes)] if args.pam else []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        store = args.store or folder / "runs.sqlite"
        if not store.exists():
            audit_both(store, folder, args.per_side, args.length, extra)
        models = {"copy": unit_figures(store, 1), "base": unit_figures(store, 2)}
    for label, group in GROUPS:
        for model, figures in models.items():
            print(summary_line(model, group, [f for f in figures.values() if f["label"] == label]))
    print("\ntrained canaries, paired (bits on the copy → on the base):")
    for snippet_id, copy in models["copy"].items():
        if copy["label"] == "member":
            base = models["base"][snippet_id]
            print(f"  {snippet_id}: {copy['bits']:.1f} → {base['bits']:.1f} bits")
    return models


if __name__ == "__main__":
    main()
