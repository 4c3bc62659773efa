"""Reports over a run's results: the paper's Table 1 and what the paper lacks.

From ``Store.results_frame`` (one row per finished unit) this builds:

- **Table 1**: method × domain × length → mean Mem, LCS_P, Dis, objective and n, each mean with a
  BCa bootstrap 95 % interval (scipy, seeded, 5,000 resamples by default); ``small_n`` marks cells
  with n < 10. Rows with domain ``all`` pool the domains. Beside them, the verbatim-extraction
  figures: ``extractable`` (share of units whose output is k-extractable) and ``span_tokens``
  (mean longest verbatim span), NaN where the units did not measure them. And Mem's chance level
  (:mod:`memprobe_core.chance`, read from the results frame): the mean chance level, the mean Mem
  above the chance mean and the share of units whose Mem beats chance.
- **Paired improvement** of each method over P-S-Inst and over P-S-Base: per snippet and length,
  the difference in Mem (method − baseline), its mean, BCa interval, wins/ties/losses, a two-sided
  paired test (Wilcoxon signed-rank, or the exact sign test for few non-zero differences) and its
  p-value Holm-adjusted across every comparison in the report. Pairing removes the
  snippet-to-snippet spread, which dwarfs method differences.

The statistical rules (degenerate samples, ties, why Holm) are in :mod:`memprobe_core.report.stats`.
- **PII**: items in the true suffixes, copied into outputs, invented by outputs, per method.
- **Cost** per method: victim and attacker queries, generated tokens, seconds (total and per unit).
- **Membership** (labelled audits only): AUROC and TPR at 1 % / 0.1 % FPR with intervals, and ROC
  curves, per membership signal and per method (:mod:`memprobe_core.membership.evaluate`), and
  its validity controls: a blind baseline that never sees the model and a random split of the
  members (:mod:`memprobe_core.membership.blind`).

``render_text`` (in :mod:`memprobe_core.report.text`) draws it for a
terminal; ``report_to_dict`` gives JSON-ready records.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from memprobe_core.attacks.registry import (
    baseline_methods,
    extracts,
    in_table1,
    method_label,
    method_rank,
    method_tables,
    table1_figures,
)
from memprobe_core.chance import (
    CHANCE_EXPLANATION,
    CHANCE_RULE,
    REFERENCE_EXPLANATION,
    chance_reading,
    from_columns,
    undefined_reasons,
)
from memprobe_core.config import SEED_RANGE
from memprobe_core.errors import UsageError
from memprobe_core.membership.blind import RANDOM_SPLIT_COLUMNS, BlindBaseline, validity_controls
from memprobe_core.membership.evaluate import (
    DEFAULT_FPR_RULE,
    MEMBERSHIP_COLUMNS,
    ROC_COLUMNS,
    check_fpr_rule,
    membership_meta,
    membership_table,
)
from memprobe_core.membership.inference import (
    DEFAULT_SIGNIFICANCE,
    DatasetInference,
    inference_for_results,
)
from memprobe_core.membership.verdict import (
    inference_verdict,
    membership_verdict,
    with_voided_by,
)
from memprobe_core.option_fields import check_size
from memprobe_core.report.bracket_cells import BRACKET_COLUMNS, bracket_figures
from memprobe_core.report.leakage import method_figures, pz_figures
from memprobe_core.report.pam_cells import PAM_COLUMNS, pam_figures, pam_meta
from memprobe_core.report.select import apply_selection
from memprobe_core.report.stats import (
    DEFAULT_RESAMPLES,
    TIE_TOLERANCE,
    bca_interval,
    paired_test,
    validate_resamples,
)
from memprobe_core.report.summary import summary_lines
from memprobe_core.snippets.overlap import SHARED_TEXTS
from memprobe_core.stats import SMALL_N, holm

__all__ = [
    "DEFAULT_RESAMPLES",
    "MEMBERSHIP_COLUMNS",
    "ROC_COLUMNS",
    "SMALL_N",
    "Report",
    "bootstrap_ci",
    "build_report",
    "cost_per_method",
    "paired_improvement",
    "pii_totals",
    "report_for_run",
    "report_to_dict",
    "table1",
]


_TABLE1_LEAD = [
    "method",
    "method_label",
    "domain",
    "length",
    "n",
    "small_n",
    "mem",
    "mem_lo",
    "mem_hi",
    "lcs_p",
    "lcs_p_lo",
    "lcs_p_hi",
    "dis",
    "dis_lo",
    "dis_hi",
    "objective",
    "extractable",
    "match_tokens",
    "span_tokens",
    "log10_p_z",
    "pz_zero",
    "log10_n_at_p",
    *BRACKET_COLUMNS,
    *PAM_COLUMNS,
]
# Mem's chance level (memprobe_core.chance): units with one, mean level, mean Mem − chance
# mean, share of units whose Mem beats it.
_TABLE1_CHANCE = ["chance_units", "mem_chance", "mem_above_chance", "beats_chance"]


def table1_columns() -> list[str]:
    """Table 1's columns: the common ones, the methods' own figures with a Table 1 entry
    (``MethodSpec.figures``, report order; read from the registry on each call), Mem's chance
    level."""
    return [*_TABLE1_LEAD, *(f.name for f in table1_figures()), *_TABLE1_CHANCE]


# As registered at import (every method module registers on import): for code wanting a constant.
TABLE1_COLUMNS = table1_columns()
PAIRED_COLUMNS = [
    "method",
    "method_label",
    "baseline",
    "metric",
    "length",
    "n_pairs",
    "small_n",
    "mean_diff",
    "lo",
    "hi",
    "wins",
    "ties",
    "losses",
    "test",
    "p_value",
    "p_holm",
]
PII_COLUMNS = ["method", "method_label", "units", "truth", "copied", "invented", "copied_share"]
COST_COLUMNS = [
    "method",
    "method_label",
    "units",
    "victim_queries",
    "attacker_queries",
    "generated_tokens",
    "seconds",
    "queries_per_unit",
    "tokens_per_unit",
    "seconds_per_unit",
]


@dataclass
class Report:
    """Aggregates of one run (all pandas DataFrames; see the module docstring).

    Attributes:
        table1: :data:`TABLE1_COLUMNS` — ``small_n`` is True when n < 10; ``*_lo``/``*_hi`` are
            NaN when there is no interval (fewer than two values, or all equal).
        paired: :data:`PAIRED_COLUMNS` — ``test`` (``wilcoxon`` / ``sign`` / ``none``),
            ``p_value`` (two-sided) and ``p_holm`` (Holm-adjusted over the report's comparisons).
        pii / costs: :data:`PII_COLUMNS` / :data:`COST_COLUMNS`.
        errors: failed units (snippet_id, method, length, attempts, error), may be empty.
        membership / roc: :data:`MEMBERSHIP_COLUMNS` / :data:`ROC_COLUMNS` (defined in
            :mod:`memprobe_core.membership.evaluate`); empty unless the run's snippets carry both
            member and non-member labels.
        meta: run id, result count, resamples, seed, interval and test names, ROUGE variant and
            models when known.
        blind_baseline: the validity control of a labelled audit that never sees the model
            (:class:`~memprobe_core.membership.blind.BlindBaseline`: its AUROC, intervals and
            warning); ``None`` unless some snippet is labelled.
        random_split: :data:`~memprobe_core.membership.blind.RANDOM_SPLIT_COLUMNS` — every
            membership score on two random halves of the members (AUROC should be 0.5;
            ``flagged`` rows say it is not); empty unless the audit has at least 4 members.
        dataset_inference: one :class:`~memprobe_core.membership.inference.DatasetInference`
            per length of a ``memprobe infer`` run (suspect set vs held-out set); empty for
            other runs.
        method_tables: each method's own report table (``MethodSpec.report_table``), by method
            name, in report order: its frame (``MethodTable.frame_columns``), empty unless the
            method ran.
    """

    table1: pd.DataFrame
    paired: pd.DataFrame
    pii: pd.DataFrame
    costs: pd.DataFrame
    errors: pd.DataFrame = field(default_factory=pd.DataFrame)
    membership: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=MEMBERSHIP_COLUMNS)
    )
    roc: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ROC_COLUMNS))
    meta: dict[str, Any] = field(default_factory=dict)
    blind_baseline: BlindBaseline | None = None
    random_split: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=RANDOM_SPLIT_COLUMNS)
    )
    dataset_inference: list[DatasetInference] = field(default_factory=list)
    method_tables: dict[str, pd.DataFrame] = field(default_factory=lambda: method_frames(None))


def method_frames(results: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """Every registered method's own report table (``MethodSpec.report_table``) built from
    ``results`` (``None``: each table empty), by method name in report order."""
    frames: dict[str, pd.DataFrame] = {}
    for name, table in method_tables():
        empty = pd.DataFrame(columns=list(table.frame_columns))
        frames[name] = empty if results is None else table.build(results)
    return frames


def bootstrap_ci(
    values: np.ndarray | pd.Series, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """BCa bootstrap 95 % interval of the mean; NaNs dropped (see ``stats.bca_interval``).

    Returns ``(nan, nan)`` — no interval — for fewer than two values or all values equal.

    Raises:
        ValueError: ``resamples`` outside [100, 100000].
    """
    return bca_interval(values, resamples=resamples, seed=seed)


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    if frame.empty:
        return frame.reset_index(drop=True)
    frame = frame.assign(_order=frame["method"].map(method_rank))
    return (
        frame.sort_values(["_order", *keys], kind="stable")
        .drop(columns="_order")
        .reset_index(drop=True)
    )


def _mean_or_nan(group: pd.DataFrame, column: str) -> float:
    if column not in group:  # a frame from before the column existed
        return math.nan
    values = pd.to_numeric(group[column], errors="coerce")
    return float(values.mean()) if values.notna().any() else math.nan


def _table1_row(
    method: str, domain: str, length: Any, group: pd.DataFrame, *, resamples: int, seed: int
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "method": method,
        "method_label": method_label(method),
        "domain": domain,
        "length": int(length),
        "n": len(group),
        "small_n": len(group) < SMALL_N,
        "objective": float(group["objective"].astype(float).mean()),
    }
    for metric in ("mem", "lcs_p", "dis"):
        values = pd.to_numeric(group[metric], errors="coerce")
        row[metric] = float(values.mean()) if values.notna().any() else math.nan
        row[f"{metric}_lo"], row[f"{metric}_hi"] = bootstrap_ci(
            values, resamples=resamples, seed=seed
        )
    # Verbatim figures (booleans average to a share); NaN, not 0, where nothing was measured.
    for metric in ("extractable", "match_tokens", "span_tokens"):
        row[metric] = _mean_or_nan(group, metric)
    row.update(pz_figures(group))
    row.update(bracket_figures(group))
    row.update(pam_figures(group))
    row.update(method_figures(group))
    row.update(_chance_figures(group))
    return row


def _chance_figures(group: pd.DataFrame) -> dict[str, Any]:
    """Mem's chance level in a Table 1 cell, over the units that have one (``mem_chance`` set;
    computed per unit in ``store.frames.results_frame``): how many, the mean chance level, the
    mean Mem − chance mean and the share whose Mem beats the level (NaN when none has one)."""
    level = pd.to_numeric(group["mem_chance"], errors="coerce") if "mem_chance" in group else None
    if level is None or not level.notna().any():
        return {
            "chance_units": 0,
            "mem_chance": math.nan,
            "mem_above_chance": math.nan,
            "beats_chance": math.nan,
        }
    defined = level.notna()
    above = pd.to_numeric(group.loc[defined, "mem_above_chance"], errors="coerce")
    return {
        "chance_units": int(defined.sum()),
        "mem_chance": float(level[defined].mean()),
        "mem_above_chance": float(above.mean()),
        "beats_chance": float(group.loc[defined, "beats_chance"].astype(bool).mean()),
    }


def table1(
    results: pd.DataFrame, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> pd.DataFrame:
    """Method × domain × length means with BCa intervals (plus pooled ``all`` domains).

    Raises:
        ValueError: ``resamples`` outside [100, 100000].
    """
    resamples = validate_resamples(resamples)
    if results.empty:
        return pd.DataFrame(columns=table1_columns())
    pooled = results.assign(domain="all") if results["domain"].nunique() > 1 else None
    frames = [results] if pooled is None else [results, pooled]
    rows = [
        _table1_row(method, domain, length, group, resamples=resamples, seed=seed)
        for frame in frames
        for (method, domain, length), group in frame.groupby(["method", "domain", "length"])
    ]
    out = pd.DataFrame(rows, columns=table1_columns())
    out = out.assign(_all=(out["domain"] == "all"))
    out = _sorted(out, ["_all", "domain", "length"]).drop(columns="_all")
    return out


def _paired_row(
    method: str,
    baseline: str,
    metric: str,
    length: Any,
    diff: np.ndarray,
    *,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    lo, hi = bootstrap_ci(diff, resamples=resamples, seed=seed)
    test = paired_test(diff, seed=seed)
    return {
        "method": method,
        "method_label": method_label(method),
        "baseline": baseline,
        "metric": metric,
        "length": int(length),
        "n_pairs": int(diff.size),
        "small_n": bool(diff.size < SMALL_N),
        "mean_diff": float(diff.mean()),
        "lo": lo,
        "hi": hi,
        "wins": int((diff > TIE_TOLERANCE).sum()),
        "ties": int((np.abs(diff) <= TIE_TOLERANCE).sum()),
        "losses": int((diff < -TIE_TOLERANCE).sum()),
        "test": test.test,
        "p_value": test.p_value,
    }


def _holm_by_hypothesis(paired: pd.DataFrame) -> np.ndarray:
    """Holm-adjusted p per row, counting each hypothesis once.

    "P-S-Base over P-S-Inst" and "P-S-Inst over P-S-Base" test the same pairs (the differences
    only change sign, so the two-sided p is equal); counting both would make the correction
    stricter for no reason. Mirrored rows share one family member and one adjusted p.
    """
    keys = [
        (*sorted((m, b)), length)
        for m, b, length in zip(paired["method"], paired["baseline"], paired["length"])
    ]
    first: dict[tuple[Any, ...], int] = {}
    for row, key in enumerate(keys):
        first.setdefault(key, row)
    unique_rows = list(first.values())
    adjusted = holm(paired["p_value"].to_numpy(dtype=float)[unique_rows])
    by_key = dict(zip(first, adjusted))
    return np.array([by_key[key] for key in keys], dtype=float)


def paired_improvement(
    results: pd.DataFrame,
    *,
    metric: str = "mem",
    baselines: tuple[str, ...] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """Per-snippet improvement of each method over each baseline, by length, with a paired test.

    Pairs are (snippet_id, length) present for both the method and the baseline; the difference
    is ``method − baseline`` of ``metric``. ``p_holm`` is Holm-adjusted over the distinct
    comparisons of the returned frame (one family per report; see ``_holm_by_hypothesis``).

    Raises:
        ValueError: ``resamples`` outside [100, 100000].
    """
    resamples = validate_resamples(resamples)
    baselines = baseline_methods() if baselines is None else baselines
    if results.empty:
        return pd.DataFrame(columns=PAIRED_COLUMNS)
    keyed = results.set_index(["method", "snippet_id", "length"])[metric].astype(float)
    keyed = keyed[~keyed.index.duplicated(keep="last")]
    methods = sorted(results["method"].unique(), key=method_rank)
    rows = []
    for baseline in (b for b in baselines if b in methods):
        base = keyed.xs(baseline, level="method")
        for method in (m for m in methods if m != baseline):
            mine = keyed.xs(method, level="method")
            both = pd.concat([mine.rename("m"), base.rename("b")], axis=1, join="inner").dropna()
            for length, group in both.groupby(level="length"):
                diff = (group["m"] - group["b"]).to_numpy()  # (pairs,)
                rows.append(
                    _paired_row(
                        method, baseline, metric, length, diff, resamples=resamples, seed=seed
                    )
                )
    out = pd.DataFrame(rows, columns=PAIRED_COLUMNS)
    if out.empty:
        return out
    out["p_holm"] = _holm_by_hypothesis(out)
    out = out.assign(_b=out["baseline"].map(list(baselines).index))
    return _sorted(out, ["_b", "length"]).drop(columns="_b")


def _sums_by_method(results: pd.DataFrame, **sums: str) -> pd.DataFrame:
    """Per method: ``units`` (rows) and the sum of each named column (``name=column``)."""
    aggregations = {name: (column, "sum") for name, column in sums.items()}
    grouped = (
        results.groupby("method").agg(units=("snippet_id", "size"), **aggregations).reset_index()
    )
    grouped["method_label"] = grouped["method"].map(lambda m: method_label(m))
    return grouped


def pii_totals(results: pd.DataFrame) -> pd.DataFrame:
    """PII items in the truth, copied and invented, summed per method."""
    if results.empty:
        return pd.DataFrame(columns=PII_COLUMNS)
    grouped = _sums_by_method(
        results, truth="pii_truth", copied="pii_copied", invented="pii_invented"
    )
    truth = grouped["truth"].astype(float)
    grouped["copied_share"] = np.where(
        truth > 0, grouped["copied"] / truth.where(truth > 0), np.nan
    )
    return _sorted(grouped[PII_COLUMNS], [])


def cost_per_method(results: pd.DataFrame) -> pd.DataFrame:
    """Queries, generated tokens and seconds per method (totals and per unit)."""
    if results.empty:
        return pd.DataFrame(columns=COST_COLUMNS)
    grouped = _sums_by_method(
        results,
        victim_queries="victim_queries",
        attacker_queries="attacker_queries",
        generated_tokens="generated_tokens",
        seconds="seconds",
    )
    units = grouped["units"].astype(float)
    grouped["queries_per_unit"] = (grouped["victim_queries"] + grouped["attacker_queries"]) / units
    grouped["tokens_per_unit"] = grouped["generated_tokens"] / units
    grouped["seconds_per_unit"] = grouped["seconds"] / units
    return _sorted(grouped[COST_COLUMNS], [])


def build_report(
    results: pd.DataFrame,
    *,
    errors: pd.DataFrame | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    meta: dict[str, Any] | None = None,
    select: str = "objective",
    fpr_rule: str = DEFAULT_FPR_RULE,
    texts: Mapping[str, str] | None = None,
    left_out: Collection[str] = (),
    inference: Mapping[str, Any] | None = None,
) -> Report:
    """Every table from a results frame (``Store.results_frame``).

    Args:
        results: one row per finished unit.
        errors: failed units (``Store.errors_frame``), shown under the tables.
        resamples / seed: bootstrap settings (seeded, so a report is reproducible);
            ``resamples`` from 100 to 100000.
        meta: extra facts to carry (run id, title …).
        select: which Mem the tables show (``objective``, ``max_mem``, ``reference``; see
            :mod:`memprobe_core.report.select`); named in ``meta["selection_label"]``.
        fpr_rule: TPR at FPR ``le`` (FPR ≤ target) or ``lt`` (FPR < target, as mimir); named
            in ``meta["tpr_rule"]`` of a labelled audit.
        texts: each snippet's text by id (``Store.samples``), for a labelled audit's blind
            baseline; without them the baseline says it was not run.
        left_out: snippet ids kept out of the membership table and its controls (ReCaLL's
            prefix texts: their own ratio is measured against themselves); named in
            ``meta["membership_left_out"]``.
        inference: a dataset-inference run's settings (``significance``, ``seed`` of the
            splits): its members are the suspect set, its non-members the held-out set
            (``None``: not such a run).

    Raises:
        ValueError: ``resamples`` out of range (the message says what to give).
        OptionError: ``seed`` negative or past 64 bits.
        UsageError: an unknown ``select``.
    """
    resamples = validate_resamples(resamples)
    check_size("seed", seed, *SEED_RANGE)
    rule = check_fpr_rule(fpr_rule)
    results = apply_selection(results, select)
    info = dict(meta or {})
    info.update({"selection": select, "selection_label": results.attrs["selection_label"]})
    info.update(
        {
            "results": len(results),
            "resamples": resamples,
            "bootstrap_seed": seed,
            "interval": "BCa bootstrap 95 %",
            "small_n_below": SMALL_N,
            "paired_test": "two-sided Wilcoxon signed-rank (exact sign test below 6 non-zero "
            "differences), ties dropped",
            "multiple_comparisons": "Holm across the report's paired rows",
        }
    )
    if not results.empty:
        for column in ("rouge_variant", "victim", "base", "attacker"):
            if column in results:
                values = sorted({str(v) for v in results[column].dropna().unique()})
                info[column] = ", ".join(values) if values else None
        if "extract_k" in results:  # k of k-extractability, shown in Table 1's header
            ks = sorted(
                {int(k) for k in pd.to_numeric(results["extract_k"], errors="coerce").dropna()}
            )
            info["extract_k"] = ", ".join(map(str, ks)) if ks else None
        for column, key in (("pz_scheme", "pz_scheme"), ("discover_p", "discover_p")):
            if column in results:  # p_z's sampling scheme and p, shown in Table 1's header
                values = sorted({str(v) for v in results[column].dropna().unique()})
                info[key] = ", ".join(values) if values else None
        if "chance_note" in results:  # Mem's chance level: what it is, and why it is missing
            info["chance"] = CHANCE_EXPLANATION
            info["chance_rule"] = CHANCE_RULE
            info["chance_undefined"] = undefined_reasons(_extracting(results)["chance_note"])
            info.update(_chance_readings(_extracting(results)))
        info.update(pam_meta(_in_table1(results)))  # the prior-aware check (§24)
    evaluated = _without_labels(results, left_out)
    membership, roc = membership_table(evaluated, resamples=resamples, seed=seed, fpr_rule=rule)
    info.update(membership_meta(evaluated, membership, rule))
    if left_out:
        info["membership_left_out"] = sorted(left_out)
    blind, random_split = validity_controls(
        evaluated, texts, membership, resamples=resamples, seed=seed, fpr_rule=rule
    )
    inferred = (
        inference_for_results(
            evaluated,
            significance=inference.get("significance", DEFAULT_SIGNIFICANCE),
            seed=int(inference.get("seed", seed)),
            lengths=inference.get("lengths", ()),
        )
        if inference is not None
        else []
    )
    # The signals-only method asks no model for the suffix: it has no Mem, PII or gain to show;
    # verbatim-only has no Mem either, but its extraction rate is a Table 1 row.
    extraction = _extracting(results)
    return Report(
        table1=table1(_in_table1(results), resamples=resamples, seed=seed),
        paired=paired_improvement(extraction, resamples=resamples, seed=seed),
        pii=pii_totals(extraction),
        costs=cost_per_method(results),
        errors=errors if errors is not None else pd.DataFrame(),
        membership=membership,
        roc=roc,
        meta=info,
        blind_baseline=blind,
        random_split=random_split,
        dataset_inference=inferred,
        method_tables=method_frames(results),
    )


def _chance_readings(extracting: pd.DataFrame) -> dict[str, Any]:
    """A run of one snippet (a probe, a comparison): its chance distribution is the built-in
    corpus's (``chance_source``), and each unit's reading is said in the words the Probe and
    Compare pages use (:func:`memprobe_core.chance.chance_reading`)."""
    if extracting.empty or extracting["snippet_id"].nunique() != 1:
        return {}
    info: dict[str, Any] = {}
    sources = extracting.get("chance_source")
    if sources is not None and sources.notna().any():
        info["chance"] = REFERENCE_EXPLANATION
    info["chance_readings"] = [
        f"{method_label(str(row['method']))} @ {int(row['length'])}: "
        f"{chance_reading(from_columns(row))}"
        for _, row in extracting.iterrows()
    ]
    return info


def _extracting(results: pd.DataFrame) -> pd.DataFrame:
    """The rows of methods that ask a model for the suffix (``MethodSpec.extracts``)."""
    if results.empty or "method" not in results:
        return results
    return results[results["method"].map(extracts).astype(bool)]


def _in_table1(results: pd.DataFrame) -> pd.DataFrame:
    """The rows of methods with a Table 1 row (``registry.in_table1``)."""
    if results.empty or "method" not in results:
        return results
    return results[results["method"].map(in_table1).astype(bool)]


def _without_labels(results: pd.DataFrame, snippet_ids: Collection[str]) -> pd.DataFrame:
    """``results`` with the labels of ``snippet_ids`` removed (they play no part in membership
    evaluation; every other table keeps them)."""
    if not len(snippet_ids) or "label" not in results:
        return results
    out = results.copy()
    out.loc[out["snippet_id"].isin(list(snippet_ids)), "label"] = None
    return out


def require_attack_run(run: Mapping[str, Any]) -> None:
    """Refuse a run whose units are not attack results (a document's extraction map or
    continuation): its windows and turns have no Mem, no chance level and no methods to compare.

    Raises:
        UsageError: naming the command that shows such a run.
    """
    if run["kind"] == "document":
        # Named by its mode (a continuation read as "a document's extraction map").
        mode = (run.get("config") or {}).get("mode")
        what = "continuation" if mode == "continue" else "extraction map"
        raise UsageError(
            f"run {run['id']} is a document's {what}; `memprobe document --show "
            f"{run['id']}` prints it (reports, diffs and gates read probes, comparisons and audits)"
        )


def dtype_meta(dtypes: dict[str, str] | None) -> dict[str, str]:
    """The report's lines on the dtype each role ran in (none for a run recorded before
    per-role dtypes), and a note when the victim's outputs may differ from float32's."""
    if not dtypes:
        return {}
    meta = {"dtypes": ", ".join(f"{role} {dtype}" for role, dtype in dtypes.items())}
    victim = dtypes.get("victim")
    if victim in ("bfloat16", "float16"):
        meta["dtype_note"] = (
            f"The victim ran in {victim}: its greedy outputs (and so Mem and extraction) may "
            "differ from those of float32 weights."
        )
    return meta


def report_for_run(store: Any, run_id: int, **kwargs: Any) -> Report:
    """``build_report`` on a stored run (``store`` is a ``memprobe_core.store.Store``).

    Raises:
        UsageError: a document run (:func:`require_attack_run`).
    """
    run = store.get_run(run_id)
    require_attack_run(run)
    meta = {
        "run_id": run_id,
        "kind": run["kind"],
        "title": run["title"],
        "status": run["status"],
        "units_total": run["units_total"],
        "units_done": run["units_done"],
        "units_error": run["units_error"],
    }
    meta.update(dtype_meta(((run.get("config") or {}).get("models") or {}).get("dtypes")))
    shared = ((run.get("config") or {}).get("dataset") or {}).get(SHARED_TEXTS)
    if isinstance(shared, dict) and shared.get("note"):  # members and non-members share texts
        meta["shared_texts_note"] = str(shared["note"])
    if "texts" not in kwargs and any(store.labels(run_id).values()):
        # A labelled audit's blind baseline reads the texts (an unlabelled one never needs them).
        kwargs["texts"] = {s.id: s.text for s in store.samples(run_id)}
    measure = ((run.get("config") or {}).get("options") or {}).get("measure") or {}
    kwargs.setdefault("left_out", tuple(measure.get("recall_prefix_ids") or ()))
    inference = ((run.get("config") or {}).get("dataset") or {}).get("inference")
    if inference is not None:  # a `memprobe infer` run; given settings override the stored
        lengths = (run.get("config") or {}).get("lengths") or ()
        kwargs["inference"] = {**inference, "lengths": lengths, **(kwargs.get("inference") or {})}
    elif kwargs.get("inference"):
        raise UsageError(
            f"run {run_id} is not a dataset-inference run (made by `memprobe infer`), so it "
            "has no significance level to set; leave the option out"
        )
    return build_report(
        store.results_frame(run_id), errors=store.errors_frame(run_id), meta=meta, **kwargs
    )


def json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready objects: NaN as ``None``, NumPy scalars as Python ones."""
    clean = frame.astype(object).where(frame.notna(), None)
    return [
        {k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}
        for row in clean.to_dict(orient="records")
    ]


def report_to_dict(report: Report) -> dict[str, Any]:
    """JSON-ready form: each table as a list of records (NaN → ``None``).

    Dataset inference and the membership table carry their ``verdict`` (conclusion, headline,
    reasons; :mod:`memprobe_core.membership.verdict`), each membership record its ``voided_by``.
    """
    blind, control = report.blind_baseline, report.random_split
    membership = membership_verdict(report.membership, blind, control)
    data = {
        "meta": report.meta,
        "summary": summary_lines(report),
        "table1": json_records(report.table1),
        "paired": json_records(report.paired),
        "pii": json_records(report.pii),
        "costs": json_records(report.costs),
        "errors": json_records(report.errors) if report.errors is not None else [],
        "membership": json_records(with_voided_by(report.membership, blind, control)),
        "membership_verdict": membership.to_dict() if membership is not None else None,
        "roc": json_records(report.roc),
        "blind_baseline": (
            report.blind_baseline.to_dict() if report.blind_baseline is not None else None
        ),
        "random_split": json_records(report.random_split),
        "dataset_inference": [
            {**d.to_dict(), "verdict": inference_verdict(d, blind).to_dict()}
            for d in report.dataset_inference
        ],
    }
    # Each method's own table under the method's name, after the report's own keys.
    taken = set(data) & set(report.method_tables)
    if taken:
        raise ValueError(
            f"method(s) {sorted(taken)} with a report table are named like a report key"
        )
    data.update({name: json_records(frame) for name, frame in report.method_tables.items()})
    return data
