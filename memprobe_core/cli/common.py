"""What every ``memprobe`` command shares: the help formatter, option groups, option readers."""

from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import fields
from pathlib import Path
from types import UnionType
from typing import Any, Union, cast, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

from memprobe_core.attacks import registry
from memprobe_core.attacks.options import (
    BUILT_IN_CLASSES,
    MAX_LENGTH,
    MAX_SNIPPETS,
    AttackOptions,
)
from memprobe_core.cli.errors import EPILOG_EXIT_CODES
from memprobe_core.cli.option_flags import add_flag_of, add_flags, flag_problem, read_flags
from memprobe_core.config import MAX_INT64, SEED_RANGE, ScoringConfig
from memprobe_core.errors import UsageError
from memprobe_core.membership import MeasureOptions
from memprobe_core.models import dtypes
from memprobe_core.models.urls import base_url_problem
from memprobe_core.option_fields import check_size
from memprobe_core.report.stats import DEFAULT_RESAMPLES, MAX_RESAMPLES, MIN_RESAMPLES
from memprobe_core.runs.roles import ROLES, ModelNames, default_model_names
from memprobe_core.runs.unit import SplitSpec
from memprobe_core.snippets.loaders import MAX_FILE_BYTES, MAX_FILE_SNIPPETS, LoadSpec, TxtMode
from memprobe_core.store import Store

TXT_MODES: tuple[str, ...] = get_args(TxtMode)

# Size options that are not fields of an option class, checked right after parsing (argparse
# dest → flag, lowest, highest), so a typo such as `--length 1000000000` is refused in one line
# before a store is opened or a model loaded. The option classes' flags are checked from their
# declarations (:func:`memprobe_core.cli.option_flags.flag_problem`).
CLI_SIZE_LIMITS: dict[str, tuple[str, int, int]] = {
    "length": ("--length", 2, MAX_LENGTH),
    "lengths": ("--lengths", 2, MAX_LENGTH),
    "limit": ("--limit", 1, MAX_SNIPPETS),
    "per_domain": ("--per-domain", 1, MAX_SNIPPETS),
    "max_bytes": ("--max-bytes", 1, 4 * MAX_FILE_BYTES),
    "ci_seed": ("--ci-seed", *SEED_RANGE),
    "run": ("run id", 1, MAX_INT64),  # report / resume / gate: a run id SQLite can hold
    "run_a": ("RUN_A", 1, MAX_INT64),  # diff
    "run_b": ("RUN_B", 1, MAX_INT64),
    "baseline": ("--baseline", 1, MAX_INT64),  # gate
    "top": ("--top", 0, 100_000),
    "max_snippets": ("--max-snippets", 1, MAX_SNIPPETS),
    "dc_pdd_max_bytes": ("--dc-pdd-max-bytes", 1, 4 * MAX_FILE_BYTES),
    "dc_pdd_max_texts": ("--dc-pdd-max-texts", 1, MAX_SNIPPETS),
    "seed": ("--seed", *SEED_RANGE),  # also `memprobe ner` and `infer`, whose --seed is their own
}


def command_hint(store: str | Path | None, *words: str) -> str:
    """``memprobe [--store PATH] WORDS``: the command line that goes on with a run in ``store``
    (a hint after an interrupt, or on the dashboard). ``--store`` is named whenever a store is
    given (the command's own ``--store``, the dashboard's file): the default store would not
    hold the run."""
    named = ["--store", shlex.quote(str(store))] if store else []
    return " ".join(["memprobe", *named, *words])


def check_sizes(args: argparse.Namespace) -> str | None:
    """The first size or option flag of ``args`` its bounds refuse, as a message (``None``: all
    fine)."""
    for dest, (flag, low, high) in CLI_SIZE_LIMITS.items():
        values = getattr(args, dest, None)
        for value in values if isinstance(values, list) else [values]:
            try:
                check_size(flag, value, low, high)
            except ValueError as exc:
                return str(exc).replace(f"{flag}=", f"{flag} ", 1)
    return flag_problem(args)


EPILOG = (
    EPILOG_EXIT_CODES
    + """

models: embedded short names ("""
    + ", ".join(default_model_names()[:2])
    + """), hub ids, local folders or
GGUF files, or fake / fake:<mode> (deterministic test backend).
methods: """
    + ", ".join(f"{s.name} ({s.label})" for s in registry.specs())
)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends the default to each option's help, unless the help already states it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        # Identity checks: a default of 0 is worth showing, though 0 == False.
        if (
            "default" in text
            or default is None
            or default is False
            or default == ""
            or default is argparse.SUPPRESS
        ):
            return text
        if action.option_strings or action.nargs in ("?", "*"):
            shown = " ".join(map(str, default)) if isinstance(default, list) else "%(default)s"
            text += f" (default: {shown})"
        return text


def add_command(
    sub: argparse._SubParsersAction, name: str, text: str, epilog: str = EPILOG
) -> argparse.ArgumentParser:
    """A sub-command with the shared formatter and epilog."""
    return sub.add_parser(
        name, help=text, description=text, epilog=epilog, formatter_class=HelpFormatter
    )


# The model roles a command may offer (``add_models``), with their help.
ALL_ROLES = ROLES


def add_models(parser: argparse.ArgumentParser, roles: tuple[str, ...] = ALL_ROLES) -> None:
    """The model flags: one per role in ``roles``, then backend, device, dtype and endpoint."""
    group = parser.add_argument_group("models")
    base, instruct, reverse = default_model_names()
    role_help = {
        "victim": ("--victim", f"audited model (default: the embedded {base})"),
        "base": ("--base", f"base model for P-S-Base and GCG (default: {base})"),
        "attacker": ("--attacker", f"attacker model (default: {instruct})"),
        "init": ("--init", "model writing the first prompt (default: the attacker)"),
        "reverse": ("--reverse", f"reverse LM for reverse_lm (default: {reverse}, needs the hub)"),
        "reference": (
            "--reference-model",
            "second model for the reference-ratio membership signal (any tokenizer; "
            "default: none, the signal is left out)",
        ),
    }
    for role in roles:
        flag, text = role_help[role]
        group.add_argument(flag, help=text)
    group.add_argument(
        "--backend",
        help="backend for every model: hf, openai, vllm, fake (default: chosen from the name)",
    )
    group.add_argument("--device", help="cuda or cpu (default: cuda when present)")
    group.add_argument(
        "--dtype",
        action="append",
        metavar="[ROLE=]DTYPE",
        help="weights dtype: auto, bfloat16, float16 or float32, for every role or for one "
        "(attacker=bfloat16); repeat or comma-separate for several (default: auto — bfloat16 "
        "on CUDA; on a CPU, bfloat16 for the attacker and init model where the CPU has AMX or "
        "AVX512-BF16, float32 for every other role)",
    )
    parser.set_defaults(model_roles=roles)
    group.add_argument(
        "--base-url",
        help="OpenAI-compatible endpoint (http://host:8000/v1), or "
        "several, comma-separated; every model that is not embedded or fake is "
        "then queried there (default: none)",
    )
    group.add_argument(
        "--api-key-env",
        help="environment variable holding the endpoint's key; "
        "the key itself is never stored (default: OPENAI_API_KEY)",
    )


def add_txt_mode(parser: argparse.ArgumentParser, what: str) -> None:
    """The options of reading a snippet file: --txt-mode, --encoding, --max-bytes, --max-snippets.

    They default to ``None`` (the loader's defaults, stated in the help), so a command can tell
    a flag that was given from one that was not and refuse one that does not apply."""
    parser.add_argument(
        "--txt-mode",
        choices=TXT_MODES,
        help=f"{what} ending in .txt: the whole file is one snippet (file) or "
        "each blank-line-separated block is one (blocks) (default: file)",
    )
    parser.add_argument(
        "--encoding",
        help=f"text encoding of {what} (.txt, .jsonl, .csv), e.g. latin-1 or cp1252 "
        "(default: utf-8)",
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        help=f"refuse {what} bigger than this many bytes (default: {MAX_FILE_BYTES}, "
        f"{MAX_FILE_BYTES // 2**20} MiB)",
    )
    parser.add_argument(
        "--max-snippets",
        type=int,
        help=f"refuse {what} of more rows than this, before anything is stored or loaded "
        f"(default: {MAX_FILE_SNIPPETS:,})",
    )


def load_spec(args: argparse.Namespace, **fields: Any) -> LoadSpec:
    """How to read the command's file: ``fields`` and the file flags (--txt-mode, --encoding,
    --max-bytes, --max-snippets; a flag not given keeps :class:`LoadSpec`'s default;
    --max-snippets' range is in CLI_SIZE_LIMITS)."""
    return LoadSpec(
        **fields,
        **given(
            txt_mode=args.txt_mode,
            encoding=args.encoding,
            max_bytes=args.max_bytes,
            max_snippets=args.max_snippets,
        ),
    )


def given(**values: Any) -> dict[str, Any]:
    """The keywords a user gave: flags default to ``None`` and then the core's option class
    supplies its own default (one home for every default)."""
    return {name: value for name, value in values.items() if value is not None}


def add_method_options(parser: argparse.ArgumentParser) -> None:
    """The method, scoring, measurement and split flags, generated from the option classes'
    declarations (:mod:`memprobe_core.cli.option_flags`); every default shown is the class's."""
    group = parser.add_argument_group("method options")
    add_flags(group, AttackOptions, skip=("compat",))
    for section, cls in BUILT_IN_CLASSES.items():
        add_flags(group, cls, about=section)
    group.add_argument(
        "--method-option",
        action="append",
        metavar="METHOD.FIELD=VALUE",
        help="any option of a registered method, e.g. gcg.top_k=64, "
        "interactive.attacker_temperature=0.7 or a new method's own; repeatable "
        "(every field: docs/options.md)",
    )
    add_flag_of(group, AttackOptions, "compat")
    add_flags(parser.add_argument_group("scoring (Mem, LCS_P)"), ScoringConfig)
    # --recall-shots and --dc-pdd-cap: `memprobe audit` only (add_recall_shots, add_dc_pdd_options).
    measured = parser.add_argument_group("measured beside Mem")
    add_flags(measured, MeasureOptions, skip=("recall_shots", "dc_pdd_cap"))
    add_flags(parser.add_argument_group("split"), SplitSpec)


def add_recall_shots(parser: argparse.ArgumentParser) -> None:
    """``--recall-shots``: only `memprobe audit` has the labelled texts ReCaLL needs."""
    add_flag_of(parser, MeasureOptions, "recall_shots")


def add_dc_pdd_options(parser: argparse.ArgumentParser) -> None:
    """DC-PDD's frequency source: only `memprobe audit` counts one, once, at its start."""
    group = parser.add_argument_group("DC-PDD (token frequencies of a reference corpus)")
    source = group.add_mutually_exclusive_group()
    source.add_argument(
        "--dc-pdd-corpus",
        type=Path,
        metavar="FILE",
        help="measure DC-PDD with the token frequencies of this reference corpus (.txt: one "
        "text per blank-line block; .jsonl, .csv, .parquet: the `text` column), counted with "
        "the victim's tokenizer when the audit starts and kept in the run's config",
    )
    source.add_argument(
        "--dc-pdd-nonmembers",
        action="store_true",
        help="labelled audits: measure DC-PDD with the token frequencies of the audit's own "
        "non-members (each non-member is scored without its own counts)",
    )
    # How the corpus file is read: its own flags, since the dataset's --encoding, --max-bytes
    # and --max-snippets never reach it (a corpus may be another file in another encoding).
    group.add_argument(
        "--dc-pdd-encoding",
        metavar="ENCODING",
        help="text encoding of the --dc-pdd-corpus file (.txt, .jsonl, .csv), e.g. latin-1 "
        "(default: utf-8)",
    )
    group.add_argument(
        "--dc-pdd-max-bytes",
        type=int,
        metavar="N",
        help=f"refuse a --dc-pdd-corpus file bigger than this many bytes (default: "
        f"{MAX_FILE_BYTES}, {MAX_FILE_BYTES // 2**20} MiB)",
    )
    group.add_argument(
        "--dc-pdd-max-texts",
        type=int,
        metavar="N",
        help=f"refuse a --dc-pdd-corpus file of more texts than this (default: "
        f"{MAX_FILE_SNIPPETS:,})",
    )
    add_flag_of(group, MeasureOptions, "dc_pdd_cap")


def attack_options(args: argparse.Namespace) -> AttackOptions:
    """The method options given on the command line (validated); what was not given keeps the
    option classes' defaults (the compat mode's, for those it sets)."""
    try:
        sections: dict[str, dict[str, Any]] = {
            key: read_flags(args, cls) for key, cls in BUILT_IN_CLASSES.items()
        }
        for text in getattr(args, "method_option", None) or []:
            section, name, value = parse_method_option(text)
            sections.setdefault(section, {})[name] = value
        built = {key: registry.option_sections()[key](**values) for key, values in sections.items()}
        return AttackOptions(
            # A dict: AttackOptions fills the compat mode's output window when not given.
            scoring=cast(ScoringConfig, read_flags(args, ScoringConfig)),
            measure=MeasureOptions(**read_flags(args, MeasureOptions)),
            **{key: built.pop(key) for key in BUILT_IN_CLASSES},
            method_options=built,  # the sections of methods registered beyond the built-in ones
            **read_flags(args, AttackOptions),
        )
    except UsageError:
        raise
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


def parse_method_option(text: str) -> tuple[str, str, Any]:
    """``METHOD.FIELD=VALUE`` (``--method-option``) as ``(options section, field, value)``, the
    value converted to the field's type (``none`` for an optional field's ``None``).

    Raises:
        UsageError: not of that form, an unknown method or field, or a value of the wrong type.
    """
    target, sep, raw = text.partition("=")
    method, dot, name = target.strip().partition(".")
    if not (sep and dot and method and name):
        raise UsageError(f"--method-option {text!r}: write METHOD.FIELD=VALUE, e.g. gcg.top_k=64")
    try:
        spec = registry.get_method(method)
    except UsageError as exc:
        raise UsageError(f"--method-option {text!r}: {exc}") from exc
    if spec.options_class is None or spec.options_key is None:
        raise UsageError(f"--method-option {text!r}: method {method!r} has no options")
    hints = get_type_hints(spec.options_class)
    if name not in hints:
        known = ", ".join(f.name for f in fields(spec.options_class))
        raise UsageError(f"--method-option {text!r}: {method} has no option {name!r}; use {known}")
    try:
        return spec.options_key, name, _typed(raw.strip(), hints[name])
    except ValueError as exc:
        raise UsageError(f"--method-option {text!r}: {exc}") from exc


def _typed(raw: str, hint: Any) -> Any:
    """``raw`` as a value of type ``hint`` (bool, int, float, str, a Literal, or ``X | None``)."""
    kinds = set(get_args(hint)) if get_origin(hint) in (Union, UnionType) else {hint}
    if type(None) in kinds and raw.lower() == "none":
        return None
    kinds.discard(type(None))
    if bool in kinds:
        if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"{raw!r} is not true or false")
        return raw.lower() in ("true", "1", "yes")
    for kind in (int, float):
        if kind in kinds:
            try:
                return kind(raw)
            except ValueError:
                raise ValueError(
                    f"{raw!r} is not a{'n' if kind is int else ''} {kind.__name__}"
                ) from None
    return raw  # a string or a Literal: the options class checks the allowed values


def split_spec(args: argparse.Namespace) -> SplitSpec:
    """The split the flags ask for (``--split-tokenizer``, ``--prefix-ratio``)."""
    try:
        return SplitSpec(**read_flags(args, SplitSpec))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


# What --api-key-env must be: the NAME of an environment variable, never the key itself.
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def model_names(args: argparse.Namespace) -> ModelNames:
    """The model names and load options given on the command line (recorded in the run).

    Checked before anything is stored; no message repeats the value it refuses (it may be a key).

    Raises:
        UsageError: a --base-url with a password, a query string or a fragment in it (a key
            there would be stored with the run) or a line break, or an --api-key-env that is
            not a variable name (most likely the key itself, given where its variable's name
            belongs).
    """
    for url in (args.base_url or "").split(","):
        url = url.strip()
        if urlsplit(url).password:
            raise UsageError(
                "--base-url holds a password; the run config would store it: put "
                "the key in an environment variable named by --api-key-env"
            )
        problem = base_url_problem(url)
        if problem:
            raise UsageError(problem)  # shown with --base-url and --api-key-env (cli_text)
    key_env = getattr(args, "api_key_env", None)
    if key_env and not _VARIABLE_NAME.fullmatch(key_env):
        raise UsageError(
            "the value given to --api-key-env is not a variable name; it looks like a key — put "
            "the key in an environment variable and pass that variable's name, e.g. OPENAI_API_KEY"
        )
    load_options = {
        k: getattr(args, k) for k in ("device", "base_url", "api_key_env") if getattr(args, k)
    }
    roles = getattr(args, "model_roles", ALL_ROLES)
    # A command's roles include those it loads without a flag (init follows the attacker).
    with_init = (*roles, "init") if "attacker" in roles else roles
    asked = dtypes.parse_dtype_flags(args.dtype or [], with_init)
    return ModelNames(
        victim=args.victim,
        base=getattr(args, "base", None),
        attacker=getattr(args, "attacker", None),
        init=getattr(args, "init", None),
        reverse=getattr(args, "reverse", None),
        reference=getattr(args, "reference_model", None),
        backend=args.backend,
        load_options=load_options,
        dtypes=asked,
    )


def add_bootstrap_flags(parser: argparse.ArgumentParser) -> None:
    """``--resamples`` and ``--ci-seed``: the bootstrap of a report's or a diff's intervals."""
    parser.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        help=f"bootstrap resamples of the intervals ({MIN_RESAMPLES}-{MAX_RESAMPLES})",
    )
    parser.add_argument("--ci-seed", type=int, default=0, help="bootstrap seed")


def open_store(args: argparse.Namespace) -> Store:
    path: Path | None = args.store
    return Store(path)
