"""``memprobe runs``: the runs in the store, newest first."""

from __future__ import annotations

import argparse

from memprobe_core.cli import common
from memprobe_core.cli.errors import EXIT_OK
from memprobe_core.cli.output import echo, print_runs, terminal_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    runs = common.add_command(sub, "runs", "list the runs in the store, newest first")
    runs.add_argument("--limit", type=int, default=20, help="show at most this many runs")
    runs.add_argument("--json", action="store_true", help="print JSON instead of a table")
    runs.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    runs = common.open_store(args).list_runs(limit=args.limit)
    if args.json:
        echo(terminal_json(runs), multiline=True)
    elif not runs:
        echo("no runs yet; start one with `memprobe probe` or `memprobe audit`")
    else:
        print_runs(runs)
    return EXIT_OK
