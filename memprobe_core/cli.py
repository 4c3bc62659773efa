"""The ``memprobe`` command: probe one snippet, run and resume audits, list runs, report, export.

Every run is recorded in the run store (``--store``, default ``~/.cache/memprobe/runs.sqlite`` or
``$MEMPROBE_STORE``), every scored candidate as it is scored, so nothing is lost to a crash.

Exit codes:
    0    everything asked for was done.
    1    the run finished but some units failed (their errors are in the report).
    2    bad usage or input (unknown method, unreadable dataset, unknown run, unwritable output,
         a store from a newer memprobe).
    3    a model could not be loaded or queried.
    130  interrupted (Ctrl-C); an audit can be continued with ``memprobe resume RUN``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from pathlib import Path
from typing import Any, get_args

from memprobe_core.attacks.common import AttackOptions
from memprobe_core.attacks.result import METHOD_LABELS, AttackEvent
from memprobe_core.cli_output import (
    LiveTable,
    ProgressBar,
    print_corpus,
    print_result,
    print_runs,
)
from memprobe_core.config import (
    DEFAULT_PREFIX_RATIO,
    OUTPUT_WINDOWS,
    ROUGE_TOKENIZERS,
    ROUGE_VARIANTS,
    ScoringConfig,
)
from memprobe_core.data import DataError, Snippet
from memprobe_core.loaders import TxtMode

log = logging.getLogger("memprobe")

EXIT_OK, EXIT_UNITS_FAILED, EXIT_USAGE, EXIT_MODEL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DEFAULT_AUDIT_METHODS = ["ps_base", "ps_inst", "interactive"]
TXT_MODES: tuple[str, ...] = get_args(TxtMode)

EPILOG = """\
exit codes:
  0    done
  1    the run finished but some units failed (see `memprobe report RUN`)
  2    bad usage or input (unknown method, bad dataset, unknown run, unwritable output,
       store made by a newer memprobe)
  3    a model could not be loaded or queried
  130  interrupted (Ctrl-C); continue an audit with `memprobe resume RUN`

models: embedded short names (gemma-3-270m, smollm2-135m-instruct), hub ids, local folders or
GGUF files, or fake / fake:<mode> (deterministic test backend).
methods: """ + ", ".join(f"{k} ({v})" for k, v in METHOD_LABELS.items())


class _Help(argparse.RawDescriptionHelpFormatter):
    """Appends the default to each option's help, unless the help already states it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        # Identity checks: a default of 0 is worth showing, though 0 == False.
        if "default" in text or default is None or default is False or default == "" \
                or default is argparse.SUPPRESS:
            return text
        if action.option_strings or action.nargs in ("?", "*"):
            shown = " ".join(map(str, default)) if isinstance(default, list) else "%(default)s"
            text += f" (default: {shown})"
        return text


class UsageError(Exception):
    """Bad usage or input detected after parsing (exit code 2)."""


# --- parser ---------------------------------------------------------------------------------------
def _add_models(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("models")
    group.add_argument("--victim", help="audited model (default: the embedded gemma-3-270m)")
    group.add_argument("--base", help="base model for P-S-Base and GCG (default: gemma-3-270m)")
    group.add_argument("--attacker", help="attacker model (default: smollm2-135m-instruct)")
    group.add_argument("--init", help="model writing the first prompt (default: the attacker)")
    group.add_argument("--reverse", help="reverse LM for reverse_lm (default: "
                       "afterless/reverse-pythia-160m, needs the hub)")
    group.add_argument("--backend", help="backend for every model: hf, openai, vllm, fake "
                       "(default: chosen from the name)")
    group.add_argument("--device", help="cuda or cpu (default: cuda when present)")
    group.add_argument("--dtype", help="bfloat16, float16 or float32 (default: bf16 on CUDA, "
                       "fp32 on CPU)")


def _add_txt_mode(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--txt-mode", choices=TXT_MODES, default="file",
                        help=f"{what} ending in .txt: the whole file is one snippet (file) or "
                             "each blank-line-separated block is one (blocks)")


def _add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("method options")
    group.add_argument("--alpha", type=float, help="weight of Mem in the objective, 0..1 "
                       "(default: the paper's table by domain and length, 0.5 otherwise)")
    group.add_argument("--rounds", type=int, default=3, help="refinement rounds T (interactive)")
    group.add_argument("--n", type=int, default=24, help="candidates per round (interactive)")
    group.add_argument("--seed", type=int, default=0, help="seed of every sampled generation")
    group.add_argument("--access", choices=("full", "partial"), default="full",
                       help="attacker sees the whole snippet or only the prefix")
    group.add_argument("--gcg-steps", type=int, default=30, help="GCG optimisation steps")
    group.add_argument("--no-chat-template", action="store_true",
                       help="P-S-Inst: raw prefix only, not also inside the victim's chat template")
    group.add_argument("--rouge-variant", choices=ROUGE_VARIANTS, default="recall",
                       help="ROUGE-L component scored")
    group.add_argument("--rouge-tokenizer", choices=ROUGE_TOKENIZERS, default="rouge",
                       help="rouge (paper; drops non-ASCII) or unicode")
    group.add_argument("--no-stemmer", action="store_true",
                       help="score without the Porter stemmer (default: stemmer on, as the paper)")
    group.add_argument("--output-window", choices=OUTPUT_WINDOWS, default="first",
                       help="which len(suffix) tokens of the output are scored")
    group.add_argument("--split-tokenizer", choices=("model", "whitespace"), default="model",
                       help="cut snippets by the victim's tokens or by whitespace words")
    group.add_argument("--prefix-ratio", type=float, default=DEFAULT_PREFIX_RATIO,
                       help="prefix share of each split")


def build_parser() -> argparse.ArgumentParser:
    """The ``memprobe`` argument parser (its ``--help`` is the manual)."""
    parser = argparse.ArgumentParser(
        prog="memprobe", formatter_class=_Help, epilog=EPILOG,
        description="Measure how much of its training data a language model gives back.",
    )
    parser.add_argument("--store", type=Path, help="run store file (default: $MEMPROBE_STORE or "
                        "~/.cache/memprobe/runs.sqlite)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text, epilog=EPILOG,
                              formatter_class=_Help)

    probe = command("probe", "probe one snippet with one method and show each round live")
    probe.add_argument("text", nargs="?", help="the snippet text (or use --file / --corpus-id)")
    probe.add_argument("--file", type=Path, help="read the snippet from a .txt file (see "
                       "--txt-mode) or the first row of a .jsonl/.csv/.parquet file")
    _add_txt_mode(probe, "--file")
    probe.add_argument("--corpus-id", help="a snippet of the built-in corpus (`memprobe corpus`)")
    probe.add_argument("--domain", default="unknown", help="domain of a text/file snippet; picks α")
    probe.add_argument("--method", choices=list(METHOD_LABELS), default="interactive",
                       help="extraction method")
    probe.add_argument("--length", type=int, default=200, help="tokens of prefix + suffix")
    probe.add_argument("--json", action="store_true", help="print the whole result as JSON "
                       "(the live table then goes to stderr)")
    _add_models(probe)
    _add_options(probe)

    audit = command("audit", "run a dataset × methods × lengths, resumable; print the report")
    audit.add_argument("dataset", nargs="?", type=Path,
                       help="a .txt, .jsonl, .csv or .parquet file (or use --corpus)")
    audit.add_argument("--corpus", action="store_true", help="audit the built-in demo corpus")
    audit.add_argument("--domains", nargs="+", help="--corpus: only these domains (default: all)")
    audit.add_argument("--per-domain", type=int, help="--corpus: at most N snippets per domain "
                       "(default: all)")
    audit.add_argument("--text-column", default="text", help="dataset column holding the text")
    audit.add_argument("--id-column", help="dataset column holding ids (default: <file>:<row>)")
    audit.add_argument("--domain-column", help="dataset column holding domains (default: none)")
    audit.add_argument("--domain", help="domain of snippets without one (default: unknown)")
    _add_txt_mode(audit, "a dataset")
    audit.add_argument("--methods", nargs="+", choices=list(METHOD_LABELS),
                       default=DEFAULT_AUDIT_METHODS, help="methods to run")
    audit.add_argument("--lengths", nargs="+", type=int, default=[200],
                       help="tokens of prefix + suffix, one unit per length")
    audit.add_argument("--limit", type=int, help="audit only the first N snippets (default: all)")
    audit.add_argument("--title", default="", help="label shown in `memprobe runs`")
    _add_models(audit)
    _add_options(audit)

    resume = command("resume", "continue an interrupted audit (finished units are kept)")
    resume.add_argument("run", type=int, help="run id (see `memprobe runs`)")
    resume.add_argument("--retry-errors", action="store_true", help="also redo failed units")

    runs = command("runs", "list the runs in the store, newest first")
    runs.add_argument("--limit", type=int, default=20, help="show at most this many runs")
    runs.add_argument("--json", action="store_true", help="print JSON instead of a table")

    report = command("report", "aggregate a run: Table 1 with intervals, paired gains, PII, cost")
    report.add_argument("run", type=int, help="run id (see `memprobe runs`)")
    report.add_argument("--csv", type=Path, help="write one row per finished unit, with manifest "
                        "columns, as formula-safe CSV")
    report.add_argument("--table-csv", type=Path, help="write Table 1 as formula-safe CSV")
    report.add_argument("--candidates-csv", type=Path, help="write every scored candidate as CSV")
    report.add_argument("--json", action="store_true", help="print the report as JSON")
    report.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    report.add_argument("--ci-seed", type=int, default=0, help="bootstrap seed")

    corpus = command("corpus", "show the built-in demo corpus (domains and snippet ids)")
    corpus.add_argument("--domain", help="only this domain (default: all)")
    corpus.add_argument("--show", metavar="ID", help="print the text of one snippet")

    try:
        from memprobe_core.ner.cli import add_ner_parser
    except ImportError:
        ner = command("ner", "NER memorization audits (not available in this installation)")
        ner.set_defaults(ner_missing=True)
    else:
        add_ner_parser(sub)
    return parser


# --- helpers --------------------------------------------------------------------------------------
def _options(args: argparse.Namespace) -> AttackOptions:
    try:
        scoring = ScoringConfig(variant=args.rouge_variant, stemmer=not args.no_stemmer,
                                tokenizer=args.rouge_tokenizer, output_window=args.output_window)
        return AttackOptions(alpha=args.alpha, scoring=scoring, seed=args.seed, rounds=args.rounds,
                             n_candidates=args.n, access=args.access, gcg_steps=args.gcg_steps,
                             ps_chat_template=not args.no_chat_template)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _names(args: argparse.Namespace) -> Any:
    from memprobe_core.audit import ModelNames

    load_options = {k: getattr(args, k) for k in ("device", "dtype") if getattr(args, k)}
    return ModelNames(victim=args.victim, base=args.base, attacker=args.attacker, init=args.init,
                      reverse=args.reverse, backend=args.backend, load_options=load_options)


def _store(args: argparse.Namespace) -> Any:
    from memprobe_core.store import Store

    return Store(args.store)


def _load_probe_snippet(args: argparse.Namespace) -> Snippet:
    given = [x for x in (args.text, args.file, args.corpus_id) if x]
    if len(given) != 1:
        raise UsageError("give exactly one snippet: TEXT, --file PATH or --corpus-id ID")
    if args.text:
        return Snippet(id="cli", text=args.text, domain=args.domain, source="command line")
    if args.file:
        from memprobe_core.loaders import load_snippets

        loaded = load_snippets(args.file, domain=args.domain, txt_mode=args.txt_mode)
        if not loaded.snippets:
            raise UsageError(f"{args.file}: no usable snippet ({loaded.summary()})")
        if len(loaded.snippets) > 1:
            print(f"note: {args.file} has {len(loaded.snippets)} snippets; probing the first "
                  f"({loaded.snippets[0].id}); use `memprobe audit` for all", file=sys.stderr)
        return loaded.snippets[0]
    from memprobe_core.corpus import demo_corpus

    for snippet in demo_corpus():
        if snippet.id == args.corpus_id:
            return snippet
    raise UsageError(f"corpus id {args.corpus_id!r} not found; `memprobe corpus` lists the ids")


# --- commands -------------------------------------------------------------------------------------
def cmd_probe(args: argparse.Namespace) -> int:
    """One snippet, one method, live round table; the run is stored as kind ``probe``."""
    from memprobe_core.attacks import run_method
    from memprobe_core.audit import load_models
    from memprobe_core.data import split
    from memprobe_core.store import UnitKey

    snippet = _load_probe_snippet(args)
    options = _options(args)
    names = _names(args)
    store = _store(args)
    models = load_models(names, [args.method])
    tokenizer: Any = models.victim.tokenizer if args.split_tokenizer == "model" else None
    piece = split(snippet, "whitespace" if tokenizer is None else tokenizer, args.length,
                  args.prefix_ratio)
    config = {"methods": [args.method], "lengths": [args.length], "options": options.to_dict(),
              "models": names.resolved().to_dict(), "split_tokenizer": args.split_tokenizer,
              "prefix_ratio": args.prefix_ratio}
    run_id = store.create_run("probe", config=config, manifest={"models": models.manifest()},
                              title=f"{args.method} on {snippet.id}")
    unit = UnitKey(snippet.id, args.method, args.length)
    store.add_samples(run_id, [snippet])
    store.add_units(run_id, [unit])
    store.mark_unit_running(run_id, unit)
    live = LiveTable(sys.stderr if args.json else sys.stdout)
    record = store.recorder(run_id, unit)

    def on_event(event: AttackEvent) -> None:
        record(event)
        live(event)

    cancel = threading.Event()
    try:
        result = run_method(args.method, piece, models, options, on_event=on_event, cancel=cancel)
    except KeyboardInterrupt:
        store.set_run_status(run_id, "interrupted")
        print(f"interrupted; candidates so far are in run {run_id}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        store.fail_unit(run_id, unit, f"{type(exc).__name__}: {exc}")
        store.set_run_status(run_id, "failed")
        raise
    store.finish_unit(run_id, unit, result)
    store.set_run_status(run_id, "finished")
    if args.json:
        print(json.dumps({"run_id": run_id, **result.to_dict()}, ensure_ascii=False, indent=2))
    else:
        print_result(run_id, result)
    return EXIT_OK


def _audit_snippets(args: argparse.Namespace) -> tuple[list[Snippet], dict[str, Any]]:
    if bool(args.dataset) == bool(args.corpus):
        raise UsageError("give a dataset file or --corpus (one of the two)")
    if args.corpus:
        from memprobe_core.corpus import demo_corpus

        snippets = demo_corpus(domains=args.domains, limit_per_domain=args.per_domain)
        info: dict[str, Any] = {"source": "built-in corpus", "domains": args.domains,
                                "per_domain": args.per_domain}
    else:
        from memprobe_core.loaders import load_snippets

        loaded = load_snippets(args.dataset, text_column=args.text_column,
                               id_column=args.id_column, domain_column=args.domain_column,
                               domain=args.domain, txt_mode=args.txt_mode)
        for rejection in loaded.rejected:
            print(f"{args.dataset}: row {rejection.row} skipped: {rejection.reason}",
                  file=sys.stderr)
        snippets = loaded.snippets
        info = {"source": str(args.dataset),
                "rejected": [{"row": r.row, "reason": r.reason} for r in loaded.rejected]}
    if args.limit is not None:
        if args.limit < 1:
            raise UsageError(f"--limit {args.limit}: give 1 or more")
        snippets = snippets[: args.limit]
    return snippets, info


def cmd_audit(args: argparse.Namespace) -> int:
    """Record a new audit, load its models, run it and print its report."""
    from memprobe_core.audit import load_models, start_audit

    snippets, info = _audit_snippets(args)
    options = _options(args)
    names = _names(args)
    store = _store(args)
    # Load before recording the run: an unknown model fails fast and leaves no empty run.
    models = load_models(names, args.methods)
    try:
        run_id = start_audit(store, snippets, args.methods, args.lengths, options, names,
                             title=args.title, split_tokenizer=args.split_tokenizer,
                             prefix_ratio=args.prefix_ratio, dataset=info)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    print(f"audit run {run_id}: {len(snippets)} snippet(s) × {len(args.methods)} method(s) × "
          f"{len(args.lengths)} length(s)", file=sys.stderr)
    return _run_and_report(store, run_id, models=models, resume=False)


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue an audit from where it stopped."""
    store = _store(args)
    try:
        run = store.get_run(args.run)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from exc
    if run["kind"] != "audit":
        raise UsageError(f"run {args.run} is a {run['kind']}, not an audit; only audits resume")
    return _run_and_report(store, args.run, models=None, resume=True,
                           retry_errors=args.retry_errors)


def _run_and_report(store: Any, run_id: int, *, models: Any, resume: bool,
                    retry_errors: bool = False) -> int:
    from memprobe_core.audit import resume_audit, run_audit
    from memprobe_core.audit.report import render_text, report_for_run

    bar = ProgressBar(sys.stderr)
    try:
        if resume:
            summary = resume_audit(store, run_id, on_progress=bar, retry_errors=retry_errors)
        else:
            summary = run_audit(store, run_id, models=models, on_progress=bar)
    finally:
        bar.close()
    if summary.status == "interrupted":
        print(f"interrupted: {summary.done}/{summary.total} units done; continue with "
              f"`memprobe resume {run_id}`", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(render_text(report_for_run(store, run_id)))
    return EXIT_UNITS_FAILED if summary.errors else EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    """List runs."""
    runs = _store(args).list_runs(limit=args.limit)
    if args.json:
        print(json.dumps(runs, ensure_ascii=False, indent=2, default=str))
        return EXIT_OK
    if not runs:
        print("no runs yet; start one with `memprobe probe` or `memprobe audit`")
        return EXIT_OK
    print_runs(runs)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """Print a run's report; optionally write CSVs or JSON."""
    from memprobe_core.audit.export import write_safe_csv
    from memprobe_core.audit.report import render_text, report_for_run, report_to_dict

    store = _store(args)
    try:
        report = report_for_run(store, args.run, resamples=args.resamples, seed=args.ci_seed)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from exc
    written = []
    for path, frame in ((args.csv, lambda: store.results_frame(args.run)),
                        (args.table_csv, lambda: report.table1),
                        (args.candidates_csv, lambda: store.candidates_frame(args.run))):
        if path is not None:
            written.append(write_safe_csv(frame(), path))
    if args.json:
        print(json.dumps(report_to_dict(report), ensure_ascii=False, indent=2, default=str))
    else:
        print(render_text(report))
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def cmd_corpus(args: argparse.Namespace) -> int:
    """Show the demo corpus: counts per domain and the ids (or one snippet's text)."""
    from memprobe_core.corpus import corpus_summary, demo_corpus

    snippets = demo_corpus(domains=[args.domain] if args.domain else None)
    if args.show:
        for snippet in snippets:
            if snippet.id == args.show:
                print(snippet.text)
                return EXIT_OK
        raise UsageError(f"corpus id {args.show!r} not found; `memprobe corpus` lists the ids")
    print_corpus(corpus_summary(), snippets)
    return EXIT_OK


def cmd_ner(args: argparse.Namespace) -> int:
    """Delegate to ``memprobe_core.ner.cli``."""
    if getattr(args, "ner_missing", False):
        raise UsageError("the NER audit module (memprobe_core.ner.cli) is not installed here")
    from memprobe_core.ner.cli import run_ner_command

    return int(run_ner_command(args))


COMMANDS = {"probe": cmd_probe, "audit": cmd_audit, "resume": cmd_resume, "runs": cmd_runs,
            "report": cmd_report, "corpus": cmd_corpus, "ner": cmd_ner}


def main(argv: list[str] | None = None) -> int:
    """Run ``memprobe`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage and 0 after --help
        return int(exc.code or 0)
    if args.verbose and not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    from memprobe_core.attacks.scoring import MissingModelError
    from memprobe_core.audit import AuditBusyError
    from memprobe_core.audit.export import ExportError
    from memprobe_core.models.base import ModelError
    from memprobe_core.store import StoreError

    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ModelError, MissingModelError) as exc:
        print(f"memprobe: model error: {exc}", file=sys.stderr)
        return EXIT_MODEL
    except (UsageError, DataError, StoreError, ExportError, AuditBusyError) as exc:
        print(f"memprobe: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
