"""``memprobe ner``: score prompts × name pairs on a NER model and report M-MEM.

Examples::

    memprobe ner                                   # embedded MiniLM model, its own name lists
    memprobe ner --templates 100 --pairs 200 --metric all_pairs --csv prompts.csv
    memprobe ner --model dslim/bert-base-NER --in-conll conll2003/ --out-names wikidata.txt \\
        --prompts my_prompts.txt --dev-fraction 0.5 --json

Progress goes to stderr; the report (or ``--json``) to stdout. The run itself is the NER core's
one entry point, :func:`memprobe_core.ner.audit.run_ner_audit` (the dashboard's NER page calls it
too); errors reach the ``memprobe`` command's one exit-code map.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from memprobe_core.cli import common, option_flags
from memprobe_core.cli.errors import EPILOG_EXIT_CODES, EXIT_OK
from memprobe_core.cli.output import echo, terminal_json, terminal_safe
from memprobe_core.ner.audit import NerAuditConfig, run_ner_audit
from memprobe_core.ner.registry import EMBEDDED
from memprobe_core.report.export import write_safe_csv

EXAMPLES = __doc__.split("Examples::")[1].split("Progress")[0]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``memprobe ner`` to the command's sub-parsers."""
    text = "NER memorization audit: M-MEM of prompts on in-train vs out-of-train names"
    parser = common.add_command(sub, "ner", text, epilog=EPILOG_EXIT_CODES)
    parser.description = f"{text}.\n\n{EXAMPLES}"
    model = parser.add_argument_group("model")
    model.add_argument(
        "--model",
        default=EMBEDDED,
        help="token-classification model: hub id, "
        "local folder, or 'embedded' (MiniLM fine-tuned here, trained on first use)",
    )
    model.add_argument("--device", help="cuda or cpu (default: cuda when present)")
    option_flags.add_flag_of(model, NerAuditConfig, "batch_size")
    names = parser.add_argument_group("names (default with --model embedded: its own lists)")
    names.add_argument("--in-names", type=Path, help="in-train names: .txt (one per line) or .csv")
    names.add_argument(
        "--in-conll",
        type=Path,
        help="take in-train names from the PER entities "
        "of a CoNLL-2003 file or folder (its train split)",
    )
    names.add_argument("--out-names", type=Path, help="out-of-train names: .txt or .csv")
    option_flags.add_flag_of(names, NerAuditConfig, "max_pairs")
    option_flags.add_flag_of(names, NerAuditConfig, "min_words")
    option_flags.add_flag_of(names, NerAuditConfig, "dev_fraction")
    prompts = parser.add_argument_group("prompts")
    prompts.add_argument(
        "--prompts",
        type=Path,
        help="prompt file: .txt (one per line) or .csv "
        "(prompt[,type]); each prompt contains {name} exactly once",
    )
    option_flags.add_flag_of(prompts, NerAuditConfig, "templates")
    option_flags.add_flag_of(parser, NerAuditConfig, "metric")
    option_flags.add_flag_of(parser, NerAuditConfig, "seed")
    parser.add_argument("--top", type=int, default=5, help="best and worst prompts to print")
    output = parser.add_argument_group("output")
    output.add_argument("--csv", type=Path, help="write prompt scores as formula-safe CSV")
    output.add_argument(
        "--names-csv", type=Path, help="write per-name confidences as formula-safe CSV"
    )
    output.add_argument(
        "--json", action="store_true", help="print a JSON summary instead of a table"
    )
    parser.set_defaults(handler=run)
    return parser


def _progress(label: str):
    """A stderr progress printer: one line per ~10 %, or an updating line on a terminal."""
    state = {"last": -1}
    tty = sys.stderr.isatty()

    def report(done: int, total: int, message: str) -> None:
        tenth = int(10 * done / max(total, 1))
        if tty:
            end = "\n" if done >= total else ""
            print(
                terminal_safe(f"\r{label}: {message} ({done}/{total})"),
                end=end,
                file=sys.stderr,
                flush=True,
            )
        elif tenth != state["last"] or done >= total:
            state["last"] = tenth
            echo(f"{label}: {message} ({done}/{total})", sys.stderr, flush=True)

    return report


def config_from_args(args: argparse.Namespace) -> NerAuditConfig:
    """The audit config of parsed ``memprobe ner`` arguments (checked: bad values raise here)."""
    return NerAuditConfig(
        models=(args.model,),
        in_names=args.in_names,
        out_names=args.out_names,
        in_conll=args.in_conll,
        prompts=args.prompts,
        device=args.device,
        importance_steps=0,
        attention_pairs=0,  # the CLI reports numbers, not heatmaps
        # What was not given keeps NerAuditConfig's default.
        **option_flags.read_flags(args, NerAuditConfig),
    )


def run(args: argparse.Namespace) -> int:
    """Run the NER audit of the parsed arguments and print (or write) its report."""
    result = run_ner_audit(config_from_args(args), on_progress=_progress("ner"))
    report = next(iter(result.reports.values()))  # the one model of --model
    summary: dict[str, Any] = report.summary()
    summary["seconds"] = result.seconds
    if args.csv:
        write_safe_csv(report.ranked, args.csv)
    if args.names_csv:
        write_safe_csv(report.scores.name_table(), args.names_csv)
    if args.json:
        print(terminal_json(summary))
    else:
        _print_report(report.ranked, summary, args.top)
    return EXIT_OK


def _print_report(ranked: pd.DataFrame, summary: dict[str, Any], top: int) -> None:
    def pct(v):
        return f"{100 * v:5.1f}%"

    echo(
        f"model {summary['model']['model_id']}  metric {summary['metric']}  "
        f"{summary['prompts']} prompts × {summary['pairs']} pairs  ({summary['seconds']} s)"
    )
    echo(
        f"M-MEM mean {pct(summary['m_mem_mean'])} ± {100 * summary['m_mem_std']:.1f}  "
        f"best {pct(summary['m_mem_best'])}  worst {pct(summary['m_mem_worst'])}  "
        f"spread {100 * summary['spread']:.1f} points"
    )
    show = ranked if len(ranked) <= 2 * top else None
    for title, part in (
        (("best", ranked.head(top)), ("worst", ranked.tail(top)))
        if show is None
        else (("all", show),)
    ):
        echo()
        echo(f"{title} prompts:")
        for row in part.itertuples():
            echo(f"  #{row.rank:<4} {pct(row.m_mem)}  {row.type or '?':<13} {row.prompt}")
    echo()
    echo("M-MEM by prompt type:")
    for row in summary["by_type"]:
        echo(f"  {row['group']:<14} {pct(row['mean'])}  (n={row['count']})")
    if "dev_test_tau" in summary:
        tau = summary["dev_test_tau"]
        shown = "n/a (prompt scores constant on dev or test)" if math.isnan(tau) else f"{tau:.3f}"
        echo()
        echo(f"Kendall tau of prompt scores, dev vs test pairs: {shown}")
        echo("ensembles of the top-k dev prompts, M-MEM on the test pairs:")
        rows = summary["ensembles"]
        methods = list(dict.fromkeys(r["method"] for r in rows))
        echo(
            "  " + f"{'k':>4}  " + "  ".join(f"{m:>14}" for m in methods) + f"  {'best single':>12}"
        )
        for k in dict.fromkeys(r["k"] for r in rows):
            values = {r["method"]: r["m_mem_test"] for r in rows if r["k"] == k}
            single = next(r["best_single_test"] for r in rows if r["k"] == k)
            echo(
                "  "
                + f"{k:>4}  "
                + "  ".join(f"{pct(values[m]):>14}" for m in methods)
                + f"  {pct(single):>12}"
            )
