"""``memprobe audit`` and ``memprobe resume``: a dataset × methods × lengths, resumable."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from memprobe_core.attacks import registry
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.signals_only import METHOD as SIGNALS_ONLY
from memprobe_core.attacks.verbatim_only import METHOD as VERBATIM_METHOD
from memprobe_core.audit import load_models, resume_audit, run_audit, start_audit
from memprobe_core.cli import common, release
from memprobe_core.cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNITS_FAILED
from memprobe_core.cli.output import ProgressBar, echo, terminal_json, terminal_safe
from memprobe_core.config import DEFAULT_LENGTH
from memprobe_core.errors import OptionError, UsageError
from memprobe_core.executors import EXECUTORS, Executor, make_executor
from memprobe_core.executors.ray import INSTALL_HINT, RayOptions
from memprobe_core.measuring import dc_pdd
from memprobe_core.membership import canaries
from memprobe_core.models.measure_cache import tokenizer_name
from memprobe_core.report.build import report_for_run, report_to_dict
from memprobe_core.report.text import render_text
from memprobe_core.runs.roles import ModelNames
from memprobe_core.snippets.corpus import demo_corpus, nonmember_summary
from memprobe_core.snippets.dated import dated_split, dated_summary
from memprobe_core.snippets.loaders import load_snippets
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store

log = logging.getLogger(__name__)


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
    audit.add_argument(
        "--dated-split",
        action="store_true",
        help="--corpus: a labelled audit of one genre split by date instead: release notes "
        "installed packages ship, members dated a year before the embedded victim's training "
        "cut-off, non-members dated after its release (docs/method.md §11); --per-domain N keeps "
        "N members and N non-members",
    )
    audit.add_argument(
        "--canaries",
        action="store_true",
        help="--corpus: a labelled audit where membership is the only difference: a random "
        "half of a generated pool (one domain, --domains legal|code, default legal) is "
        "fine-tuned into a copy of the embedded victim (minutes on a CPU, once; cached), which "
        "becomes the victim and base; --per-domain N: N members and N non-members (default "
        "20; docs/method.md §11)",
    )
    audit.add_argument(
        "--canary-epochs",
        type=int,
        help="--canaries: passes over the members when fine-tuning (fewer: a weaker, more "
        f"pre-training-like exposure; default: {canaries.CanarySettings.epochs})",
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
        help=f"methods to run (default: {' '.join(registry.default_audit_methods())})",
    )
    audit.add_argument(
        "--verbatim-only",
        action="store_true",
        help="no generation: k-extractability and the greedy match length from one "
        "teacher-forced pass per snippet, beside the membership signals (the method "
        "`verbatim`; the same numbers greedy P-S generation gives, in forward passes)",
    )
    audit.add_argument(
        "--lengths",
        nargs="+",
        type=int,
        default=[DEFAULT_LENGTH],
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
    common.add_dc_pdd_options(audit)
    add_executor_options(audit)
    release.add_gate_flags(audit, required=False)
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
    group.add_argument(
        "--prefetch-window",
        type=int,
        metavar="N",
        help="ray: units of a batched method (--verbatim-only) a worker is given together, "
        "their teacher-forced passes batched as the local executor batches them; 1: none "
        f"(default: {RayOptions.prefetch_window})",
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
        prefetch_window=args.prefetch_window,
    )


def audit_methods(args: argparse.Namespace) -> list[str]:
    """The methods the flags ask for: ``--methods``, ``--verbatim-only`` or the default.

    Raises:
        UsageError: both ``--methods`` and ``--verbatim-only``.
    """
    if args.verbatim_only:
        if args.methods:
            raise UsageError(
                "--verbatim-only runs the method `verbatim` alone; drop --methods, or name "
                "verbatim among --methods instead"
            )
        return [VERBATIM_METHOD]
    return list(args.methods or registry.default_audit_methods())


def run(args: argparse.Namespace) -> int:
    """Record a new audit, load its models, run it and print its report."""
    args.methods = audit_methods(args)
    policy = release.read_gate_flags(args)  # a bad policy is refused before anything runs
    options = common.attack_options(args)
    spec = common.split_spec(args)
    executor = executor_from_args(args)
    # Every usage check before the dataset: --canaries fine-tunes a model (minutes) to make it.
    common.model_names(args)  # a missing --dc-pdd-corpus: refused with every named path, in main
    dc_pdd_reading(args)  # a reading flag without the corpus is refused before any work
    store = None
    if args.canaries:  # a bad store is refused before the fine-tuning, not after it
        _canary_settings(args)
        store = common.open_store(args)
    snippets, info = _snippets(args)  # a refused dataset leaves no store file behind
    names = common.model_names(args)  # again: --canaries names its fine-tuned victim
    store = store or common.open_store(args)
    # Load before recording the run: an unknown model fails fast and leaves no empty run. On Ray
    # the workers load them (the driver may have no GPU); a worker that cannot says so per unit.
    models = load_models(names, args.methods) if executor.name == "local" else None
    if models is not None and policy is not None:  # a limit on a signal it cannot give: exit 2
        release.check_signals_measured(policy, args, models.victim)
    options = with_dc_pdd(args, options, snippets, names, models)
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
            loaded=models,  # a method these models cannot serve: exit 3, no run stored
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    echo(
        f"audit run {run_id}: {len(snippets)} snippet(s) × {len(args.methods)} method(s) × "
        f"{len(args.lengths)} length(s)",
        sys.stderr,
    )
    code = run_and_report(store, run_id, models=models, executor=executor, store_flag=args.store)
    if policy is None or code not in (EXIT_OK, EXIT_UNITS_FAILED):
        return code
    # A breach, or failed units, exit 1; the gate's lines say which.
    return max(code, release.gate_and_report(args, run_id, policy))


def resume_run(args: argparse.Namespace) -> int:
    """Continue an audit from where it stopped."""
    executor = executor_from_args(args)
    store = common.open_store(args)
    run = store.get_run(args.run)
    if run["kind"] == "document":
        hint = common.command_hint(args.store, "document", "--resume", str(args.run))
        raise UsageError(f"run {args.run} is a document run; `{hint}` goes on with it")
    if run["kind"] != "audit":
        raise UsageError(f"run {args.run} is a {run['kind']}, not an audit; only audits resume")
    return run_and_report(
        store,
        args.run,
        models=None,
        retry_errors=args.retry_errors,
        executor=executor,
        resume=True,
        store_flag=args.store,
    )


def run_and_report(
    store: Store,
    run_id: int,
    *,
    models: ModelSet | None,
    executor: Executor,
    retry_errors: bool = False,
    resume: bool = False,
    as_json: bool = False,
    store_flag: Path | None = None,
) -> int:
    """Run (or resume) a recorded audit with a progress bar, then print its report (text, or
    JSON with ``as_json``); the exit code says whether it was interrupted or units failed
    (``store_flag``: the ``--store`` given, named in the hint that goes on with the run)."""
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
        hint = common.command_hint(store_flag, "resume", str(run_id))
        echo(
            f"interrupted: {summary.done}/{summary.total} units done; continue with "
            f"`{terminal_safe(hint)}`",
            sys.stderr,
        )
        return EXIT_INTERRUPTED
    report = report_for_run(store, run_id)
    # Escaped here, not in render_text: its text also goes to files, which keep it as is.
    echo(terminal_json(report_to_dict(report)) if as_json else render_text(report), multiline=True)
    return EXIT_UNITS_FAILED if summary.errors else EXIT_OK


# What DC-PDD corpus errors call the reading options: names CLI_FLAGS shows as the flags above.
DC_PDD_READ_OPTIONS = {
    "encoding": "dc_pdd_encoding",
    "max_bytes": "dc_pdd_max_bytes",
    "max_texts": "dc_pdd_max_texts",
}


def dc_pdd_reading(args: argparse.Namespace) -> dict[str, Any]:
    """How the --dc-pdd-corpus file is read (--dc-pdd-encoding, --dc-pdd-max-bytes,
    --dc-pdd-max-texts, as :func:`dc_pdd.reference_texts`'s keywords; those not given keep its
    defaults).

    Raises:
        UsageError: one of them given without --dc-pdd-corpus (it would be ignored).
    """
    reading = common.given(
        encoding=args.dc_pdd_encoding,
        max_bytes=args.dc_pdd_max_bytes,
        max_texts=args.dc_pdd_max_texts,
    )
    if args.dc_pdd_corpus is None and reading:
        flag = "--dc-pdd-" + next(iter(reading)).replace("_", "-")
        raise UsageError(
            f"{flag} says how the --dc-pdd-corpus file is read, and no such file is given: add "
            "--dc-pdd-corpus FILE or leave it out"
        )
    return reading


def with_dc_pdd(
    args: argparse.Namespace,
    options: AttackOptions,
    snippets: list[Snippet],
    names: ModelNames,
    models: ModelSet | None,
) -> AttackOptions:
    """``options`` with DC-PDD's token counts, taken once here with the victim's tokenizer
    (docs/method.md §8): a resume or a Ray worker reads them from the run's config.

    With Ray (``models`` ``None``: the workers load them) the victim is loaded here once, for
    its tokenizer. A victim without a tokenizer here (a black-box endpoint) gets no counts:
    DC-PDD is not measured, with a warning.
    """
    corpus, from_nonmembers = args.dc_pdd_corpus, args.dc_pdd_nonmembers
    reading = dc_pdd_reading(args)
    if corpus is None and not from_nonmembers:
        if args.dc_pdd_cap is not None:
            raise UsageError(
                "--dc-pdd-cap applies to DC-PDD, which needs a frequency source: add "
                "--dc-pdd-corpus FILE or --dc-pdd-nonmembers"
            )
        return options
    if not options.measure.signals:
        raise UsageError(
            "DC-PDD is a membership signal and --no-signals turns them off: leave out one of "
            "--no-signals and --dc-pdd-corpus / --dc-pdd-nonmembers"
        )
    texts: list[str] = []
    if corpus is not None:  # read (and refused when bad) before any model matters
        texts = dc_pdd.reference_texts(
            corpus, named=f"--dc-pdd-corpus {corpus}", options=DC_PDD_READ_OPTIONS, **reading
        )
    victim = (models or load_models(names, [SIGNALS_ONLY])).victim  # the victim alone
    tokenizer = victim.tokenizer
    if tokenizer is None or not victim.white_box:
        log.warning(
            "DC-PDD not measured: the victim %s is scored by its server, whose tokenizer is "
            "not available here to count the reference corpus with",
            names.resolved().victim,
        )
        return options
    name = tokenizer_name(tokenizer)
    if corpus is not None:
        counted = dc_pdd.frequencies(
            tokenizer, texts, source="corpus", origin=str(corpus), tokenizer_name=name
        )
    else:
        counted = dc_pdd.nonmember_frequencies(tokenizer, snippets, name)
    echo(
        f"DC-PDD: {counted.total} tokens ({len(counted.table)} distinct) of {counted.origin} "
        f"counted with {name}",
        sys.stderr,
    )
    return replace(options, measure=replace(options.measure, dc_pdd_frequencies=counted))


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
    if args.canaries:
        raise UsageError(
            "--canaries fine-tunes the embedded victim on generated texts of the built-in "
            "corpus's generator: use it with --corpus"
        )
    if args.dated_split:
        raise UsageError(
            "--dated-split is a labelled selection of the built-in corpus: use it with --corpus "
            "(a dataset file carries its own labels: see --label-column)"
        )
    suffix = args.dataset.suffix.lower()
    if args.txt_mode is not None and suffix != ".txt":
        raise UsageError(
            f"--txt-mode applies to .txt datasets only; {args.dataset} is a "
            f"{suffix or 'file without extension'} dataset with one snippet per row: leave it out"
        )


def _canary_settings(args: argparse.Namespace) -> canaries.CanarySettings:
    """The canary settings the flags ask for (every clash refused; nothing is built)."""
    clashes = [
        f
        for f, on in (("--nonmembers", args.nonmembers), ("--dated-split", args.dated_split))
        if on
    ]
    clashes += [f for f in ("--victim", "--base") if getattr(args, f[2:]) is not None]
    if clashes:
        raise UsageError(
            f"--canaries brings its own labels and its own fine-tuned victim (also the base): "
            f"leave out {', '.join(clashes)}"
        )
    domains = args.domains or ["legal"]
    if len(domains) != 1:
        raise UsageError(
            f"--canaries fine-tunes on one domain; give one of --domains legal or --domains "
            f"code, not {' '.join(domains)}"
        )
    try:
        settings = canaries.CanarySettings(
            domain=domains[0], **common.given(per_side=args.per_domain, epochs=args.canary_epochs)
        )
    except OptionError as exc:
        flags = {"domain": "--domains", "per_side": "--per-domain", "epochs": "--canary-epochs"}
        flag = flags.get(exc.option, exc.option)
        raise UsageError(f"{flag} {exc.value!r}: {exc.problem}") from exc
    return settings


def _canary_snippets(args: argparse.Namespace) -> tuple[list[Snippet], dict[str, Any]]:
    """The canary pool (labelled) and its record; the fine-tuned victim is built when missing."""
    built = canaries.ensure_canaries(
        _canary_settings(args),
        on_progress=lambda step, total, what: echo(
            f"fine-tuning the canary victim (once; cached): step {step}/{total}, {what}",
            sys.stderr,
        ),
    )
    # The fine-tuned copy is the victim, and its own base (P-S-Base asks it too).
    args.victim = args.base = str(built.model_path)
    return built.snippets, {"source": "canaries", "canaries": canaries.summary(built)}


def _snippets(args: argparse.Namespace) -> tuple[list[Snippet], dict[str, Any]]:
    info: dict[str, Any]
    if bool(args.dataset) == bool(args.corpus):
        raise UsageError("give a dataset file or --corpus (one of the two)")
    if args.canary_epochs is not None and not args.canaries:
        raise UsageError("--canary-epochs sets the fine-tuning of --canaries: add --canaries")
    _check_flags_apply(args)  # --limit's range: common.CLI_SIZE_LIMITS, checked in main
    if args.canaries:
        snippets, info = _canary_snippets(args)
    elif args.corpus and args.dated_split:
        if args.nonmembers or args.domains is not None:
            raise UsageError(
                "--dated-split has its own members, non-members and domain (changelog): leave "
                "out --nonmembers and --domains"
            )
        snippets = dated_split(limit=args.per_domain)
        info = {
            "source": "built-in corpus, dated split",
            "per_domain": args.per_domain,
            "dated_split": dated_summary(limit=args.per_domain),
        }
    elif args.corpus:
        snippets = demo_corpus(
            domains=args.domains, limit_per_domain=args.per_domain, nonmembers=args.nonmembers
        )
        info = {
            "source": "built-in corpus",
            "domains": args.domains,
            "per_domain": args.per_domain,
        }
        if args.nonmembers:
            info["nonmembers"] = nonmember_summary()
    else:
        spec = common.load_spec(
            args,
            text_column="text" if args.text_column is None else args.text_column,
            id_column=args.id_column,
            domain_column=args.domain_column,
            domain=args.domain,
            label_column=args.label_column,
            limit=args.limit,  # rows after the Nth snippet are never read
        )
        loaded = load_snippets(args.dataset, spec)
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
