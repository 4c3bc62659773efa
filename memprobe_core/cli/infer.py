"""``memprobe infer SUSPECT --heldout HELDOUT``: was the suspect set, as a whole, trained on?

Dataset inference (docs/method.md §10, :mod:`memprobe_core.membership.inference`): the
membership signals of every text of both sets, a weighting learnt on one half, a one-sided Welch
t-test on the other. The run is an audit of the signals-only method over both sets (suspect
texts labelled ``member``, held-out texts ``nonmember``), stored and resumable like any audit
(`memprobe resume RUN`); its report leads with the test, and keeps the blind baseline and the
per-signal AUROC beside it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.signals_only import METHOD
from memprobe_core.audit import (
    SharedTexts,
    TooFewTexts,
    inference_snippets,
    load_models,
    start_inference,
)
from memprobe_core.cli import common
from memprobe_core.cli.audit import (
    add_executor_options,
    executor_from_args,
    run_and_report,
    with_dc_pdd,
)
from memprobe_core.cli.option_flags import add_flag_of, add_flags, read_flags
from memprobe_core.cli.output import echo
from memprobe_core.config import DEFAULT_LENGTH
from memprobe_core.errors import UsageError
from memprobe_core.membership import MeasureOptions
from memprobe_core.membership.inference import DEFAULT_SIGNIFICANCE, check_significance
from memprobe_core.runs.unit import SplitSpec
from memprobe_core.snippets.loaders import load_snippets
from memprobe_core.snippets.split import Snippet


def add_parser(sub: argparse._SubParsersAction) -> None:
    infer = common.add_command(
        sub,
        "infer",
        "dataset inference: was the SUSPECT set used to train the victim? (needs a held-out "
        "set of the same distribution; resumable; prints the test and the report)",
    )
    infer.add_argument(
        "suspect",
        type=Path,
        help="the texts the model may have been trained on: a .txt, .jsonl, .csv or .parquet file",
    )
    infer.add_argument(
        "--heldout",
        type=Path,
        required=True,
        help="texts of the same distribution (sources, time, format) that the model cannot "
        "have seen, same file kinds",
    )
    infer.add_argument("--text-column", help="column holding the text, both files (default: text)")
    infer.add_argument("--id-column", help="column holding ids, both files (default: <file>:<row>)")
    common.add_txt_mode(infer, "the two files")
    infer.add_argument(
        "--lengths",
        nargs="+",
        type=int,
        default=[DEFAULT_LENGTH],
        help="tokens of each text scored (its first N); one test per length",
    )
    add_flags(infer, SplitSpec)
    infer.add_argument(
        "--limit",
        type=int,
        help="use only the first N texts of each file (default: all)",
    )
    infer.add_argument(
        "--significance",
        type=float,
        help=f"level of the one-sided test (default: {DEFAULT_SIGNIFICANCE})",
    )
    infer.add_argument(
        "--seed",
        type=int,
        help=f"seed of the random halves (and of SaMIA's samples; default: {AttackOptions.seed})",
    )
    for name in ("min_k_percent", "samia_samples", "pac_augmentations"):
        add_flag_of(infer, MeasureOptions, name)
    infer.add_argument("--title", default="", help="label shown in `memprobe runs`")
    infer.add_argument(
        "--json", action="store_true", help="print the report as JSON (key dataset_inference)"
    )
    common.add_models(infer)
    common.add_dc_pdd_options(infer)  # --dc-pdd-nonmembers: the held-out set's counts
    add_executor_options(infer)
    infer.set_defaults(handler=run)


def _load(args: argparse.Namespace, path: Path) -> list[Snippet]:
    """One set's texts, as the file gives them (rejected rows named on stderr). A label column
    is not read: the set a file is given as is its texts' label. ``--txt-mode`` applies to a
    ``.txt`` file only, so a ``.txt`` suspect set may go with a ``.csv`` held-out set."""
    spec = common.load_spec(
        args,
        text_column="text" if args.text_column is None else args.text_column,
        id_column=args.id_column,
        limit=args.limit,
        read_labels=False,
    )
    if path.suffix.lower() != ".txt":
        spec = replace(spec, txt_mode="file")
    loaded = load_snippets(path, spec)
    for rejection in loaded.rejected:
        echo(f"{path}: row {rejection.row} skipped: {rejection.reason}", sys.stderr)
    return loaded.snippets[: args.limit] if args.limit is not None else loaded.snippets


def _check_lengths(args: argparse.Namespace, texts: list[Snippet], tokenizer: Any | None) -> None:
    """Refuse, before anything is stored, texts shorter than the longest ``--lengths``: their
    units would fail and the test would run on fewer texts than given. ``tokenizer`` ``None``:
    whitespace words (``--split-tokenizer whitespace``)."""
    need = max(args.lengths)
    unit = "victim tokens" if tokenizer is not None else "words"

    def size(text: str) -> int:
        if tokenizer is None:
            return len(text.split())
        return len(tokenizer.encode(text, add_special_tokens=False))

    for which, path in (
        ("suspect", f"SUSPECT {args.suspect}"),
        ("heldout", f"--heldout {args.heldout}"),
    ):
        short = [
            s.id.removeprefix(f"{which}:")
            for s in texts
            if s.id.startswith(f"{which}:") and size(s.text) < need
        ]
        if short:
            named = ", ".join(short[:5]) + (f" and {len(short) - 5} more" if len(short) > 5 else "")
            raise UsageError(
                f"{path}: {len(short)} text(s) have fewer than {need} {unit} ({named}); "
                f"give a shorter --lengths, or leave those texts out"
            )


def _flag(args: argparse.Namespace, which: str | None) -> str:
    """How the command line gave set ``which`` (``None``: both)."""
    named = {"suspect": f"SUSPECT {args.suspect}", "heldout": f"--heldout {args.heldout}"}
    return named.get(which or "", f"SUSPECT {args.suspect} and --heldout {args.heldout}")


def _named(args: argparse.Namespace, exc: UsageError) -> UsageError:
    """``exc`` (about one set, or about both) naming the arguments that gave them."""
    which = getattr(exc, "which", None)
    path = args.suspect if which == "suspect" else args.heldout
    hint = (
        " (a .txt file is one text; --txt-mode blocks reads one per blank-line-separated block)"
        if isinstance(exc, TooFewTexts) and path.suffix.lower() == ".txt" and not args.txt_mode
        else ""
    )
    return UsageError(f"{_flag(args, which)}: {exc}{hint}")


def _options(args: argparse.Namespace) -> AttackOptions:
    try:
        measure = MeasureOptions(**read_flags(args, MeasureOptions))
        return AttackOptions(measure=measure, **common.given(seed=args.seed))
    except UsageError:
        raise
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    """Record the inference run, score both sets, print the test and the report (--limit's
    range is common.CLI_SIZE_LIMITS', checked in main before any command runs)."""
    significance = check_significance(
        DEFAULT_SIGNIFICANCE if args.significance is None else args.significance
    )
    options = _options(args)
    suspect, heldout = _load(args, args.suspect), _load(args, args.heldout)
    try:
        labelled = inference_snippets(suspect, heldout)  # too small: refused before models load
    except (TooFewTexts, SharedTexts) as exc:
        raise _named(args, exc) from exc
    for which, texts in (("suspect", suspect), ("heldout", heldout)):
        repeats = len(texts) - len({s.text for s in texts})
        if repeats:
            echo(
                f"warning: {_flag(args, which)}: {repeats} text(s) repeat another "
                "of the same set; each copy counts in the test",
                sys.stderr,
            )
    names = common.model_names(args)
    executor = executor_from_args(args)
    store = common.open_store(args)
    spec = common.split_spec(args)
    models = load_models(names, [METHOD]) if executor.name == "local" else None
    if spec.tokenizer == "whitespace":
        _check_lengths(args, labelled, None)
    elif models is not None and models.victim.tokenizer is not None:
        _check_lengths(args, labelled, models.victim.tokenizer)  # Ray: the workers cut them
    options = with_dc_pdd(args, options, labelled, names, models)
    try:
        run_id = start_inference(
            store,
            suspect,
            heldout,
            args.lengths,
            options,
            names,
            significance=significance,
            sources=(str(args.suspect), str(args.heldout)),
            title=args.title or f"infer {args.suspect.name} vs {args.heldout.name}",
            split_tokenizer=spec.tokenizer,
            prefix_ratio=spec.prefix_ratio,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    echo(
        f"inference run {run_id}: {len(suspect)} suspect and {len(heldout)} held-out "
        f"text(s) × {len(args.lengths)} length(s)",
        sys.stderr,
    )
    return run_and_report(
        store, run_id, models=models, executor=executor, as_json=args.json, store_flag=args.store
    )
