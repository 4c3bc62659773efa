"""The ``memprobe ner`` command: score prompts × name pairs on a NER model and report M-MEM.

``memprobe_core/cli.py`` wires it in with :func:`add_ner_parser` and :func:`run_ner_command`.
Examples::

    memprobe ner                                   # embedded MiniLM model, its own name lists
    memprobe ner --templates 100 --pairs 200 --metric all_pairs --csv prompts.csv
    memprobe ner --model dslim/bert-base-NER --in-conll conll2003/ --out-names wikidata.txt \\
        --prompts my_prompts.txt --dev-fraction 0.5 --json

Progress goes to stderr; the report (or ``--json``) to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from memprobe_core.ner.scoring import METRICS

EXIT_OK, EXIT_USAGE, EXIT_MODEL = 0, 2, 3
EMBEDDED = "embedded"


class _Help(argparse.RawDescriptionHelpFormatter):
    """Appends a set default to an option's help (not ``None`` ones, not when already said)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def add_ner_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``ner`` subcommand to an argparse ``subparsers`` object and return its parser."""
    text = "NER memorization audit: M-MEM of prompts on in-train vs out-of-train names"
    parser = subparsers.add_parser(
        "ner", help=text, description=f"{text}.\n\n{__doc__.split('Examples::')[1].split('Progress')[0]}",
        formatter_class=_Help,
    )
    model = parser.add_argument_group("model")
    model.add_argument("--model", default=EMBEDDED, help="token-classification model: hub id, "
                       "local folder, or 'embedded' (MiniLM fine-tuned here, trained on first use)")
    model.add_argument("--device", help="cuda or cpu (default: cuda when present)")
    model.add_argument("--batch-size", type=int, default=64, help="filled prompts per forward pass")
    names = parser.add_argument_group("names (default with --model embedded: its own lists)")
    names.add_argument("--in-names", type=Path, help="in-train names: .txt (one per line) or .csv")
    names.add_argument("--in-conll", type=Path, help="take in-train names from the PER entities "
                       "of a CoNLL-2003 file or folder (its train split)")
    names.add_argument("--out-names", type=Path, help="out-of-train names: .txt or .csv")
    names.add_argument("--pairs", type=int, default=100, help="at most this many (in, out) pairs")
    names.add_argument("--min-words", type=int, default=1, help="drop names with fewer words")
    names.add_argument("--dev-fraction", type=float, default=0.0, help="split pairs into dev and "
                       "test (e.g. 0.5) and report dev-vs-test Kendall tau and ensembles; 0: no split")
    prompts = parser.add_argument_group("prompts")
    prompts.add_argument("--prompts", type=Path, help="prompt file: .txt (one per line) or .csv "
                         "(prompt[,type]); each prompt contains {name} exactly once")
    prompts.add_argument("--templates", type=int, default=40, help="without --prompts: this many "
                         "template prompts, balanced over the four sentence types")
    parser.add_argument("--metric", choices=METRICS, default="pairwise", help="M-MEM definition: "
                        "pairwise (paper) or all_pairs (reference code, AUC, ties count 1/2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of pair shuffling and templates")
    parser.add_argument("--top", type=int, default=5, help="best and worst prompts to print")
    output = parser.add_argument_group("output")
    output.add_argument("--csv", type=Path, help="write prompt scores as formula-safe CSV")
    output.add_argument("--names-csv", type=Path, help="write per-name confidences as formula-safe CSV")
    output.add_argument("--json", action="store_true", help="print a JSON summary instead of a table")
    parser.set_defaults(command="ner")
    return parser


def _progress(label: str):
    """A stderr progress printer: one line per ~10 %, or an updating line on a terminal."""
    state = {"last": -1}
    tty = sys.stderr.isatty()

    def report(done: int, total: int, message: str) -> None:
        tenth = int(10 * done / max(total, 1))
        if tty:
            end = "\n" if done >= total else ""
            print(f"\r{label}: {message} ({done}/{total})", end=end, file=sys.stderr, flush=True)
        elif tenth != state["last"] or done >= total:
            state["last"] = tenth
            print(f"{label}: {message} ({done}/{total})", file=sys.stderr, flush=True)

    return report


def _names(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    from memprobe_core.ner.conll import conll_person_names
    from memprobe_core.ner.embedded import embedded_name_lists
    from memprobe_core.ner.names import read_name_list

    if args.in_names and args.in_conll:
        raise ValueError("give --in-names or --in-conll, not both")
    embedded_in, embedded_out = embedded_name_lists() if args.model == EMBEDDED else ([], [])
    if args.in_names:
        in_names = read_name_list(args.in_names)
    elif args.in_conll:
        splits = conll_person_names(args.in_conll)
        if "train" not in splits:
            raise ValueError(f"{args.in_conll} has no train split (found {sorted(splits)})")
        in_names = splits["train"]
    else:
        in_names = embedded_in
    out_names = read_name_list(args.out_names) if args.out_names else embedded_out
    if not in_names or not out_names:
        raise ValueError(
            f"model {args.model!r} has no built-in name lists: give --in-names (or --in-conll) and "
            "--out-names"
        )
    return in_names, out_names


def run_ner_command(args: argparse.Namespace) -> int:
    """Run ``memprobe ner`` with parsed arguments; returns the exit code (0 ok, 2 usage, 3 model)."""
    from memprobe_core.ner.conll import ConllError
    from memprobe_core.ner.labels import LabelError
    from memprobe_core.ner.model import NerModelError
    from memprobe_core.ner.names import NameListError
    from memprobe_core.ner.prompts import PromptError

    try:
        return _run(args)
    except (NerModelError, LabelError) as err:
        print(f"memprobe ner: model error: {err}", file=sys.stderr)
        return EXIT_MODEL
    except (PromptError, NameListError, ConllError, ValueError, OSError) as err:
        print(f"memprobe ner: error: {err}", file=sys.stderr)
        return EXIT_USAGE


def _run(args: argparse.Namespace) -> int:
    from memprobe_core.ner import analyses
    from memprobe_core.ner.embedded import ensure_embedded_ner
    from memprobe_core.ner.model import NerModel
    from memprobe_core.ner.names import build_pairs, split_pairs
    from memprobe_core.ner.prompts import read_prompts, template_prompts
    from memprobe_core.ner.scoring import score_prompts

    started = time.perf_counter()
    prompts = read_prompts(args.prompts) if args.prompts else template_prompts(args.templates, seed=args.seed)
    in_names, out_names = _names(args)
    pairs = build_pairs(in_names, out_names, seed=args.seed, max_pairs=args.pairs, min_words=args.min_words)
    source = ensure_embedded_ner(_progress("training embedded NER model")) if args.model == EMBEDDED else args.model
    model = NerModel.load(source, device=args.device)
    scores = score_prompts(
        model, prompts, pairs, metric=args.metric, batch_size=args.batch_size,
        on_progress=_progress("scoring"),
    )
    summary: dict[str, Any] = scores.summary()
    label = args.model if args.model != EMBEDDED else f"embedded ({source})"
    summary["model"] = {**summary["model"], "model_id": label}
    summary["by_type"] = analyses.m_mem_by_property(scores, "type").to_dict(orient="records")
    if args.dev_fraction:
        dev_pairs, _ = split_pairs(pairs, dev_fraction=args.dev_fraction, seed=args.seed)
        dev_set = set(dev_pairs)
        dev_ids = [i for i, p in enumerate(pairs) if p in dev_set]
        test_ids = [i for i, p in enumerate(pairs) if p not in dev_set]
        dev, test = scores.subset(dev_ids), scores.subset(test_ids)
        summary["dev_test_tau"] = analyses.dev_test_tau(dev, test)
        summary["ensembles"] = analyses.ensemble_table(dev, test).to_dict(orient="records")
    summary["seconds"] = round(time.perf_counter() - started, 1)
    if args.csv or args.names_csv:
        from memprobe_core.audit.export import (
            write_safe_csv,  # lazy: the export helper owns CSV safety
        )

        if args.csv:
            write_safe_csv(analyses.rank_prompts(scores), args.csv)
        if args.names_csv:
            write_safe_csv(scores.name_table(), args.names_csv)
    if args.json:
        print(json.dumps(summary, indent=2, default=float))
    else:
        _print_report(scores, summary, args.top)
    return EXIT_OK


def _print_report(scores, summary: dict[str, Any], top: int) -> None:
    from memprobe_core.ner.analyses import rank_prompts

    pct = lambda v: f"{100 * v:5.1f}%"  # noqa: E731 - local formatter
    print(f"model {summary['model']['model_id']}  metric {summary['metric']}  "
          f"{summary['prompts']} prompts × {summary['pairs']} pairs  ({summary['seconds']} s)")
    print(f"M-MEM mean {pct(summary['m_mem_mean'])} ± {100 * summary['m_mem_std']:.1f}  "
          f"best {pct(summary['m_mem_best'])}  worst {pct(summary['m_mem_worst'])}  "
          f"spread {100 * summary['spread']:.1f} points")
    ranked = rank_prompts(scores)
    show = ranked if len(ranked) <= 2 * top else None
    for title, part in (("best", ranked.head(top)), ("worst", ranked.tail(top))) if show is None else (("all", show),):
        print(f"\n{title} prompts:")
        for row in part.itertuples():
            print(f"  #{row.rank:<4} {pct(row.m_mem)}  {row.type or '?':<13} {row.prompt}")
    print("\nM-MEM by prompt type:")
    for row in summary["by_type"]:
        print(f"  {row['group']:<14} {pct(row['mean'])}  (n={row['count']})")
    if "dev_test_tau" in summary:
        tau = summary["dev_test_tau"]
        shown = "n/a (prompt scores constant on dev or test)" if tau != tau else f"{tau:.3f}"
        print(f"\nKendall tau of prompt scores, dev vs test pairs: {shown}")
        print("ensembles of the top-k dev prompts, M-MEM on the test pairs:")
        rows = summary["ensembles"]
        methods = list(dict.fromkeys(r["method"] for r in rows))
        print("  " + f"{'k':>4}  " + "  ".join(f"{m:>14}" for m in methods) + f"  {'best single':>12}")
        for k in dict.fromkeys(r["k"] for r in rows):
            values = {r["method"]: r["m_mem_test"] for r in rows if r["k"] == k}
            single = next(r["best_single_test"] for r in rows if r["k"] == k)
            print("  " + f"{k:>4}  " + "  ".join(f"{pct(values[m]):>14}" for m in methods)
                  + f"  {pct(single):>12}")
