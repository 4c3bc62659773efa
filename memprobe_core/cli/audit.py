"""``memprobe audit`` and ``memprobe resume``: a dataset × methods × lengths, resumable."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from memprobe_core.attacks import registry
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.audit import load_models, resume_audit, run_audit, start_audit
from memprobe_core.cli import common
from memprobe_core.cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNITS_FAILED
from memprobe_core.cli.output import ProgressBar, echo
from memprobe_core.errors import UsageError
from memprobe_core.executors import EXECUTORS, Executor, make_executor
from memprobe_core.executors.ray import INSTALL_HINT, RayOptions
from memprobe_core.report.build import report_for_run
from memprobe_core.report.text import render_text
from memprobe_core.snippets.corpus import demo_corpus, nonmember_summary
from memprobe_core.snippets.loaders import load_snippets
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store


def add_parsers(sub: argparse._SubParsersAction) -> None:
    audit = common.add_command(
        sub, "audit", "run a dataset × methods × lengths, resumable; print the report"
    )
    audit.add_argument(
        "dataset",
        nargs="?",
        type=Path,
        help="a .txt, .jsonl, .csv or .parquet file (or use --corpus)",
    )
    audit.add_argument("--corpus", action="store_true", help="audit the built-in demo corpus")
    audit.add_argument("--domains", nargs="+", help="--corpus: only these domains (default: all)")
    audit.add_argument(
        "--per-domain", type=int, help="--corpus: at most N snippets per domain (default: all)"
    )
    audit.add_argument(
        "--nonmembers",
        action="store_true",
        help="--corpus: a labelled audit: label the demo snippets `member` and add as many "
        "generated non-members (texts made on this machine that no model can have seen) per "
        "domain; domains legal and code only (default: legal and code); the report then gives "
        "AUROC and TPR at low FPR per signal and method. --per-domain counts members",
    )
    audit.add_argument("--text-column", help="dataset column holding the text (default: text)")
    audit.add_argument("--id-column", help="dataset column holding ids (default: <file>:<row>)")
    audit.add_argument("--domain-column", help="dataset column holding domains (default: none)")
    audit.add_argument("--domain", help="domain of snippets without one (default: unknown)")
    audit.add_argument(
        "--label-column",
        help="dataset column holding member / nonmember labels (case-insensitive), or "
        "true/false, 1/0, yes/no for member; a labelled audit reports AUROC and TPR at low FPR "
        "(default: a column named `label`, else one named `member`, else unlabelled)",
    )
    common.add_txt_mode(audit, "a dataset")
    audit.add_argument(
        "--methods",
        nargs="+",
        choices=registry.method_names(),
        default=registry.default_audit_methods(),
        help="methods to run",
    )
    audit.add_argument(
        "--lengths",
        nargs="+",
        type=int,
        default=[200],
        help="tokens of prefix + suffix, one unit per length",
    )
    audit.add_argument(
        "--limit",
        type=int,
        help="audit only the first N snippets; of a dataset, only the rows up to the Nth "
        "snippet are read, so a part of a file with more rows than --max-snippets can be "
        "audited (default: all)",
    )
    audit.add_argument("--title", default="", help="label shown in `memprobe runs`")
    common.add_models(audit)
    common.add_method_options(audit)
    common.add_recall_shots(audit)
    add_executor_options(audit)
    audit.set_defaults(handler=run)

    resume = common.add_command(
        sub, "resume", "continue an interrupted audit (finished units are kept)"
    )
    resume.add_argument("run", type=int, help="run id (see `memprobe runs`)")
    resume.add_argument("--retry-errors", action="store_true", help="also redo failed units")
    add_executor_options(resume)
    resume.set_defaults(handler=resume_run)


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """``--executor`` and the Ray options (shared by ``audit`` and ``resume``)."""
    group = parser.add_argument_group("where units run")
    group.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="local: one unit at a time in this process; ray: on Ray worker "
        f"actors (needs `{INSTALL_HINT}`)",
    )
    group.add_argument(
        "--ray-address",
        help="ray: `auto` (the cluster this machine joined with "
        "`ray start`) or HOST:PORT of the head (default: start Ray on 127.0.0.1)",
    )
    group.add_argument(
        "--workers",
        type=int,
        help="ray: worker actors (default: as many as the "
        "cluster's CPUs, or GPUs with --gpus-per-worker, fit)",
    )
    group.add_argument(
        "--gpus-per-worker",
        type=float,
        help=f"ray: GPUs each worker reserves (default: {RayOptions.gpus_per_worker:g})",
    )
    group.add_argument(
        "--cpus-per-worker",
        type=float,
        help=f"ray: CPUs each worker reserves (default: {RayOptions.cpus_per_worker:g})",
    )
    group.add_argument(
        "--max-attempts",
        type=int,
        help=f"ray: times a unit is tried when its worker dies (default: {RayOptions.max_attempts})",
    )


def executor_from_args(args: argparse.Namespace) -> Executor:
    """The executor the flags ask for (``UsageError`` for Ray flags without ``--executor ray``)."""
    return make_executor(
        args.executor,
        address=args.ray_address,
        workers=args.workers,
        gpus_per_worker=args.gpus_per_worker,
        cpus_per_worker=args.cpus_per_worker,
        max_attempts=args.max_attempts,
    )


def run(args: argparse.Namespace) -> int:
    """Record a new audit, load its models, run it and print its report."""
    snippets, info = _snippets(args)
    options = common.attack_options(args)
    spec = common.split_spec(args)
    names = common.model_names(args)
    executor = executor_from_args(args)
    store = common.open_store(args)
    # Load before recording the run: an unknown model fails fast and leaves no empty run. On Ray
    # the workers load them (the driver may have no GPU); a worker that cannot says so per unit.
    models = load_models(names, args.methods) if executor.name == "local" else None
    try:
        run_id = start_audit(
            store,
            snippets,
            args.methods,
            args.lengths,
            options,
            names,
            title=args.title,
            split_tokenizer=spec.tokenizer,
            prefix_ratio=spec.prefix_ratio,
            dataset=info,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    echo(
        f"audit run {run_id}: {len(snippets)} snippet(s) × {len(args.methods)} method(s) × "
        f"{len(args.lengths)} length(s)",
        sys.stderr,
    )
    return _run_and_report(store, run_id, models=models, executor=executor)


def resume_run(args: argparse.Namespace) -> int:
    """Continue an audit from where it stopped."""
    executor = executor_from_args(args)
    store = common.open_store(args)
    run = store.get_run(args.run)
    if run["kind"] != "audit":
        raise UsageError(f"run {args.run} is a {run['kind']}, not an audit; only audits resume")
    return _run_and_report(
        store, args.run, models=None, retry_errors=args.retry_errors, executor=executor, resume=True
    )


def _run_and_report(
    store: Store,
    run_id: int,
    *,
    models: ModelSet | None,
    executor: Executor,
    retry_errors: bool = False,
    resume: bool = False,
) -> int:
    bar = ProgressBar(sys.stderr)
    try:
        if resume:
            summary = resume_audit(
                store, run_id, on_progress=bar, retry_errors=retry_errors, executor=executor
            )
        else:
            summary = run_audit(store, run_id, models=models, on_progress=bar, executor=executor)
    finally:
        bar.close()
    if summary.status == "interrupted":
        echo(
            f"interrupted: {summary.done}/{summary.total} units done; continue with "
            f"`memprobe resume {run_id}`",
            sys.stderr,
        )
        return EXIT_INTERRUPTED
    # Escaped here, not in render_text: its text also goes to files, which keep it as is.
    echo(render_text(report_for_run(store, run_id)), multiline=True)
    return EXIT_UNITS_FAILED if summary.errors else EXIT_OK


# Flags that only read a dataset file, and flags that only pick from --corpus (argparse dest →
# flag); each is None unless given, so one given where it does not apply is refused, not ignored.
_DATASET_FLAGS = {
    "text_column": "--text-column",
    "id_column": "--id-column",
    "domain_column": "--domain-column",
    "domain": "--domain",
    "label_column": "--label-column",
    "txt_mode": "--txt-mode",
    "encoding": "--encoding",
    "max_bytes": "--max-bytes",
    "max_snippets": "--max-snippets",
}
_CORPUS_FLAGS = {"domains": "--domains", "per_domain": "--per-domain"}


def _check_flags_apply(args: argparse.Namespace) -> None:
    """Refuse a dataset flag with --corpus, a --corpus flag with a dataset, and --txt-mode for a
    dataset that is not a .txt file (each would otherwise be silently ignored)."""
    if args.corpus:
        for dest, flag in _DATASET_FLAGS.items():
            if getattr(args, dest) is not None:
                hint = (
                    "pick the corpus's domains with --domains"
                    if dest == "domain"
                    else "leave it out"
                )
                raise UsageError(
                    f"{flag} applies to a dataset file, not to --corpus (the built-in corpus "
                    f"has its own texts, ids, domains and labels): {hint}"
                )
        return
    for dest, flag in _CORPUS_FLAGS.items():
        if getattr(args, dest) is not None:
            hint = (
                "audit the first N snippets with --limit N"
                if dest == "per_domain"
                else "a dataset's domains come from --domain-column and --domain"
            )
            raise UsageError(f"{flag} applies to --corpus, not to a dataset file: {hint}")
    if args.nonmembers:
        raise UsageError(
            "--nonmembers adds generated non-members to the built-in corpus: use it with "
            "--corpus (a dataset file carries its own labels: see --label-column)"
        )
    suffix = args.dataset.suffix.lower()
    if args.txt_mode is not None and suffix != ".txt":
        raise UsageError(
            f"--txt-mode applies to .txt datasets only; {args.dataset} is a "
            f"{suffix or 'file without extension'} dataset with one snippet per row: leave it out"
        )


def _snippets(args: argparse.Namespace) -> tuple[list[Snippet], dict[str, Any]]:
    if bool(args.dataset) == bool(args.corpus):
        raise UsageError("give a dataset file or --corpus (one of the two)")
    _check_flags_apply(args)
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: give 1 or more")
    if args.corpus:
        snippets = demo_corpus(
            domains=args.domains, limit_per_domain=args.per_domain, nonmembers=args.nonmembers
        )
        info: dict[str, Any] = {
            "source": "built-in corpus",
            "domains": args.domains,
            "per_domain": args.per_domain,
        }
        if args.nonmembers:
            info["nonmembers"] = nonmember_summary()
    else:
        loaded = load_snippets(
            args.dataset,
            text_column="text" if args.text_column is None else args.text_column,
            id_column=args.id_column,
            domain_column=args.domain_column,
            domain=args.domain,
            label_column=args.label_column,
            limit=args.limit,  # rows after the Nth snippet are never read
            **common.file_options(args),
        )
        for rejection in loaded.rejected:
            echo(f"{args.dataset}: row {rejection.row} skipped: {rejection.reason}", sys.stderr)
        snippets = loaded.snippets
        info = {
            "source": str(args.dataset),
            "rejected": [{"row": r.row, "reason": r.reason} for r in loaded.rejected],
        }
    if args.limit is not None:
        snippets = snippets[: args.limit]
    return snippets, info
