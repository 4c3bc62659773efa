"""``memprobe report RUN``: Table 1 with intervals, paired gains, PII, cost, membership; CSV, JSON,
HTML."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from memprobe_core.cli import common
from memprobe_core.cli.errors import EXIT_OK
from memprobe_core.cli.output import show_with_files, terminal_json
from memprobe_core.config import SELECTIONS
from memprobe_core.membership.blind import controls_frame
from memprobe_core.membership.evaluate import DEFAULT_FPR_RULE, FPR_RULES
from memprobe_core.membership.inference import check_significance
from memprobe_core.report.build import (
    Report,
    report_for_run,
    report_to_dict,
)
from memprobe_core.report.export import readable_export, write_safe_csv
from memprobe_core.report.text import render_text
from memprobe_core.store import Store


@dataclass(frozen=True)
class CsvExport:
    """One ``--X-csv`` option of ``memprobe report``: its flag, its help and the frame it writes."""

    flag: str
    help: str
    frame: Callable[[Report, Store, int], pd.DataFrame]


CSV_EXPORTS: tuple[CsvExport, ...] = (
    CsvExport(
        "csv",
        "write one row per finished unit, with manifest columns, as formula-safe CSV",
        lambda report, store, run: readable_export(store.results_frame(run)),
    ),
    CsvExport("table-csv", "write Table 1 as formula-safe CSV", lambda report, *_: report.table1),
    CsvExport(
        "membership-csv",
        "write the membership table (labelled audits: AUROC, TPR at 1 %% / 0.1 %% FPR with "
        "intervals, per signal and method) as formula-safe CSV",
        lambda report, *_: report.membership,
    ),
    CsvExport("roc-csv", "write the ROC curve points as CSV", lambda report, *_: report.roc),
    CsvExport(
        "controls-csv",
        "write the validity controls (labelled audits: the blind baseline, which never sees "
        "the model, and the random split of the members, per score) as formula-safe CSV",
        lambda report, *_: controls_frame(report.blind_baseline, report.random_split),
    ),
    CsvExport(
        "candidates-csv",
        "write every scored candidate as CSV",
        lambda report, store, run: readable_export(store.candidates_frame(run)),
    ),
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    report = common.add_command(
        sub, "report", "aggregate a run: Table 1 with intervals, paired gains, PII, cost"
    )
    report.add_argument("run", type=int, help="run id (see `memprobe runs`)")
    for export in CSV_EXPORTS:
        report.add_argument(f"--{export.flag}", type=Path, help=export.help)
    report.add_argument(
        "--html",
        type=Path,
        help="write the report as one self-contained HTML file (charts, manifest, prompts and "
        "outputs; opens offline)",
    )
    report.add_argument("--json", action="store_true", help="print the report as JSON")
    common.add_bootstrap_flags(report)
    report.add_argument(
        "--select",
        choices=SELECTIONS,
        default="objective",
        help="which Mem Table 1 shows: objective (Mem of p* = argmax O, "
        "Algorithm 1), max_mem (highest Mem in the trace, an upper bound) "
        "or reference (the reference code's best_rougeL); named in the title",
    )
    report.add_argument(
        "--fpr-rule",
        choices=tuple(FPR_RULES),
        default=DEFAULT_FPR_RULE,
        help="TPR at 1 %% / 0.1 %% FPR over thresholds with FPR <= the target (le) or FPR < "
        "the target (lt, mimir's convention); they differ when target x non-members is whole; "
        "named in the report",
    )
    report.add_argument(
        "--significance",
        type=float,
        help="dataset-inference runs (`memprobe infer`): the level of the one-sided test "
        "(default: the level the run was made with)",
    )
    report.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print a run's report; optionally write CSVs, JSON or a self-contained HTML file."""
    store = common.open_store(args)
    report = report_for_run(
        store,
        args.run,
        resamples=args.resamples,
        seed=args.ci_seed,
        select=args.select,
        fpr_rule=args.fpr_rule,
        **(
            {"inference": {"significance": check_significance(args.significance)}}
            if args.significance is not None
            else {}
        ),
    )
    written = [
        write_safe_csv(export.frame(report, store, args.run), path)
        for export in CSV_EXPORTS
        if (path := getattr(args, export.flag.replace("-", "_"))) is not None
    ]
    if args.html is not None:
        # Imported here: plotly's figures and Jinja2 cost every other command's start-up.
        from memprobe_core.report.html import render_html, write_html

        written.append(write_html(render_html(report, store, args.run), args.html))
    # Escaped when shown, not in render_text: its text also goes to files, which keep it as is.
    shown = terminal_json(report_to_dict(report)) if args.json else render_text(report)
    show_with_files(shown, written)
    return EXIT_OK
