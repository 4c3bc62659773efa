"""``memprobe probe``: one snippet, one method, a live round table; stored as a ``probe`` run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memprobe_core.attacks import registry
from memprobe_core.attacks.interactive import METHOD as ATTACKER_LOOP
from memprobe_core.cli import common
from memprobe_core.cli.errors import EXIT_INTERRUPTED, EXIT_OK
from memprobe_core.cli.output import LiveTable, echo, print_result, terminal_json, terminal_safe
from memprobe_core.config import DEFAULT_LENGTH
from memprobe_core.errors import UsageError
from memprobe_core.models.live import LiveTap, watching
from memprobe_core.runs.probe import run_probe, start_probe
from memprobe_core.runs.roles import load_models
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.loaders import load_snippets
from memprobe_core.snippets.split import Snippet


def add_parser(sub: argparse._SubParsersAction) -> None:
    probe = common.add_command(
        sub, "probe", "probe one snippet with one method and show each round live"
    )
    probe.add_argument("text", nargs="?", help="the snippet text (or use --file / --corpus-id)")
    probe.add_argument(
        "--file",
        type=Path,
        help="read the snippet from a .txt file (see "
        "--txt-mode) or the first row of a .jsonl/.csv/.parquet file",
    )
    common.add_txt_mode(probe, "--file")
    probe.add_argument("--corpus-id", help="a snippet of the built-in corpus (`memprobe corpus`)")
    probe.add_argument("--domain", default="unknown", help="domain of a text/file snippet; picks α")
    probe.add_argument(
        "--method",
        choices=registry.method_names(),
        default=ATTACKER_LOOP,
        help=f"extraction method (default: {ATTACKER_LOOP}, the paper's attacker loop)",
    )
    probe.add_argument(
        "--length", type=int, default=DEFAULT_LENGTH, help="tokens of prefix + suffix"
    )
    probe.add_argument(
        "--json",
        action="store_true",
        help="print the whole result as JSON (the live table then goes to stderr)",
    )
    common.add_models(probe)
    common.add_method_options(probe)
    probe.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Record the probe, run its one unit with a live table, print the result."""
    snippet = _snippet(args)
    options = common.attack_options(args)
    spec = common.split_spec(args)
    names = common.model_names(args)
    store = common.open_store(args)
    models = load_models(names, [args.method])
    run_id = start_probe(
        store,
        snippet,
        [args.method],
        args.length,
        models,
        options,
        model_names=names.resolved().to_dict(),
        split_spec=spec,
        title=f"{args.method} on {snippet.id}",
    )
    tap = LiveTap()  # on a terminal the table also shows each answer being written
    try:
        with watching(tap), LiveTable(sys.stderr if args.json else sys.stdout, tap) as live:
            (outcome,) = run_probe(store, run_id, models, on_event=lambda unit: live)
    except KeyboardInterrupt:
        echo(f"interrupted; candidates so far are in run {run_id}", sys.stderr)
        return EXIT_INTERRUPTED
    if outcome.exception is not None:
        raise outcome.exception  # recorded on the unit; its type decides the exit code
    assert outcome.result is not None
    if args.json:
        echo(terminal_json({"run_id": run_id, **outcome.result.to_dict()}), multiline=True)
    else:
        print_result(run_id, outcome.result)
    return EXIT_OK


def _snippet(args: argparse.Namespace) -> Snippet:
    given = [x for x in (args.text, args.file, args.corpus_id) if x]
    if len(given) != 1:
        raise UsageError("give exactly one snippet: TEXT, --file PATH or --corpus-id ID")
    if args.text:
        return Snippet(id="cli", text=args.text, domain=args.domain, source="command line")
    if args.file:
        loaded = load_snippets(args.file, common.load_spec(args, domain=args.domain))
        if not loaded.snippets:
            raise UsageError(terminal_safe(f"{args.file}: no usable snippet ({loaded.summary()})"))
        if len(loaded.snippets) > 1:
            echo(
                f"note: {args.file} has {len(loaded.snippets)} snippets; probing the first "
                f"({loaded.snippets[0].id}); use `memprobe audit` for all",
                sys.stderr,
            )
        return loaded.snippets[0]
    for snippet in demo_corpus():
        if snippet.id == args.corpus_id:
            return snippet
    raise UsageError(f"corpus id {args.corpus_id!r} not found; `memprobe corpus` lists the ids")
