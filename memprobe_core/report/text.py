"""Plain-text rendering of a :class:`memprobe_core.report.build.Report` for a terminal.

Fixed-width tables with intervals in brackets; counts below ``SMALL_N`` carry ``†`` and a footnote,
paired gains show the test used, its p-value and the Holm-adjusted p-value. Table 1 shows the
verbatim-extraction columns when some unit measured them; a labelled audit adds the membership
table (AUROC, TPR at 1 % / 0.1 % FPR) with what its FPRs mean for the audit's non-member count.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from memprobe_core.attacks.figures import MethodTable
from memprobe_core.attacks.registry import method_label, method_tables
from memprobe_core.chance import chance_notes
from memprobe_core.membership.blind import (
    RANDOM_SPLIT_METHOD,
    RANDOM_SPLIT_OK,
    RANDOM_SPLIT_TOO_FEW,
    blind_method,
    random_split_warning,
)
from memprobe_core.membership.evaluate import FPR_TARGETS
from memprobe_core.membership.inference import ASSUMPTION, METHOD, DatasetInference
from memprobe_core.membership.verdict import (
    VOIDED_BY,
    Verdict,
    inference_verdict,
    membership_verdict,
    with_voided_by,
)
from memprobe_core.pii import totals_statement
from memprobe_core.report.bracket_cells import bracket_lines
from memprobe_core.report.build import Report
from memprobe_core.report.formatting import (
    SMALL_N_MARK,
    n_mark,
    num,
    p_text,
    power_of_ten,
    signed_ci,
    with_ci,
)
from memprobe_core.report.leakage import shown_table1_figures, table_cell
from memprobe_core.report.pam_cells import has_pam, pam_cell, pam_notes
from memprobe_core.report.stats import DEFAULT_RESAMPLES
from memprobe_core.report.summary import summary_lines
from memprobe_core.stats import SMALL_N


def _header_lines(meta: dict[str, Any]) -> list[str]:
    head = f"Run {meta.get('run_id', '?')}"
    if meta.get("title"):
        head += f" — {meta['title']}"
    if "units_total" in meta:
        head += (
            f" · {meta.get('units_done', 0)}/{meta['units_total']} units done, "
            f"{meta.get('units_error', 0)} failed · status {meta.get('status')}"
        )
    lines = [head]
    models = ", ".join(f"{k} {meta[k]}" for k in ("victim", "base", "attacker") if meta.get(k))
    if models:
        lines.append(f"Models: {models}; ROUGE-L {meta.get('rouge_variant') or '?'}")
    if meta.get("dtypes"):
        lines.append(f"Dtypes: {meta['dtypes']}")
    if meta.get("dtype_note"):
        lines.append(str(meta["dtype_note"]))
    return lines


def _verbatim_columns(t1: pd.DataFrame, extract_k: Any) -> dict[str, list[str]]:
    """Table 1's verbatim columns, or none when no unit measured them (older runs)."""
    measured = [
        c for c in ("extractable", "match_tokens", "span_tokens") if c in t1 and t1[c].notna().any()
    ]
    if not measured:
        return {}
    k = f"k={extract_k}" if extract_k else "k"
    blank = [math.nan] * len(t1)
    return {
        f"Extractable ({k})": [num(v) for v in t1.get("extractable", blank)],
        "Match (tokens)": [num(v, 1) for v in t1.get("match_tokens", blank)],
        "Span (tokens)": [num(v, 1) for v in t1.get("span_tokens", blank)],
    }


def _pz_columns(t1: pd.DataFrame, discover_p: Any) -> dict[str, list[str]]:
    """Table 1's probabilistic-extraction columns, or none when no unit measured p_z."""
    if "pz_zero" not in t1 or not t1["pz_zero"].notna().any():
        return {}
    p = f"p={discover_p}" if discover_p else "p"
    return {
        "log10 p_z": [num(v, 1) for v in t1["log10_p_z"]],
        "p_z=0": [num(v, 2) for v in t1["pz_zero"]],
        f"n at {p}": [power_of_ten(v) for v in t1["log10_n_at_p"]],
    }


def _method_figure_columns(t1: pd.DataFrame) -> dict[str, list[str]]:
    """Table 1's columns of the methods' own figures, of the methods some cell measured."""
    return {
        f.table1.text: [num(v, f.table1.digits) for v in t1[f.name]]
        for f in shown_table1_figures(t1)
        if f.table1 is not None
    }


def _chance_columns(t1: pd.DataFrame) -> dict[str, list[str]]:
    """Table 1's chance-level columns, or none when no unit has a chance level."""
    if "chance_units" not in t1 or not (pd.to_numeric(t1["chance_units"]) > 0).any():
        return {}
    return {
        "Chance": [num(v) for v in t1["mem_chance"]],
        "Mem−chance": [("–" if pd.isna(v) else f"{v:+.3f}") for v in t1["mem_above_chance"]],
        "Beats chance": [
            "–" if not n else f"{num(v, 2)} ({n})"
            for v, n in zip(t1["beats_chance"], t1["chance_units"])
        ],
    }


def _method_table_lines(frame: pd.DataFrame, table: MethodTable) -> list[str]:
    """A method's own report table (``MethodSpec.report_table``) as text."""
    shown = pd.DataFrame({c.text: [table_cell(v, c) for v in frame[c.key]] for c in table.columns})
    return [f"\n{table.text_title}", shown.to_string(index=False)]


def _table1_lines(
    t1: pd.DataFrame, resamples: Any, selection: str | None, meta: dict[str, Any]
) -> list[str]:
    extract_k, discover_p = meta.get("extract_k"), meta.get("discover_p")
    table = pd.DataFrame(
        {
            "Method": t1["method_label"],
            "Domain": t1["domain"],
            "Length": t1["length"],
            "n": [n_mark(n, s) for n, s in zip(t1["n"], t1["small_n"])],
            "Mem": [with_ci(*r) for r in zip(t1["mem"], t1["mem_lo"], t1["mem_hi"])],
            "LCS_P": [with_ci(*r) for r in zip(t1["lcs_p"], t1["lcs_p_lo"], t1["lcs_p_hi"])],
            "Dis": [with_ci(*r) for r in zip(t1["dis"], t1["dis_lo"], t1["dis_hi"])],
            "Objective": [num(v) for v in t1["objective"]],
            **_verbatim_columns(t1, extract_k),
            **_pz_columns(t1, discover_p),
            **_method_figure_columns(t1),
            **_chance_columns(t1),
            **_pam_columns(t1),
        }
    )
    title = (
        f"\nTable 1 — mean per method, domain and length "
        f"(95 % BCa bootstrap CI, {resamples} resamples)"
    )
    if selection:
        title += f"\nMem = {selection}"
    if meta.get("pz_scheme") and "log10 p_z" in table:
        title += (
            f"\np_z under {meta['pz_scheme']}: median over units with p_z > 0; p_z=0: share of "
            "units with a suffix token the scheme cannot draw; n: samples to extract at p"
        )
    return [
        title,
        table.to_string(index=False),
        *chance_notes(meta),
        *pam_notes(meta),
        *_bracket_lines(t1, meta),
    ]


def _pam_columns(t1: pd.DataFrame) -> dict[str, list[str]]:
    """Table 1's prior-aware check column (docs/method.md §24), or none when no cell has one."""
    if not has_pam(t1):
        return {}
    return {"Prior-aware": [pam_cell(row) for _, row in t1.iterrows()]}


def _bracket_lines(t1: pd.DataFrame, meta: dict[str, Any]) -> list[str]:
    """Each Table 1 cell's extraction-risk bracket in words, when some cell measured a bound
    around p_z (docs/method.md §14)."""
    found = bracket_lines(t1, meta.get("pz_scheme"))
    if not found:
        return []
    scheme = f" under {meta['pz_scheme']}" if meta.get("pz_scheme") else ""
    lines = [
        f"\nExtraction risk bracket{scheme}: per cell, the median unit of each measure (the "
        "near-verbatim lower bound, p_z, the rank-based bound) and the least protected unit"
    ]
    for row, words in found:
        lines.append(f"  {row['method_label']} · {row['domain']} @ {row['length']}: {words}")
    return lines


def _paired_lines(p: pd.DataFrame) -> list[str]:
    table = pd.DataFrame(
        {
            "Method": p["method_label"],
            "over": p["baseline"].map(lambda b: method_label(b)),
            "Length": p["length"],
            "pairs": [n_mark(n, s) for n, s in zip(p["n_pairs"], p["small_n"])],
            "ΔMem [95 % CI]": [signed_ci(*r) for r in zip(p["mean_diff"], p["lo"], p["hi"])],
            "W/T/L": [f"{w}/{t}/{l_}" for w, t, l_ in zip(p["wins"], p["ties"], p["losses"])],
            "test": p["test"],
            "p": [p_text(v) for v in p["p_value"]],
            "p Holm": [p_text(v) for v in p["p_holm"]],
        }
    )
    return [
        "\nPaired improvement in Mem (method − baseline, per snippet)",
        table.to_string(index=False),
        (
            "Tests: two-sided; wilcoxon = signed-rank on the non-tied pairs, sign = exact sign test "
            "(fewer than 6 non-tied pairs), none = every pair tied (p = 1). p Holm: adjusted across "
            "the comparisons above (a gain and its mirror count once)."
        ),
    ]


def _pii_lines(p: pd.DataFrame) -> list[str]:
    table = pd.DataFrame(
        {
            "Method": p["method_label"],
            "units": p["units"],
            "in truth": p["truth"],
            "copied": p["copied"],
            "invented": p["invented"],
            "copied %": [("–" if math.isnan(v) else f"{100 * v:.1f}") for v in p["copied_share"]],
        }
    )
    return [
        "\nPII (items in the true suffixes / copied into outputs / invented)",
        table.to_string(index=False),
        "All methods: "
        + totals_statement(*(int(pd.to_numeric(p[c]).sum()) for c in ("copied", "invented"))),
    ]


def _cost_lines(c: pd.DataFrame) -> list[str]:
    table = pd.DataFrame(
        {
            "Method": c["method_label"],
            "units": c["units"],
            "victim q": c["victim_queries"],
            "attacker q": c["attacker_queries"],
            "tokens": c["generated_tokens"],
            "seconds": [f"{v:.1f}" for v in c["seconds"]],
            "s/unit": [f"{v:.1f}" for v in c["seconds_per_unit"]],
        }
    )
    return ["\nCost per method", table.to_string(index=False)]


def _verdict_lines(lead: str, verdict: Verdict) -> list[str]:
    """A verdict's headline (the same words as JSON, HTML and the dashboard), then its reasons,
    one a line."""
    return [f"{lead}{verdict.headline}", *(f"  - {reason}" for reason in verdict.reasons)]


def _membership_lines(report: Report, resamples: Any) -> list[str]:
    """The verdict first (the controls folded in), then the table, each voided row badged."""
    blind, control = report.blind_baseline, report.random_split
    m = with_voided_by(report.membership, blind, control)
    meta = report.meta
    verdict = membership_verdict(m, blind, control)
    table = pd.DataFrame(
        {
            "Score": m["score_label"],
            "Kind": m["kind"],
            "Length": m["length"],
            "AUROC": [with_ci(*r) for r in zip(m["auroc"], m["auroc_lo"], m["auroc_hi"])],
            "TPR@1%": [with_ci(*r) for r in zip(m["tpr_at_1"], m["tpr_at_1_lo"], m["tpr_at_1_hi"])],
            "TPR@0.1%": [
                with_ci(*r) for r in zip(m["tpr_at_01"], m["tpr_at_01_lo"], m["tpr_at_01_hi"])
            ],
            "n (member/non)": [f"{a}/{b}" for a, b in zip(m["n_members"], m["n_nonmembers"])],
            "Voided by": [v or "" for v in m[VOIDED_BY]],
        }
    )
    lines = [
        "\nMembership (labelled audit) — higher score = member, AUROC 0.5 = chance "
        f"(95 % stratified percentile bootstrap CI, {resamples} resamples)",
        *(_verdict_lines("Verdict: ", verdict) if verdict is not None else []),
        table.to_string(index=False),
    ]
    if meta.get("shared_texts_note"):
        lines.append(f"Warning: {meta['shared_texts_note']}")
    if meta.get("tpr_rule"):
        lines.append(f"TPR at FPR: {meta['tpr_rule']}")
    if meta.get("membership_note"):
        lines.append(f"FPR: {meta['membership_note']}")
    if meta.get("membership_left_out"):
        lines.append("Left out (ReCaLL's prefix texts): " + ", ".join(meta["membership_left_out"]))
    return lines


def _validity_lines(report: Report) -> list[str]:
    """A labelled audit's validity controls: the blind baseline, then the random split."""
    blind = report.blind_baseline
    lines = ["\nValidity controls (labelled audit)"]
    if blind is not None:
        lines.append("Blind baseline — " + blind_method(blind))
        if blind.note:
            lines.append(f"  not run: {blind.note}")
        else:
            figures = [
                ("AUROC", "auroc"),
                *((f"TPR@{100 * fpr:g}%", name) for name, fpr in FPR_TARGETS.items()),
            ]
            shown = " · ".join(
                f"{label} {with_ci(*(blind.figure(n + end) for end in ('', '_lo', '_hi')))}"
                for label, n in figures
            )
            lines.append(f"  {shown} · n (member/non) {blind.n_members}/{blind.n_nonmembers}")
        if blind.warning:
            lines.append(f"  WARNING: {blind.warning}")
    control = report.random_split
    lines.append("Random-split control — " + RANDOM_SPLIT_METHOD)
    if control is None or control.empty:
        lines.append(f"  {RANDOM_SPLIT_TOO_FEW}")
        return lines
    table = pd.DataFrame(
        {
            "Score": control["score_label"],
            "Kind": control["kind"],
            "Length": control["length"],
            "AUROC": [
                with_ci(*r) for r in zip(control["auroc"], control["auroc_lo"], control["auroc_hi"])
            ],
            "p": [p_text(v) for v in control["p_value"]],
            "p Holm": [p_text(v) for v in control["p_holm"]],
            "flagged": ["FLAGGED" if f else "" for f in control["flagged"]],
            "n (A/B)": [f"{a}/{b}" for a, b in zip(control["n_half_a"], control["n_half_b"])],
        }
    )
    lines.append(table.to_string(index=False))
    warning = random_split_warning(control)
    lines.append(f"  WARNING: {warning}" if warning else f"  {RANDOM_SPLIT_OK}")
    return lines


def _inference_lines(report: Report) -> list[str]:
    """A ``memprobe infer`` run's answer: each length's verdict first (the controls folded in),
    then how it was reached: the test, its control and the weights."""
    lines = [
        "\nDataset inference — was the suspect set used to train the victim? "
        "(suspect = member, held-out = non-member in the tables below)",
    ]
    for one in report.dataset_inference:
        verdict = inference_verdict(one, report.blind_baseline)
        lines += _verdict_lines(f"Length {one.length}: ", verdict)
    lines += [f"Method: {METHOD}", f"Assumption: {ASSUMPTION}"]
    for one in report.dataset_inference:
        lines += _inference_details(one)
    return lines


def _inference_details(one: DatasetInference) -> list[str]:
    """One length's test, control and weights (its notes are in the verdict's reasons)."""
    lines = [
        f"Length {one.length}: {one.n_suspect} suspect / {one.n_heldout} held-out texts, "
        f"level {one.significance:g}, split seed {one.seed}",
        f"  Test alone: {one.test_result}",
    ]
    if one.test is not None and one.test.note is None:
        t = one.test
        lines.append(
            f"  Welch t = {t.t:.3f}, df = {t.df:.1f}; mean score suspect {t.mean_suspect:.3f} "
            f"vs held-out {t.mean_heldout:.3f}; fitted on {t.n_a[0]}/{t.n_a[1]}, tested on "
            f"{t.n_b[0]}/{t.n_b[1]}"
        )
        weights = ", ".join(f"{name} {w:+.3f}" for name, w in one.weights.items())
        lines.append(f"  Weights (standardised, member-oriented signals): {weights}")
    if one.control is not None:
        verdict = "rejects" if one.control.rejected else "does not reject"
        lines.append(
            f"  Random-split control (two random halves of the suspect set): "
            f"p = {one.control.p_value:.3g}, {verdict}"
        )
    by_reason: dict[str, list[str]] = {}
    for name, why in one.left_out.items():
        by_reason.setdefault(why, []).append(name)
    if by_reason:
        lines.append(
            "  Signals left out: "
            + "; ".join(f"{why}: {', '.join(names)}" for why, names in by_reason.items())
        )
    return lines


def _footnotes(report: Report) -> list[str]:
    marked = bool(report.table1["small_n"].any()) if not report.table1.empty else False
    if not report.paired.empty:
        marked = marked or bool(report.paired["small_n"].any())
    notes = []
    if marked:
        notes.append(
            f"{SMALL_N_MARK} n < {SMALL_N}: too few snippets for a reliable interval or "
            "test; publish n with the number."
        )
    if not report.table1.empty:
        notes.append(
            "A mean without brackets has no interval: fewer than two values, or all equal."
        )
    if report.membership is not None and not report.membership.empty:
        notes.append(
            "A membership figure without brackets has no interval: a class with fewer than two "
            "snippets, or a zero-width bootstrap interval."
        )
    return ["", *notes] if notes else []


def render_text(report: Report) -> str:
    """The report as plain text for a terminal (fixed-width tables, intervals in brackets).

    Counts below ``SMALL_N`` carry a ``†`` explained in a footnote under the tables.
    """
    meta = report.meta
    lines = _header_lines(meta)
    summary = summary_lines(report)
    if summary:  # the answer first; the tables below are its evidence
        lines += ["", "Summary", *(f"  {line}" for line in summary)]
    if report.dataset_inference:
        lines += _inference_lines(report)
    if report.table1.empty and report.costs.empty:
        lines.append("\nNo finished units yet.")
    elif report.table1.empty:
        lines.append(
            "\nNo Table 1: the finished units are signals-only (no extraction method ran)."
        )
    else:
        lines += _table1_lines(
            report.table1,
            meta.get("resamples", DEFAULT_RESAMPLES),
            meta.get("selection_label"),
            meta,
        )
    if not report.paired.empty:
        lines += _paired_lines(report.paired)
    for name, table in method_tables():
        frame = report.method_tables.get(name)
        if frame is not None and not frame.empty:
            lines += _method_table_lines(frame, table)
    if not report.pii.empty:
        lines += _pii_lines(report.pii)
    if not report.costs.empty:
        lines += _cost_lines(report.costs)
    if report.membership is not None and not report.membership.empty:
        lines += _membership_lines(report, meta.get("resamples", DEFAULT_RESAMPLES))
    elif meta.get("membership_note"):  # labelled, but not both classes: say why no table
        lines.append(f"\nMembership (labelled audit): {meta['membership_note']}")
    if report.blind_baseline is not None:  # labelled audits only
        lines += _validity_lines(report)
    if report.errors is not None and not report.errors.empty:
        lines.append(f"\nFailed units ({len(report.errors)})")
        for row in report.errors.itertuples(index=False):
            lines.append(f"  {row.snippet_id} / {row.method} / {row.length}: {row.error}")
    lines += _footnotes(report)
    return "\n".join(lines)
