"""A release gate: does a run stay under a policy's limits (and, against a baseline run, did it
not increase significantly)?

``run_gate(store, RUN, policy, baseline=BASE)`` checks every limit of the policy
(:mod:`memprobe_core.release.policy`) in every place it applies — each method × length for Mem and
the extraction rate, each signal × length for AUROC, the whole run for PII — and returns one
:class:`Check` per place, each with its figure and 95 % interval. A limit on an **increase** is
breached only when the increase is above the limit *and* the paired test says it is not noise
(Holm-adjusted p below the policy's ``alpha``; :mod:`memprobe_core.release.diff`).

A limit that applies to nothing in the run (an AUROC limit on an unlabelled audit, a Mem limit on
a signals-only run, a per-signal AUROC limit on a signal the run did not measure) is refused
rather than passed: a gate that checks nothing must not say yes.

The per-unit bounds (``min_bits``: every unit's rank-based extraction cost, docs/method.md §21;
``max_near_verbatim_p``: every unit's certified near-verbatim probability) are checked per method
× length on the cell's least protected unit, which the check names. A unit whose bound was not
measured (a black-box victim, p_z off) is never a silent pass: each cell with such units gets a
check of its own saying how many and why, skipped (``[controls] unmeasured = "skip"``, the
default) or failed (``"fail"``), as a voided figure is.

An AUROC the run's report voids by a validity control (:mod:`memprobe_core.release.controls`:
blind baseline, too few texts, random split) is not evidence either way: its check is skipped
with a note naming the control (``[controls] voided = "skip"``, the default) or fails
(``"fail"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from memprobe_core.errors import UsageError
from memprobe_core.measuring.bracket import bits_text
from memprobe_core.membership.evaluate import signal_scores
from memprobe_core.membership.options import SIGNAL_BY_NAME
from memprobe_core.membership.verdict import NO_BETTER_THAN_BLIND
from memprobe_core.release.controls import Voided, voided_figures, voided_text
from memprobe_core.release.diff import FIGURES, RunDiff, bootstrap_aurocs, diff_runs, percentile
from memprobe_core.release.pairing import finished_units
from memprobe_core.release.policy import VOIDED_FAIL, Limits, Policy
from memprobe_core.report.bracket_cells import unit_bits, unit_near_verbatim_log10
from memprobe_core.report.stats import DEFAULT_RESAMPLES, bca_interval, validate_resamples
from memprobe_core.snippets.split import MEMBER, NONMEMBER
from memprobe_core.store import Store

EXIT_PASSED, EXIT_BREACHED = 0, 1


class GateError(UsageError):
    """The policy does not fit the runs (a limit that checks nothing, [increase] without a
    baseline)."""


@dataclass(frozen=True)
class Check:
    """One limit in one place.

    Attributes:
        limit: the policy key (``limits.max_mean_mem``, ``increase.auroc``).
        scope: where (``interactive @ 100``, ``loss @ 100``, ``run``).
        value: the figure (or the increase over the baseline).
        low / high: its 95 % interval (NaN: none).
        threshold: the policy's limit.
        passed: within the limit (an increase: not both above it and significant); a voided
            figure: True when skipped, False under ``[controls] voided = "fail"``.
        p_holm: the paired test's Holm-adjusted p (increases only; NaN otherwise).
        voided_by: the validity control that voids the figure, naming the run
            (:func:`~memprobe_core.release.controls.voided_text`; ``""``: none).
        skipped: voided or not measured, and not counted (``[controls] voided`` /
            ``unmeasured = "skip"``).
        floor: the limit is a minimum (``limits.min_bits``): passed when ``value >= threshold``.
        not_measured: the units of the place whose figure was not measured, and why (``""``:
            a measured figure).
        detail: what else the message says (the least protected unit).
    """

    limit: str
    scope: str
    value: float
    low: float
    high: float
    threshold: float
    passed: bool
    p_holm: float = math.nan
    voided_by: str = ""
    skipped: bool = False
    floor: bool = False
    not_measured: str = ""
    detail: str = ""

    def message(self) -> str:
        """``increase.mean_mem at interactive @ 100: +0.21 [+0.12, +0.30] > 0 (p Holm 0.004)``."""
        if self.not_measured:
            outcome = "skipped" if self.skipped else 'failed ([controls] unmeasured = "fail")'
            return f"{self.limit} at {self.scope}: {self.not_measured}; {outcome}"
        signed = self.limit.startswith("increase.")
        # Bits rounded down, as the bracket says them: 74.99 must not read as the 75 that a
        # limit of 75 would pass.
        floored = self.floor and math.isfinite(self.value)
        shown = bits_text(self.value) if floored else _number(self.value, signed)
        if math.isfinite(self.low) and math.isfinite(self.high):
            shown += f" [{_number(self.low, signed)}, {_number(self.high, signed)}]"
        above = not math.isnan(self.value) and self.value > self.threshold
        if self.floor:
            below = not math.isnan(self.value) and self.value < self.threshold
            relation = "<" if below else ">="
        else:
            relation = ">" if above else "<="
        text = f"{self.limit} at {self.scope}: {shown} {relation} "
        text += _number(self.threshold, False)
        if self.detail:
            text += f" ({self.detail})"
        if math.isfinite(self.p_holm):
            quiet = above and self.passed and not self.voided_by
            text += f" (p Holm {self.p_holm:.3g}{', not significant' if quiet else ''})"
        if self.voided_by:
            outcome = "skipped" if self.skipped else 'failed ([controls] voided = "fail")'
            text += f"; {outcome}: {self.voided_by}"
        return text


@dataclass(frozen=True)
class GateResult:
    """Every check of a gate run.

    Attributes:
        run / baseline: the run checked and the baseline it was compared with (``None``: none).
        policy: the policy applied.
        checks: one per limit and place, in policy order.
        note: what the comparison with the baseline left out (``""``: nothing).
    """

    run: int
    baseline: int | None
    policy: Policy
    checks: list[Check]
    note: str = ""

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def exit_code(self) -> int:
        return EXIT_PASSED if self.passed else EXIT_BREACHED

    def breaches(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def skipped(self) -> list[Check]:
        """The checks whose figure a validity control voids, not counted."""
        return [c for c in self.checks if c.skipped]


def run_gate(
    store: Store,
    run: int,
    policy: Policy,
    *,
    baseline: int | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> GateResult:
    """Check ``run`` against ``policy`` (and against ``baseline`` for its ``[increase]`` limits).

    Raises:
        GateError: ``[increase]`` limits without a baseline, or a limit that applies to nothing.
        UnknownRunError / IncomparableRuns: as :func:`~memprobe_core.release.diff.diff_runs`.
    """
    resamples = validate_resamples(resamples)
    check_baseline_use(policy, baseline)
    notes = [_gateable(store, run, "run")]
    results = finished_units(store, run)
    checks = _absolute_checks(results, policy.limits, resamples, seed)
    checks += unit_bound_checks(results, policy)
    if any(c.limit == "limits.max_auroc" for c in checks):
        voided = voided_figures(store, run, resamples=resamples, seed=seed)
        checks = [_with_controls(c, voided, run, policy) for c in checks]
    if baseline is not None:
        notes.append(_gateable(store, baseline, "baseline run"))
        diff = diff_runs(store, baseline, run, resamples=resamples, seed=seed)
        checks += _increase_checks(diff, policy)
        notes.append(diff.runs.note())
    if not checks:
        raise GateError(f"{policy.source} sets no limit that applies to run {run}")
    notes.append(_skipped_note(checks))
    return GateResult(run, baseline, policy, checks, "; ".join(n for n in notes if n))


def _with_controls(check: Check, voided: Voided, run: int, policy: Policy) -> Check:
    """``check`` of an AUROC, marked when the run's report voids that figure (skipped, or
    failed under ``[controls] voided = "fail"``)."""
    if check.limit != "limits.max_auroc":
        return check
    signal, _, length = check.scope.partition(" @ ")
    control = voided.get((signal, int(length)))
    if control is None:
        return check
    return _voided(check, voided_text(control, run), policy)


def _voided(check: Check, voided_by: str, policy: Policy) -> Check:
    fail = policy.voided == VOIDED_FAIL
    return replace(check, passed=not fail, voided_by=voided_by, skipped=not fail)


def _skipped_note(checks: list[Check]) -> str:
    """What the skipped checks are, in a sentence each (``""``: none skipped)."""
    notes = []
    voided = [c for c in checks if c.skipped and c.voided_by]
    if voided:
        controls = "; ".join(dict.fromkeys(c.voided_by for c in voided))
        notes.append(
            f"{len(voided)} check(s) skipped: the report calls their figure inconclusive "
            f'({controls}); [controls] voided = "fail" fails them instead'
        )
    unmeasured = [c for c in checks if c.skipped and c.not_measured]
    if unmeasured:
        keys = ", ".join(dict.fromkeys(c.limit for c in unmeasured))
        notes.append(
            f"{len(unmeasured)} check(s) skipped: units whose bound was not measured ({keys}); "
            '[controls] unmeasured = "fail" fails them instead'
        )
    return "; ".join(notes)


def check_baseline_use(policy: Policy, baseline: int | None) -> None:
    """Refuse [increase] limits without a baseline, and a baseline no limit uses."""
    if not policy.increase.empty() and baseline is None:
        raise GateError(
            f"{policy.source} sets [increase] limits: give the run to compare with, --baseline RUN"
        )
    if baseline is not None and policy.increase.empty():
        raise GateError(
            f"--baseline {baseline} is only read by [increase] limits, and {policy.source} has "
            "none: add an [increase] table or leave --baseline out"
        )


def _gateable(store: Store, run: int, what: str) -> str:
    """Refuse a run that did not finish or finished no unit; a note when some units failed
    (they are not counted)."""
    record = store.get_run(run)
    if record["status"] != "finished":
        raise GateError(
            f"{what} {run} is {record['status']} ({record['units_done']} of "
            f"{record['units_total']} units done): a gate checks a finished run; finish it first "
            f"(`memprobe resume {run}`)"
        )
    failed = record["units_error"]
    if record["units_done"] == 0:
        raise GateError(
            f"{what} {run} finished no unit ({failed} failed): there is nothing to check; see "
            f"`memprobe report {run}` for the errors"
        )
    if failed:
        return f"{failed} unit(s) of {what} {run} failed and are not counted"
    return ""


def _absolute_checks(
    results: pd.DataFrame, limits: Limits, resamples: int, seed: int
) -> list[Check]:
    checks: list[Check] = []
    for key, column, limit in (
        ("limits.max_mean_mem", "mem", limits.mean_mem),
        ("limits.max_extraction_rate", "extractable", limits.extraction_rate),
    ):
        if limit is None:
            continue
        found = _cell_checks(results, key, column, limit, resamples, seed)
        if not found:
            raise GateError(f"{key} applies to nothing: the run has no {column!r} figure")
        checks += found
    if limits.pii_copied is not None:
        column = results["pii_copied"] if "pii_copied" in results else pd.Series(dtype=float)
        counts = pd.to_numeric(column, errors="coerce")
        if counts.isna().all():
            raise GateError(
                "limits.max_pii_copied applies to nothing: no unit of the run scored an output "
                "(signals-only or verbatim-only methods copy no text)"
            )
        copied = float(counts.sum())
        checks.append(
            Check(
                "limits.max_pii_copied",
                "run",
                copied,
                math.nan,
                math.nan,
                limits.pii_copied,
                copied <= limits.pii_copied,
            )
        )
    if limits.auroc:
        found = _auroc_checks(results, limits, resamples, seed)
        _refuse_unmeasured("limits.max_auroc", limits, _labelled_signals(results), "the run has")
        if not found:
            raise GateError(
                "limits.max_auroc applies to nothing: the run has no membership signals of "
                "labelled members and non-members (audit a labelled dataset, e.g. --corpus "
                "--nonmembers or a file with a label column, with the signals on)"
            )
        checks += found
    return checks


def _labelled_signals(results: pd.DataFrame) -> list[str]:
    """The membership signals the run has a value of for some member and some non-member (at
    one length): those whose AUROC it can check."""
    found: set[str] = set()
    for _, rows in results.groupby("length", sort=True):
        scores = signal_scores(rows)
        for column in [c for c in scores.columns if c.startswith("signal_")]:
            values = pd.to_numeric(scores[column], errors="coerce")
            labels = scores["label"][values.notna()]
            if (labels == MEMBER).any() and (labels == NONMEMBER).any():
                found.add(column.removeprefix("signal_"))
    return [s for s in SIGNAL_BY_NAME if s in found]


def _refuse_unmeasured(key: str, limits: Limits, measured: list[str], who: str) -> None:
    """A per-signal AUROC limit on a signal with no AUROC is refused, as a limit on every
    signal of a run with none is: it would pass unchecked."""
    for signal in limits.auroc:
        if signal == "*" or signal in measured:
            continue
        has = f"{who}: {', '.join(measured)}" if measured else f"{who} none"
        raise GateError(
            f"{key}.{signal} applies to nothing: no {SIGNAL_BY_NAME[signal].label} ({signal}) "
            f"AUROC of labelled members and non-members to check ({has}); audit with that "
            f"signal measured, or drop {key}.{signal}"
        )


def _cell_checks(
    results: pd.DataFrame, key: str, column: str, limit: float, resamples: int, seed: int
) -> list[Check]:
    """One check per method × length of the mean of ``column`` (its BCa interval)."""
    if column not in results:
        return []
    checks = []
    for (method, length), cell in results.groupby(["method", "length"], sort=True):
        values = pd.to_numeric(cell[column], errors="coerce").to_numpy(dtype=float)  # (n,)
        values = values[np.isfinite(values)]
        if values.size == 0:
            continue
        mean = float(values.mean())
        low, high = bca_interval(values, resamples=resamples, seed=seed)
        checks.append(Check(key, f"{method} @ {length}", mean, low, high, limit, mean <= limit))
    return checks


def _auroc_checks(results: pd.DataFrame, limits: Limits, resamples: int, seed: int) -> list[Check]:
    """One check per signal × length with a limit (a percentile bootstrap interval)."""
    checks = []
    for length, rows in results.groupby("length", sort=True):
        scores = signal_scores(rows)
        labels = scores["label"]
        for column in [c for c in scores.columns if c.startswith("signal_")]:
            signal = column.removeprefix("signal_")
            limit = limits.auroc_limit(signal)
            members = scores.loc[labels == MEMBER, column].to_numpy(dtype=float)
            nonmembers = scores.loc[labels == NONMEMBER, column].to_numpy(dtype=float)
            members, nonmembers = members[np.isfinite(members)], nonmembers[np.isfinite(nonmembers)]
            if limit is None or members.size == 0 or nonmembers.size == 0:
                continue
            ((auroc, boot),) = bootstrap_aurocs([(members, nonmembers)], resamples, seed)
            low, high = percentile(boot)
            checks.append(
                Check(
                    "limits.max_auroc",
                    f"{signal} @ {length}",
                    auroc,
                    low,
                    high,
                    limit,
                    auroc <= limit,
                )
            )
    return checks


def _increase_checks(diff: RunDiff, policy: Policy) -> list[Check]:
    """One check per row of the diff with an increase limit: breached when the increase is
    above the limit and significant at the policy's level; an AUROC either run's report voids
    is marked (skipped, or failed under ``[controls] voided = "fail"``).

    Raises:
        GateError: an increase limit no row of the diff has a figure for.
    """
    runs = diff.runs
    both = f"runs {runs.run_a} and {runs.run_b} both have"
    aurocs = diff.table[diff.table["figure"] == "auroc"]
    _refuse_unmeasured("increase.auroc", policy.increase, sorted(set(aurocs["signal"])), both)
    for key, figure, limit in (
        ("increase.mean_mem", "mean_mem", policy.increase.mean_mem),
        ("increase.extraction_rate", "extraction_rate", policy.increase.extraction_rate),
        ("increase.auroc", "auroc", policy.increase.auroc or None),
    ):
        if limit is not None and not (diff.table["figure"] == figure).any():
            raise GateError(
                f"{key} applies to nothing: runs {runs.run_a} and {runs.run_b} share no "
                f"{FIGURES[figure]} figure; drop {key} or compare runs that measure it"
            )
    checks = []
    for row in diff.table.itertuples(index=False):
        if row.figure == "mean_mem":
            key, limit = "increase.mean_mem", policy.increase.mean_mem
        elif row.figure == "extraction_rate":
            key, limit = "increase.extraction_rate", policy.increase.extraction_rate
        elif row.figure == "auroc":
            key, limit = "increase.auroc", policy.increase.auroc_limit(str(row.signal))
        else:
            continue
        if limit is None:
            continue
        scope = (
            f"{row.signal} @ {row.length}"
            if row.figure == "auroc"
            else f"{row.method} @ {row.length}"
        )
        change, p_holm = float(row.change), float(row.p_holm)
        breached = change > limit and p_holm < policy.alpha
        check = Check(
            key, scope, change, float(row.low), float(row.high), limit, not breached, p_holm
        )
        voided = [
            voided_text(control, run)
            for control, run in (
                (_baseline_voids(str(row.voided_a)), runs.run_a),
                (str(row.voided_b), runs.run_b),
            )
            if control
        ]
        checks.append(_voided(check, "; ".join(voided), policy) if voided else check)
    return checks


def _number(value: float, signed: bool) -> str:
    if value == math.inf:  # a rank-based cost with a token of probability 0
        return "∞"
    if not math.isfinite(value):
        return "n/a"
    if signed:
        return f"{value:+.3f}"
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def _baseline_voids(badges: str) -> str:
    """What of the baseline run's voids also voids an increase over it: every control on the
    sets (blind baseline separates them, too few texts, a flagged random split), but not "no
    better than the blind baseline": a shipped model whose scores do not beat a classifier of
    the texts alone shows no membership signal, which is the very reference an increase is
    measured from (the canary copy's AUROC over the base's was skipped for it)."""
    return "; ".join(b for b in badges.split("; ") if b and b != NO_BETTER_THAN_BLIND)


# --- per-unit bounds: limits.min_bits, limits.max_near_verbatim_p ------------------------------


@dataclass(frozen=True)
class UnitBound:
    """A per-unit bound a policy limits.

    Attributes:
        key: the policy key (``limits.min_bits``).
        field: the :class:`Limits` attribute holding the limit.
        floor: the limit is a minimum (bits) rather than a maximum (a probability).
        read: each unit's bound on the limit's scale from the results frame (NaN: not measured).
        reason: the record's key saying why it was not measured.
        what / how: the bound in words and how to measure it, for "applies to nothing".
    """

    key: str
    field: str
    floor: bool
    read: Callable[[pd.DataFrame], pd.Series]
    reason: str
    what: str
    how: str


UNIT_BOUNDS = (
    UnitBound(
        "limits.min_bits",
        "bits",
        floor=True,
        read=unit_bits,
        reason="extraction_not_measured",
        what="rank-based extraction cost (extraction_bits)",
        how="measure p_z (the cost is read from its pass) on a victim loaded with its weights",
    ),
    UnitBound(
        "limits.max_near_verbatim_p",
        "near_verbatim_p",
        floor=False,
        # The bound is stored as its log10; the policy limits the probability.
        read=lambda frame: 10.0 ** unit_near_verbatim_log10(frame),
        reason="near_verbatim_not_measured",
        what="near-verbatim lower bound (near_verbatim_log10_lower)",
        how="measure the near-verbatim bound beside p_z",
    ),
)


def unit_bound_checks(results: pd.DataFrame, policy: Policy) -> list[Check]:
    """One check per method × length and per-unit bound the policy limits, on the cell's least
    protected unit; one more per cell with units whose bound was not measured (skipped or failed
    by ``[controls] unmeasured``).

    Raises:
        GateError: a bound limited that no unit of the run measured.
    """
    checks: list[Check] = []
    for bound in UNIT_BOUNDS:
        limit = getattr(policy.limits, bound.field)
        if limit is None:
            continue
        values, reasons = bound.read(results), _reasons(results, bound.reason)
        if values.isna().all():
            raise GateError(
                f"{bound.key} applies to nothing: no unit of the run has a {bound.what}; "
                f"{bound.how}, or drop {bound.key}"
            )
        for (method, length), cell in results.groupby(["method", "length"], sort=True):
            checks += _bound_cell_checks(
                bound, f"{method} @ {length}", cell, (values, reasons), limit, policy
            )
    return checks


def _bound_cell_checks(
    bound: UnitBound,
    scope: str,
    cell: pd.DataFrame,
    per_unit: tuple[pd.Series, pd.Series],
    limit: float,
    policy: Policy,
) -> list[Check]:
    """The check of a cell's least protected measured unit, and one for its unmeasured units."""
    values, reasons = per_unit
    checks = []
    measured = values[cell.index].dropna()
    if not measured.empty:
        worst = measured.idxmin() if bound.floor else measured.idxmax()
        value = float(measured[worst])
        passed = value >= limit if bound.floor else value <= limit
        unit = f"least protected unit: {cell.at[worst, 'snippet_id']}"
        checks.append(
            Check(
                bound.key,
                scope,
                value,
                math.nan,
                math.nan,
                limit,
                passed,
                floor=bound.floor,
                detail=unit,
            )
        )
    missing = len(cell) - len(measured)
    if missing:
        why = "; ".join(dict.fromkeys(str(r) for r in reasons[cell.index].dropna()))
        text = f"not measured on {missing} of {len(cell)} unit(s)" + (f" ({why})" if why else "")
        fail = policy.unmeasured == VOIDED_FAIL
        checks.append(
            Check(
                bound.key,
                scope,
                math.nan,
                math.nan,
                math.nan,
                limit,
                passed=not fail,
                skipped=not fail,
                floor=bound.floor,
                not_measured=text,
            )
        )
    return checks


def _reasons(results: pd.DataFrame, name: str) -> pd.Series:
    """The recorded reasons (``None`` where none, an empty text included)."""
    if name not in results:
        return pd.Series(None, index=results.index, dtype=object)
    column = results[name]
    return column.where(column.notna() & (column.astype(str) != ""), None)
