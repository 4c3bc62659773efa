"""Reports over a run's results: the paper's Table 1 and what the paper lacks.

From ``Store.results_frame`` (one row per finished unit) this builds:

- **Table 1**: method × domain × length → mean Mem, LCS_P, Dis, objective and n, each mean with a
  bootstrap 95 % interval (percentile method, seeded numpy, 1000 resamples by default). Rows with
  domain ``all`` pool the domains.
- **Paired improvement** of each method over P-S-Inst and over P-S-Base: per snippet and length,
  the difference in Mem (method − baseline), its mean, bootstrap interval and wins/ties/losses.
  Pairing removes the snippet-to-snippet spread, which dwarfs method differences.
- **PII**: items in the true suffixes, copied into outputs, invented by outputs, per method.
- **Cost** per method: victim and attacker queries, generated tokens, seconds (total and per unit).

``render_text`` draws it for a terminal; ``report_to_dict`` gives JSON-ready records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from memprobe_core.attacks.result import METHOD_LABELS

BASELINES: tuple[str, ...] = ("ps_inst", "ps_base")
DEFAULT_RESAMPLES = 1000
# Differences smaller than this count as ties (scores are ratios of small integers, so real
# differences are far larger; this only absorbs float noise).
TIE_TOLERANCE = 1e-9

TABLE1_COLUMNS = [
    "method", "method_label", "domain", "length", "n",
    "mem", "mem_lo", "mem_hi", "lcs_p", "lcs_p_lo", "lcs_p_hi",
    "dis", "dis_lo", "dis_hi", "objective",
]
PAIRED_COLUMNS = [
    "method", "method_label", "baseline", "metric", "length", "n_pairs",
    "mean_diff", "lo", "hi", "wins", "ties", "losses",
]
PII_COLUMNS = ["method", "method_label", "units", "truth", "copied", "invented", "copied_share"]
COST_COLUMNS = [
    "method", "method_label", "units", "victim_queries", "attacker_queries", "generated_tokens",
    "seconds", "queries_per_unit", "tokens_per_unit", "seconds_per_unit",
]


@dataclass
class Report:
    """Aggregates of one run (all pandas DataFrames; see the module docstring).

    Attributes:
        table1 / paired / pii / costs: the four tables.
        errors: failed units (snippet_id, method, length, attempts, error), may be empty.
        meta: run id, result count, resamples, seed, ROUGE variant and models when known.
    """

    table1: pd.DataFrame
    paired: pd.DataFrame
    pii: pd.DataFrame
    costs: pd.DataFrame
    errors: pd.DataFrame = field(default_factory=pd.DataFrame)
    meta: dict[str, Any] = field(default_factory=dict)


def bootstrap_ci(
    values: np.ndarray | pd.Series, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap 95 % interval of the mean; NaNs dropped.

    Returns ``(nan, nan)`` for fewer than two values (no spread to resample).
    """
    data = np.asarray(values, dtype=float)
    data = data[~np.isnan(data)]
    if data.size < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(resamples, data.size))  # (B, n)
    means = data[idx].mean(axis=1)  # (B,)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def _method_order(method: str) -> int:
    order = list(METHOD_LABELS)
    return order.index(method) if method in order else len(order)


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    if frame.empty:
        return frame.reset_index(drop=True)
    frame = frame.assign(_order=frame["method"].map(_method_order))
    return frame.sort_values(["_order", *keys], kind="stable").drop(columns="_order").reset_index(
        drop=True
    )


def table1(results: pd.DataFrame, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """Method × domain × length means with bootstrap intervals (plus pooled ``all`` domains)."""
    rows = []
    if results.empty:
        return pd.DataFrame(columns=TABLE1_COLUMNS)
    pooled = results.assign(domain="all") if results["domain"].nunique() > 1 else None
    frames = [results] if pooled is None else [results, pooled]
    for frame in frames:
        for (method, domain, length), group in frame.groupby(["method", "domain", "length"]):
            row: dict[str, Any] = {
                "method": method,
                "method_label": METHOD_LABELS.get(method, method),
                "domain": domain,
                "length": int(length),
                "n": len(group),
                "objective": float(group["objective"].astype(float).mean()),
            }
            for metric in ("mem", "lcs_p", "dis"):
                values = pd.to_numeric(group[metric], errors="coerce")
                row[metric] = float(values.mean()) if values.notna().any() else math.nan
                row[f"{metric}_lo"], row[f"{metric}_hi"] = bootstrap_ci(
                    values, resamples=resamples, seed=seed
                )
            rows.append(row)
    out = pd.DataFrame(rows, columns=TABLE1_COLUMNS)
    out = out.assign(_all=(out["domain"] == "all"))
    out = _sorted(out, ["_all", "domain", "length"]).drop(columns="_all")
    return out


def paired_improvement(
    results: pd.DataFrame,
    *,
    metric: str = "mem",
    baselines: tuple[str, ...] = BASELINES,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """Per-snippet improvement of each method over each baseline, by length.

    Pairs are (snippet_id, length) present for both the method and the baseline; the difference
    is ``method − baseline`` of ``metric``.
    """
    rows = []
    if results.empty:
        return pd.DataFrame(columns=PAIRED_COLUMNS)
    keyed = results.set_index(["method", "snippet_id", "length"])[metric].astype(float)
    keyed = keyed[~keyed.index.duplicated(keep="last")]
    methods = sorted(results["method"].unique(), key=_method_order)
    for baseline in baselines:
        if baseline not in methods:
            continue
        base = keyed.xs(baseline, level="method")
        for method in methods:
            if method == baseline:
                continue
            mine = keyed.xs(method, level="method")
            both = pd.concat([mine.rename("m"), base.rename("b")], axis=1, join="inner").dropna()
            for length, group in both.groupby(level="length"):
                diff = (group["m"] - group["b"]).to_numpy()
                lo, hi = bootstrap_ci(diff, resamples=resamples, seed=seed)
                rows.append({
                    "method": method,
                    "method_label": METHOD_LABELS.get(method, method),
                    "baseline": baseline,
                    "metric": metric,
                    "length": int(length),
                    "n_pairs": int(diff.size),
                    "mean_diff": float(diff.mean()),
                    "lo": lo,
                    "hi": hi,
                    "wins": int((diff > TIE_TOLERANCE).sum()),
                    "ties": int((np.abs(diff) <= TIE_TOLERANCE).sum()),
                    "losses": int((diff < -TIE_TOLERANCE).sum()),
                })
    out = pd.DataFrame(rows, columns=PAIRED_COLUMNS)
    if out.empty:
        return out
    out = out.assign(_b=out["baseline"].map(list(baselines).index))
    return _sorted(out, ["_b", "length"]).drop(columns="_b")


def pii_totals(results: pd.DataFrame) -> pd.DataFrame:
    """PII items in the truth, copied and invented, summed per method."""
    if results.empty:
        return pd.DataFrame(columns=PII_COLUMNS)
    grouped = results.groupby("method").agg(
        units=("snippet_id", "size"), truth=("pii_truth", "sum"), copied=("pii_copied", "sum"),
        invented=("pii_invented", "sum"),
    ).reset_index()
    grouped["method_label"] = grouped["method"].map(lambda m: METHOD_LABELS.get(m, m))
    truth = grouped["truth"].astype(float)
    grouped["copied_share"] = np.where(truth > 0, grouped["copied"] / truth.where(truth > 0), np.nan)
    return _sorted(grouped[PII_COLUMNS], [])


def cost_per_method(results: pd.DataFrame) -> pd.DataFrame:
    """Queries, generated tokens and seconds per method (totals and per unit)."""
    if results.empty:
        return pd.DataFrame(columns=COST_COLUMNS)
    grouped = results.groupby("method").agg(
        units=("snippet_id", "size"), victim_queries=("victim_queries", "sum"),
        attacker_queries=("attacker_queries", "sum"), generated_tokens=("generated_tokens", "sum"),
        seconds=("seconds", "sum"),
    ).reset_index()
    grouped["method_label"] = grouped["method"].map(lambda m: METHOD_LABELS.get(m, m))
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
) -> Report:
    """All four tables from a results frame (``Store.results_frame``).

    Args:
        results: one row per finished unit.
        errors: failed units (``Store.errors_frame``), shown under the tables.
        resamples / seed: bootstrap settings (seeded, so a report is reproducible).
        meta: extra facts to carry (run id, title …).
    """
    info = dict(meta or {})
    info.update({"results": len(results), "resamples": resamples, "bootstrap_seed": seed})
    if not results.empty:
        for column in ("rouge_variant", "victim", "base", "attacker"):
            if column in results:
                values = sorted({str(v) for v in results[column].dropna().unique()})
                info[column] = ", ".join(values) if values else None
    return Report(
        table1=table1(results, resamples=resamples, seed=seed),
        paired=paired_improvement(results, resamples=resamples, seed=seed),
        pii=pii_totals(results),
        costs=cost_per_method(results),
        errors=errors if errors is not None else pd.DataFrame(),
        meta=info,
    )


def report_for_run(store: Any, run_id: int, **kwargs: Any) -> Report:
    """``build_report`` on a stored run (``store`` is a ``memprobe_core.store.Store``)."""
    run = store.get_run(run_id)
    meta = {"run_id": run_id, "kind": run["kind"], "title": run["title"], "status": run["status"],
            "units_total": run["units_total"], "units_done": run["units_done"],
            "units_error": run["units_error"]}
    return build_report(store.results_frame(run_id), errors=store.errors_frame(run_id),
                        meta=meta, **kwargs)


# --- rendering ------------------------------------------------------------------------------------
def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def _with_ci(mean: Any, lo: Any, hi: Any) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    if isinstance(lo, float) and math.isnan(lo):
        return _num(mean)
    return f"{_num(mean)} [{_num(lo)}, {_num(hi)}]"


def _signed_ci(mean: float, lo: float, hi: float) -> str:
    if math.isnan(lo):
        return f"{mean:+.3f}"
    return f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def render_text(report: Report) -> str:
    """The report as plain text for a terminal (fixed-width tables, intervals in brackets)."""
    meta = report.meta
    lines = []
    head = f"Run {meta.get('run_id', '?')}"
    if meta.get("title"):
        head += f" — {meta['title']}"
    if "units_total" in meta:
        head += (f" · {meta.get('units_done', 0)}/{meta['units_total']} units done, "
                 f"{meta.get('units_error', 0)} failed · status {meta.get('status')}")
    lines.append(head)
    models = ", ".join(f"{k} {meta[k]}" for k in ("victim", "base", "attacker") if meta.get(k))
    if models:
        lines.append(f"Models: {models}; ROUGE-L {meta.get('rouge_variant') or '?'}")
    if report.table1.empty:
        lines.append("\nNo finished units yet.")
    else:
        t1 = report.table1
        lines.append(f"\nTable 1 — mean per method, domain and length "
                     f"(95 % bootstrap CI, {meta.get('resamples', DEFAULT_RESAMPLES)} resamples)")
        table = pd.DataFrame({
            "Method": t1["method_label"], "Domain": t1["domain"], "Length": t1["length"],
            "n": t1["n"],
            "Mem": [_with_ci(*r) for r in zip(t1["mem"], t1["mem_lo"], t1["mem_hi"])],
            "LCS_P": [_with_ci(*r) for r in zip(t1["lcs_p"], t1["lcs_p_lo"], t1["lcs_p_hi"])],
            "Dis": [_with_ci(*r) for r in zip(t1["dis"], t1["dis_lo"], t1["dis_hi"])],
            "Objective": [_num(v) for v in t1["objective"]],
        })
        lines.append(table.to_string(index=False))
    if not report.paired.empty:
        lines.append("\nPaired improvement in Mem (method − baseline, per snippet)")
        p = report.paired
        table = pd.DataFrame({
            "Method": p["method_label"],
            "over": p["baseline"].map(lambda b: METHOD_LABELS.get(b, b)),
            "Length": p["length"], "pairs": p["n_pairs"],
            "ΔMem [95 % CI]": [_signed_ci(*r) for r in zip(p["mean_diff"], p["lo"], p["hi"])],
            "W/T/L": [f"{w}/{t}/{l_}" for w, t, l_ in zip(p["wins"], p["ties"], p["losses"])],
        })
        lines.append(table.to_string(index=False))
    if not report.pii.empty:
        lines.append("\nPII (items in the true suffixes / copied into outputs / invented)")
        p = report.pii
        table = pd.DataFrame({
            "Method": p["method_label"], "units": p["units"], "in truth": p["truth"],
            "copied": p["copied"], "invented": p["invented"],
            "copied %": [("–" if math.isnan(v) else f"{100 * v:.1f}") for v in p["copied_share"]],
        })
        lines.append(table.to_string(index=False))
    if not report.costs.empty:
        lines.append("\nCost per method")
        c = report.costs
        table = pd.DataFrame({
            "Method": c["method_label"], "units": c["units"],
            "victim q": c["victim_queries"], "attacker q": c["attacker_queries"],
            "tokens": c["generated_tokens"], "seconds": [f"{v:.1f}" for v in c["seconds"]],
            "s/unit": [f"{v:.1f}" for v in c["seconds_per_unit"]],
        })
        lines.append(table.to_string(index=False))
    if report.errors is not None and not report.errors.empty:
        lines.append(f"\nFailed units ({len(report.errors)})")
        for row in report.errors.itertuples(index=False):
            lines.append(f"  {row.snippet_id} / {row.method} / {row.length}: {row.error}")
    return "\n".join(lines)


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    clean = frame.astype(object).where(frame.notna(), None)
    return [
        {k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}
        for row in clean.to_dict(orient="records")
    ]


def report_to_dict(report: Report) -> dict[str, Any]:
    """JSON-ready form: each table as a list of records (NaN → ``None``)."""
    return {
        "meta": report.meta,
        "table1": _records(report.table1),
        "paired": _records(report.paired),
        "pii": _records(report.pii),
        "costs": _records(report.costs),
        "errors": _records(report.errors) if report.errors is not None else [],
    }
