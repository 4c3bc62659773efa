"""Whole documents on the command line: ``memprobe nv-recall REFERENCE GENERATED`` (how much of
a reference text a generated text reproduces in long verbatim runs, docs/method.md §18, for text
obtained anywhere) and ``memprobe document`` (the extraction map of a document on a victim,
§19)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from memprobe_core.cli import common, option_flags
from memprobe_core.cli.audit import add_executor_options, executor_from_args
from memprobe_core.cli.errors import EXIT_INTERRUPTED, EXIT_OK
from memprobe_core.cli.output import (
    duration,
    echo,
    show_with_files,
    terminal_json,
    terminal_safe,
)
from memprobe_core.documents.builtin import BUILT_IN_DOCUMENTS, builtin_document
from memprobe_core.documents.continuation import ContinuationOptions
from memprobe_core.documents.continuation_report import (
    continuation_html,
    continuation_json,
    describe_continuation,
    turns_frame,
)
from memprobe_core.documents.continuation_run import (
    StoredContinuation,
    TurnProgress,
    read_continuation,
    run_continuation_stored,
    start_continuation,
)
from memprobe_core.documents.map_near_verbatim import AFTER_WINDOWS, MapBoundOptions
from memprobe_core.documents.map_report import describe_map, map_frame, map_html, map_json
from memprobe_core.documents.map_run import (
    MapProgress,
    PzSetting,
    StoredMap,
    read_map,
    run_map,
    start_map,
)
from memprobe_core.documents.nv_recall import NvRecall, NvRecallOptions, nv_recall
from memprobe_core.documents.reading import read_document
from memprobe_core.documents.stored import MODES, run_mode, switch_endpoint
from memprobe_core.documents.windows import MapOptions
from memprobe_core.errors import UsageError
from memprobe_core.executors.ray import RayExecutor
from memprobe_core.executors.ray_map import ray_scorer
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.models.endpoints import describe_endpoint, endpoint_of
from memprobe_core.option_fields import options_of
from memprobe_core.report.export import write_output, write_safe_csv
from memprobe_core.runs.roles import ModelNames, load_models

EPILOG = """exit codes:
  0    done
  2    a file that is not a readable text document, or a bad threshold"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``memprobe nv-recall``."""
    parser = common.add_command(
        sub,
        "nv-recall",
        "score a generated text against a reference: the share of the reference's words it "
        "reproduces in long verbatim runs (Ahmed et al. 2026)",
        EPILOG,
    )
    parser.add_argument("reference", type=Path, help="the reference text (UTF-8 .txt or .md)")
    parser.add_argument("generated", type=Path, help="the generated text (UTF-8)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the figures as JSON: nv_recall, matched_words, reference_words, "
        "generated_words, missing, additional, blocks, longest_block, block_ranges",
    )
    option_flags.add_flags(parser.add_argument_group("merge thresholds"), NvRecallOptions)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print nv-recall of the two files."""
    reference = read_document(args.reference, "reference")
    generated = read_document(args.generated, "generated text")
    options = NvRecallOptions(**option_flags.read_flags(args, NvRecallOptions))
    found = nv_recall(reference, generated, options)
    shown = terminal_json(found.to_dict()) if args.json else describe(found, options)
    echo(shown, multiline=True)
    return EXIT_OK


def describe(found: NvRecall, options: NvRecallOptions) -> str:
    """Two lines for people (a third when no block was long enough to count)."""
    text = (
        f"nv-recall {found.nv_recall:.4f}: {found.matched_words:,} of {found.reference_words:,} "
        f"reference words in {len(found.blocks):,} block(s), the longest {found.longest_block:,} "
        f"words\ngenerated {found.generated_words:,} words: {found.additional:,} not matched; "
        f"{found.missing:,} reference words missing"
    )
    if not found.blocks:
        text += (
            f"\nno run of {options.min_words_2} or more matched words (--min-words-2; "
            f"{options.min_words_1} before the second merge, --min-words-1): shorter matches "
            "never count"
        )
    return text


DOCUMENT_EPILOG = """exit codes:
  0    done
  2    a document that is not readable text or is too short (for one window, or for the
       opening and the held-back words), options that do not fit, an unknown run, a run another
       process is working on
  3    the victim cannot be loaded, or (map) has no weights: the map needs teacher-forced passes
  130  interrupted (Ctrl-C): what was scored is kept; --resume RUN goes on

examples:
  memprobe document --builtin apache-2.0
  memprobe document book.txt --victim PATH --html map.html --csv windows.csv
  memprobe document book.txt --mode continue --victim NAME --base-url URL --best-of-n 20
  memprobe document --resume 12"""

# The p_z options the map shares with audits (declared once, in MeasureOptions).
PZ_OPTIONS = (
    "pz_temperature",
    "pz_top_k",
    "pz_top_p",
    "discover_p",
    "extraction_window_tokens",
    "extraction_rank_cap",
)
# The near-verbatim search's budget, as probe's (declared once, in MeasureOptions); which
# windows it measures is the map's own option (MapBoundOptions).
NEAR_VERBATIM_OPTIONS = ("near_verbatim_edits", "near_verbatim_beams")
MAP_MEASURE_OPTIONS = PZ_OPTIONS + NEAR_VERBATIM_OPTIONS


def add_document_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``memprobe document``."""
    parser = common.add_command(
        sub,
        "document",
        "how much of a whole document (a book, a report) the victim writes back: the extraction "
        "map of its windows (Cooper et al. 2025) or a continuation scored with nv-recall (Ahmed "
        "et al. 2026); stored and resumable",
        DOCUMENT_EPILOG,
    )
    source = parser.add_argument_group("document (one of)")
    source.add_argument("document", nargs="?", type=Path, help="the document (UTF-8 .txt or .md)")
    source.add_argument(
        "--builtin",
        choices=sorted(BUILT_IN_DOCUMENTS),
        help="a built-in document instead of a file (apache-2.0: the Apache License 2.0 text "
        "an installed package ships)",
    )
    source.add_argument(
        "--resume",
        type=int,
        metavar="RUN",
        help="go on with a stored run (its document, victim and options as recorded)",
    )
    source.add_argument(
        "--show", type=int, metavar="RUN", help="print a stored run (nothing is asked)"
    )
    parser.add_argument(
        "--mode",
        choices=list(MODES),
        default="map",
        help="map: every window's greedy match and p_z by teacher forcing (white-box victims); "
        "continue: an opening probe (Best-of-N where refused), then 'Continue' turn after turn, "
        "scored with nv-recall (any victim) (default: map)",
    )
    parser.add_argument("--title", default="", help="label shown in run lists")
    common.add_models(parser, roles=("victim",))
    parser.add_argument(
        "--switch-endpoint",
        action="store_true",
        help="with --resume RUN and --base-url URL: send the stored run to URL instead of the "
        "endpoint it records, and record the switch in the run. Without it --resume always "
        "goes to the recorded endpoint (--base-url and --backend with --resume are refused)",
    )
    option_flags.add_flags(parser.add_argument_group("map: windows"), MapOptions)
    pz = parser.add_argument_group(
        "map: probabilistic extraction and extraction cost (docs/method.md §14, §21)"
    )
    for name in PZ_OPTIONS:
        option_flags.add_flag_of(pz, MeasureOptions, name)
    near = parser.add_argument_group(
        "map: the near-verbatim lower bound of the least protected windows (docs/method.md §22)"
    )
    option_flags.add_flags(near, MapBoundOptions)
    for name in NEAR_VERBATIM_OPTIONS:
        option_flags.add_flag_of(near, MeasureOptions, name)
    option_flags.add_flags(parser.add_argument_group("continue"), ContinuationOptions)
    add_executor_options(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the figures as JSON")
    out.add_argument(
        "--csv",
        type=Path,
        help="write one row per window (map) or per turn (continue), formula-safe",
    )
    out.add_argument("--html", type=Path, help="write the self-contained HTML report")
    parser.set_defaults(handler=run_document)


Stored = StoredMap | StoredContinuation


def run_document(args: argparse.Namespace) -> int:
    """Start, resume or show a document run; print it and write the files asked for."""
    chosen = [x for x in (args.document, args.builtin, args.resume, args.show) if x is not None]
    if len(chosen) != 1:
        raise UsageError(
            "give exactly one of: a DOCUMENT file, --builtin NAME, --resume RUN or --show RUN"
        )
    _refuse_unused_flags(args)
    # Every flag is checked before a store is opened or a run stored: a refusal leaves no run.
    executor = executor_from_args(args)
    store = common.open_store(args)
    if args.show is not None:
        return _print(args, _read(store, args.show))
    try:
        stored = (
            _resume(args, store, args.resume, executor)
            if args.resume is not None
            else _start(args, store, executor)
        )
    except _Interrupted as stop:
        hint = common.command_hint(args.store, "document", "--resume", str(stop.run_id))
        echo(f"interrupted; what was scored is kept: {terminal_safe(hint)}", sys.stderr)
        return EXIT_INTERRUPTED
    return _print(args, stored)


class _Interrupted(Exception):
    """Ctrl-C (or SIGTERM) while run ``run_id`` was being worked on: its hint is printed once,
    instead of main's bare "interrupted"."""

    def __init__(self, run_id: int) -> None:
        super().__init__(run_id)
        self.run_id = run_id


def _given_flags(args: argparse.Namespace, cls: type, names: tuple[str, ...] = ()) -> list[str]:
    """The flags of ``cls``'s options (those in ``names``, if given) set on the command line."""
    return [
        str(opt.info.flag)
        for opt in options_of(cls)
        if opt.info.flag
        and (not names or opt.name in names)
        and getattr(args, option_flags.dest_of(opt), None) not in (None, False)
    ]


def _refuse_unused_flags(args: argparse.Namespace) -> None:
    """A flag of the other mode, or any run option with --resume / --show, would be silently
    ignored: refused instead, naming it."""
    map_flags = (
        _given_flags(args, MapOptions)
        + _given_flags(args, MeasureOptions, MAP_MEASURE_OPTIONS)
        + _given_flags(args, MapBoundOptions)
    )
    continue_flags = _given_flags(args, ContinuationOptions)
    stored = "--resume" if args.resume is not None else "--show" if args.show is not None else ""
    if stored and (map_flags or continue_flags or args.mode != "map"):
        given = (map_flags + continue_flags + (["--mode"] if args.mode != "map" else []))[0]
        raise UsageError(f"{given} does not apply to {stored}: a stored run keeps its options")
    if stored and args.victim is not None:
        raise UsageError(
            f"--victim does not apply to {stored}: a stored run keeps the victim it was started "
            "with (`memprobe document --show RUN` names it)"
        )
    _refuse_endpoint_flags(args, stored)
    if args.mode == "continue" and map_flags:
        raise UsageError(f"{map_flags[0]} applies to --mode map, not --mode continue")
    if args.mode == "map" and continue_flags:
        raise UsageError(f"{continue_flags[0]} applies to --mode continue (the map is --mode map)")
    if args.executor == "ray" and (args.mode == "continue" or args.show is not None):
        raise UsageError(
            "--executor ray spreads a map's windows; a continuation asks turn after turn and "
            "--show scores nothing"
        )
    # Ray flags of audits that a map's workers have no use for, with why.
    for flag, given, why in (
        (
            "--max-attempts",
            args.max_attempts,
            "a batch whose Ray worker dies stops the map, and --resume RUN redoes it",
        ),
        (
            "--prefetch-window",
            args.prefetch_window,
            "its workers score batches of windows (--batch-windows)",
        ),
    ):
        if given is not None:
            raise UsageError(f"{flag} does not apply to a map: {why}")


def _read(store: Any, run_id: int) -> Stored:
    if run_mode(store, run_id) == "map":
        return read_map(store, run_id)
    return read_continuation(store, run_id)


def _refuse_endpoint_flags(args: argparse.Namespace, stored: str) -> None:
    """A stored run goes on at the endpoint it records: --base-url and --backend with --resume
    would send it elsewhere, so they are refused unless --switch-endpoint says so on purpose."""
    if args.switch_endpoint and (stored != "--resume" or not args.base_url):
        raise UsageError(
            "--switch-endpoint goes with --resume RUN and --base-url URL: it sends a stored run "
            "to that endpoint instead of the one it records"
        )
    if stored == "--show" and (args.base_url or args.backend):
        flag = "--base-url" if args.base_url else "--backend"
        raise UsageError(f"{flag} does not apply to --show: nothing is asked")
    if stored == "--resume" and args.backend:
        raise UsageError(
            "--backend does not apply to --resume: a stored run keeps the backend it was started "
            "with (`memprobe document --show RUN` names its endpoint)"
        )
    if stored == "--resume" and args.base_url and not args.switch_endpoint:
        raise UsageError(
            f"--base-url does not apply to --resume alone: run {args.resume} goes on at the "
            "endpoint it records (`memprobe document --show RUN` names it); to send it to "
            "--base-url instead, add --switch-endpoint (the switch is recorded in the run)"
        )


def stored_model_names(run: dict[str, Any]) -> ModelNames:
    """How to load a document run's victim again: the names the run records (``models``), or
    for a run stored before runs recorded them, its victim's manifest (backend, model id and
    servers). Never the default endpoint: the run's own, or none."""
    config = run["config"]
    if isinstance(config.get("models"), dict):
        return ModelNames.from_dict(config["models"])
    manifest = (run.get("manifest") or {}).get("victim") or {}
    if manifest.get("backend") == "openai" and manifest.get("base_url"):
        return ModelNames(
            victim=str(manifest.get("model_id")),
            backend="openai",
            load_options={"base_url": manifest["base_url"]},
        )
    return ModelNames(victim=str(config["victim"]))


def _resume(args: argparse.Namespace, store: Any, run_id: int, executor: Any) -> Stored:
    mode = run_mode(store, run_id)
    if mode == "map" and args.switch_endpoint:
        raise UsageError(
            f"run {run_id} is an extraction map, scored on the victim's own weights: it has no "
            "endpoint to switch"
        )
    run = store.get_run(run_id)
    recorded = stored_model_names(run)
    given = common.model_names(args)  # where this machine keeps it: device, dtype, key variable
    options = {**recorded.load_options, **given.load_options}
    names = ModelNames.from_dict(
        {
            **recorded.to_dict(),
            "load_options": options,
            "dtypes": {**recorded.dtypes, **given.dtypes},
        }
    )
    victim = load_models(names, ["verbatim"]).victim
    if args.switch_endpoint:
        left = switch_endpoint(store, run_id, victim, names.resolved().to_dict())
        echo(
            f"run {run_id}: switched from {terminal_safe(describe_endpoint(left))} to "
            f"{terminal_safe(describe_endpoint(endpoint_of(victim)))} (recorded in the run)",
            sys.stderr,
        )
    config = run["config"]
    scorer = (
        _scorer(executor, names, config["document"]["text"], PzSetting(**config["pz"]))
        if mode == "map"
        else None
    )
    return _work(store, run_id, mode, victim, scorer)


def _scorer(executor: Any, names: ModelNames, text: str, pz: PzSetting) -> Any:
    """Where a map's batches are scored: here (``None``), or on Ray (``--executor ray``)."""
    if not isinstance(executor, RayExecutor):
        return None
    resolved = names.resolved()
    load_options = dict(resolved.load_options)
    if resolved.backend:
        load_options["backend"] = resolved.backend
    if resolved.dtypes.get("victim"):
        load_options["dtype"] = resolved.dtypes["victim"]  # the workers' victim as this one's
    return ray_scorer(
        executor.options,
        victim=str(resolved.victim),
        load_options=load_options,
        text=text,
        pz=pz,
    )


def _start(args: argparse.Namespace, store: Any, executor: Any) -> Stored:
    text, name = _document_text(args)
    names = common.model_names(args).resolved()
    recorded = names.to_dict()  # how a resume loads the victim again, at the same endpoint
    if args.mode == "map":
        map_options = MapOptions(**option_flags.read_flags(args, MapOptions))
        measure = MeasureOptions(**_given_pz(args))
        pz = PzSetting(
            measure.pz_temperature, measure.pz_top_k, measure.pz_top_p, measure.discover_p
        )
        scorer = _scorer(executor, names, text, pz)
        victim = load_models(names, ["verbatim"]).victim
        run_id = start_map(
            store,
            text,
            victim,
            name=name,
            victim_name=str(names.victim),
            options=map_options,
            pz=pz,
            title=args.title,
            models=recorded,
            cost=measure.inextractability,
            bound=MapBoundOptions(
                **option_flags.read_flags(args, MapBoundOptions),
                edits=measure.near_verbatim_edits,
                beams=measure.near_verbatim_beams,
            ),
        )
    else:
        options = ContinuationOptions(**option_flags.read_flags(args, ContinuationOptions))
        scorer = None
        victim = load_models(names, ["verbatim"]).victim
        run_id = start_continuation(
            store,
            text,
            victim,
            name=name,
            victim_name=str(names.victim),
            options=options,
            title=args.title,
            models=recorded,
        )
    echo(f"run {run_id}: {MODES[args.mode]} of {terminal_safe(name)}", sys.stderr)
    return _work(store, run_id, args.mode, victim, scorer)


def _work(store: Any, run_id: int, mode: str, victim: Any, scorer: Any = None) -> Stored:
    try:
        if mode == "map":
            return run_map(store, run_id, victim, on_progress=_map_progress, scorer=scorer)
        return run_continuation_stored(store, run_id, victim, on_progress=_turn_progress)
    except KeyboardInterrupt:
        raise _Interrupted(run_id) from None


def _given_pz(args: argparse.Namespace) -> dict[str, Any]:
    given = option_flags.read_flags(args, MeasureOptions)
    return {k: v for k, v in given.items() if k in MAP_MEASURE_OPTIONS}


def _document_text(args: argparse.Namespace) -> tuple[str, str]:
    if args.builtin is not None:
        text, _ = builtin_document(args.builtin)
        return text, args.builtin
    return read_document(args.document), args.document.name


def _map_progress(progress: MapProgress) -> None:
    eta = "?" if progress.eta_s is None else duration(progress.eta_s)
    echo(
        f"[{progress.done}/{progress.total} windows] {progress.rate:.2f} windows/s · ETA {eta}",
        sys.stderr,
        flush=True,
    )
    if progress.done == progress.total:
        echo(AFTER_WINDOWS, sys.stderr, flush=True)


def _turn_progress(progress: TurnProgress) -> None:
    turn = progress.last
    state = "refused" if turn.refused else ("verbatim" if turn.success else "no new block")
    echo(
        f"[turn {progress.turns}, phase {turn.phase}] {turn.tokens} tokens, {state} · "
        f"{progress.generated_tokens:,} of {progress.max_tokens:,} tokens",
        sys.stderr,
        flush=True,
    )


def _print(args: argparse.Namespace, stored: Stored) -> int:
    is_map = isinstance(stored, StoredMap)
    written = []
    if args.csv is not None:
        frame = map_frame(stored) if is_map else turns_frame(stored)  # type: ignore[arg-type]
        written.append(write_safe_csv(frame, args.csv))
    if args.html is not None:
        html = map_html(stored) if is_map else continuation_html(stored)  # type: ignore[arg-type]
        written.append(write_output(html.encode("utf-8"), args.html, "HTML"))
    figures = map_json(stored) if is_map else continuation_json(stored)  # type: ignore[arg-type]
    text = describe_map(stored) if is_map else describe_continuation(stored)  # type: ignore[arg-type]
    if args.json:
        echo(terminal_json(figures), multiline=True)
        for path in written:
            echo(f"wrote {terminal_safe(path)}", sys.stderr)
    else:
        show_with_files(text, written)
    return EXIT_OK
