"""``memprobe diff RUN_A RUN_B`` and ``memprobe gate RUN --policy FILE``: memprobe in a release
pipeline (docs/ci.md).

``diff`` compares two audits of the same units on two models (A the baseline, B the candidate)
with paired tests; ``gate`` checks a run against a policy's limits and exits 0 (every limit
holds), 1 (a limit is breached: each breach is named with its figure and interval) or 2 (a bad
policy, unknown or incomparable runs). Both write JSON (``--json``, ``docs/schemas/``); the gate
also writes JUnit XML (``--junit FILE``) for CI test reporters.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memprobe_core.attacks import registry
from memprobe_core.cli import common, option_flags
from memprobe_core.cli.errors import EXIT_OK
from memprobe_core.cli.output import echo, show_with_files, terminal_json
from memprobe_core.errors import UsageError
from memprobe_core.membership.options import SIGNALS, MeasureOptions
from memprobe_core.models.base import Generator
from memprobe_core.models.measure_cache import from_weights, scorable
from memprobe_core.release.diff import DEFAULT_TOP, diff_runs
from memprobe_core.release.gate import GateError, check_baseline_use, run_gate
from memprobe_core.release.junit import gate_json, write_junit
from memprobe_core.release.policy import Policy, read_policy
from memprobe_core.release.render import diff_html, diff_json, diff_text, gate_text
from memprobe_core.report.export import write_output, write_safe_csv
from memprobe_core.report.stats import DEFAULT_RESAMPLES

DIFF_EPILOG = """exit codes:
  0    done
  2    an unknown run, runs with no unit in common, or another usage error
  70   internal error: a bug in memprobe, not a verdict (--verbose shows the traceback)"""
GATE_EPILOG = (
    "exit codes:\n  0    every limit holds\n  1    a limit is breached\n  2    a bad policy, "
    "an unknown, unfinished or incomparable run, or another usage error\n  70   internal "
    "error: a bug in memprobe, not a verdict (--verbose shows the traceback); 0 and 1 only "
    "come from a policy that was checked"
)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``memprobe diff`` and ``memprobe gate``."""
    diff = common.add_command(
        sub,
        "diff",
        "compare two audits of the same units on two models (A baseline, B candidate)",
        DIFF_EPILOG,
    )
    diff.add_argument("run_a", type=int, metavar="RUN_A", help="the baseline run id")
    diff.add_argument("run_b", type=int, metavar="RUN_B", help="the candidate run id")
    diff.add_argument("--json", action="store_true", help="print the diff as JSON (diff-v2)")
    diff.add_argument("--csv", type=Path, help="write the figures table as formula-safe CSV")
    diff.add_argument(
        "--changed-csv", type=Path, help="write the most changed units as formula-safe CSV"
    )
    diff.add_argument("--html", type=Path, help="write the diff as one self-contained HTML file")
    diff.add_argument(
        "--top", type=int, default=DEFAULT_TOP, help="units whose Mem changed most to show"
    )
    common.add_bootstrap_flags(diff)
    diff.set_defaults(handler=run_diff)

    gate = common.add_command(
        sub, "gate", "check a run against a policy's limits (exit 1 on a breach)", GATE_EPILOG
    )
    gate.add_argument("run", type=int, metavar="RUN", help="the run to check")
    add_gate_flags(gate, required=True)
    gate.add_argument("--json", action="store_true", help="print the result as JSON (gate-v2)")
    common.add_bootstrap_flags(gate)
    gate.set_defaults(handler=run_gate_command)


def add_gate_flags(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """``--policy``, ``--baseline`` and ``--junit``: of ``gate``, and of ``audit`` (optional
    there: the gate then runs on the audit's run once it finishes)."""
    group = parser.add_argument_group("release gate (docs/ci.md)")
    group.add_argument(
        "--policy",
        type=Path,
        required=required,
        help="the limits, a TOML file (docs/ci.md)"
        + ("" if required else "; checked when the audit finishes, exit 1 on a breach"),
    )
    group.add_argument(
        "--baseline",
        type=int,
        metavar="RUN",
        help="the run to compare with for the policy's [increase] limits (the shipped model's "
        "audit of the same units)",
    )
    group.add_argument("--junit", type=Path, help="write the gate's checks as JUnit XML")


def read_gate_flags(args: argparse.Namespace) -> Policy | None:
    """The policy of ``--policy`` (``None``: no gate), checked with ``--baseline`` and ``--junit``
    before anything runs: a bad policy, [increase] limits with no baseline, a baseline the store
    does not have, or ``--baseline``/``--junit`` without ``--policy`` are usage errors."""
    if args.policy is None:
        if args.baseline is not None or args.junit is not None:
            raise UsageError("--baseline and --junit belong to a gate: give --policy FILE too")
        return None
    policy = read_policy(args.policy)
    check_baseline_use(policy, args.baseline)
    if args.baseline is not None:
        common.open_store(args).get_run(args.baseline)  # UnknownRunError names it
    if getattr(args, "methods", None) is not None:  # `memprobe audit --policy`
        _check_fits_audit(policy, args)
    return policy


def _check_fits_audit(policy: Policy, args: argparse.Namespace) -> None:
    """Refuse, before the audit runs, a limit its settings leave nothing to check with."""
    scored = [m for m in args.methods if registry.extracts(m)]
    measured = [m for m in args.methods if registry.extracts(m) or registry.measures_verbatim(m)]
    limits, increase = policy.limits, policy.increase
    needs = (
        (limits.mean_mem is not None or increase.mean_mem is not None, scored, "mean Mem"),
        (limits.pii_copied is not None, scored, "copied PII"),
        (
            limits.extraction_rate is not None or increase.extraction_rate is not None,
            measured,
            "the extraction rate",
        ),
    )
    for wanted, methods, what in needs:
        if wanted and not methods:
            raise GateError(
                f"{policy.source} limits {what}, which none of the methods "
                f"({', '.join(args.methods)}) measures: add an extraction method or drop the limit"
            )
    _check_bounds_measured(policy, args)
    if limits.auroc or increase.auroc:
        if not option_flags.read_flags(args, MeasureOptions).get("signals", True):
            raise GateError(f"{policy.source} limits AUROC, which --no-signals turns off")
        unlabelled_corpus = args.corpus and not (
            args.nonmembers or args.canaries or args.dated_split
        )
        if unlabelled_corpus:
            raise GateError(
                f"{policy.source} limits AUROC, which needs members and non-members: the "
                "built-in corpus is labelled with --nonmembers, --canaries or --dated-split"
            )
        check_signals_measured(policy, args)


def _check_bounds_measured(policy: Policy, args: argparse.Namespace) -> None:
    """Refuse a per-unit bound limit (``min_bits``, ``max_near_verbatim_p``) on an audit that
    turns p_z off: both are read beside p_z (the rank-based cost from its very pass)."""
    limits = policy.limits
    bounds = [
        k
        for k, v in (("min_bits", limits.bits), ("max_near_verbatim_p", limits.near_verbatim_p))
        if v is not None
    ]
    if bounds and not option_flags.read_flags(args, MeasureOptions).get("pz", True):
        raise GateError(
            f"{policy.source} limits {' and '.join(bounds)}, measured beside p_z, which --no-pz "
            "turns off: drop --no-pz or the limit"
        )


def check_signals_measured(
    policy: Policy, args: argparse.Namespace, victim: Generator | None = None
) -> None:
    """Refuse an AUROC limit on a signal the audit will not measure: by its flags, and, given
    the loaded ``victim`` (before the run is stored), by what that victim can be scored for."""
    asked = _signals_asked(args, victim)
    for key, table in (("limits.max_auroc", policy.limits), ("increase.auroc", policy.increase)):
        for signal in table.auroc:
            if signal != "*" and signal not in asked:
                if asked and victim is not None and _needs_weights(signal):
                    raise GateError(
                        f"{policy.source}: {key}.{signal} limits a signal this victim cannot give "
                        f"({signal} needs a victim loaded with its weights, the 'hf' backend; it "
                        f"measures: {', '.join(asked)}); load the victim so or drop the limit"
                    )
                why = (
                    f"it measures: {', '.join(asked)}"
                    if asked
                    else "the victim cannot score a text: it measures none"
                )
                raise GateError(
                    f"{policy.source}: {key}.{signal} limits a signal this audit does not "
                    f"measure ({why}); turn {signal} on or drop the limit"
                )


def _needs_weights(signal: str) -> bool:
    return any(spec.name == signal and spec.needs_weights for spec in SIGNALS)


def _signals_asked(args: argparse.Namespace, victim: Generator | None = None) -> list[str]:
    """The membership signals an audit's flags ask for (``SignalSpec``'s needs, read from the
    flags) and, given the loaded ``victim``, that it can be scored for: none when it cannot
    score a text, none needing weights when a server scores it."""
    if victim is not None and not scorable(victim):
        return []
    weights = victim is None or from_weights(victim)
    measure = option_flags.read_flags(args, MeasureOptions)
    on = {
        "needs_reference": getattr(args, "reference_model", None) is not None,
        "needs_prefixes": bool(measure.get("recall_shots", 0)),
        "needs_samples": bool(measure.get("samia_samples", 0)),
    }
    options = {
        "dc_pdd": args.dc_pdd_corpus is not None or bool(args.dc_pdd_nonmembers),
        "pac": bool(measure.get("pac_augmentations", 0)),
    }
    return [
        spec.name
        for spec in SIGNALS
        if all(on[need] for need in on if getattr(spec, need))
        and (not spec.needs_option or options.get(spec.name, False))
        and (weights or not spec.needs_weights)
    ]


def gate_and_report(args: argparse.Namespace, run: int, policy: Policy) -> int:
    """Check ``run`` against ``policy``; print the checks (or JSON) and write ``--junit``."""
    result = run_gate(
        common.open_store(args),
        run,
        policy,
        baseline=args.baseline,
        resamples=getattr(args, "resamples", DEFAULT_RESAMPLES),
        seed=getattr(args, "ci_seed", 0),
    )
    if args.junit is not None:
        echo(f"wrote {write_junit(result, args.junit)}", sys.stderr)
    if getattr(args, "json", False):
        echo(terminal_json(gate_json(result)), multiline=True)
    else:
        echo(gate_text(result), multiline=True)
    return result.exit_code


def run_diff(args: argparse.Namespace) -> int:
    """Print (and write) the diff of two runs."""
    diff = diff_runs(
        common.open_store(args),
        args.run_a,
        args.run_b,
        resamples=args.resamples,
        seed=args.ci_seed,
        top=args.top,
    )
    written = []
    if args.csv is not None:
        written.append(write_safe_csv(diff.table, args.csv))
    if args.changed_csv is not None:
        written.append(write_safe_csv(diff.changed, args.changed_csv))
    if args.html is not None:
        written.append(write_output(diff_html(diff).encode("utf-8"), args.html, "HTML"))
    show_with_files(terminal_json(diff_json(diff)) if args.json else diff_text(diff), written)
    return EXIT_OK


def run_gate_command(args: argparse.Namespace) -> int:
    """Check the run; the exit code says whether every limit holds."""
    policy = read_gate_flags(args)  # refused before the store is read
    assert policy is not None  # --policy is required here
    return gate_and_report(args, args.run, policy)
