"""The parts of the HTML audit report: tables, figures and prompt/output blocks, per section.

Each ``*_section`` turns one part of a :class:`~memprobe_core.report.build.Report` (or the run's
stored units) into a :class:`Section` of plain data — texts, never markup, except the highlighted
outputs built by :func:`memprobe_core.highlight.segments_to_html` (every piece of text escaped)
and the figures' JSON. :mod:`memprobe_core.report.html` renders them with autoescaping.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from markupsafe import Markup

from memprobe_core.attacks import registry
from memprobe_core.attacks.figures import MethodTable
from memprobe_core.attacks.registry import method_label, method_order
from memprobe_core.chance import chance_notes
from memprobe_core.config import ScoringConfig
from memprobe_core.highlight import overlap, segments_to_html
from memprobe_core.membership.blind import (
    RANDOM_SPLIT_METHOD,
    RANDOM_SPLIT_OK,
    RANDOM_SPLIT_TOO_FEW,
    blind_method,
    random_split_warning,
)
from memprobe_core.membership.evaluate import FPR_TARGETS
from memprobe_core.membership.inference import ASSUMPTION as INFERENCE_ASSUMPTION
from memprobe_core.membership.inference import METHOD as INFERENCE_METHOD
from memprobe_core.membership.verdict import (
    VOIDED_BY,
    Verdict,
    inference_verdict,
    membership_verdict,
    with_voided_by,
)
from memprobe_core.pii import totals_statement
from memprobe_core.report import figures
from memprobe_core.report.bracket_cells import bracket_lines
from memprobe_core.report.build import Report
from memprobe_core.report.formatting import n_mark, num, p_text, power_of_ten, signed_ci, with_ci
from memprobe_core.report.leakage import shown_table1_figures, table_cell
from memprobe_core.report.pam_cells import has_pam, pam_cell, pam_notes, unit_pam_words
from memprobe_core.stats import SMALL_N

log = logging.getLogger(__name__)

# Run-manifest entries left out: the pid and host name of the process that ran it say nothing
# about the audit and are not the reader's business.
PRIVATE_MANIFEST_KEYS = ("owner",)


@dataclass
class Cell:
    text: str
    num: bool = False


@dataclass
class Table:
    columns: list[str]
    rows: list[list[Cell]]
    title: str = ""
    notes: list[str] = field(default_factory=list)
    kv: bool = False


@dataclass
class Figure:
    id: str
    title: str
    json: Markup


@dataclass
class Section:
    id: str
    title: str
    notes: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Shown first, under the title: what the figures allow once the controls have had their say.
    verdicts: list[Verdict] = field(default_factory=list)


def _table(frame: pd.DataFrame, columns: dict[str, Any], **kwargs: Any) -> Table:
    """A table from ``frame``: ``columns`` maps a header to a row → text function.

    Cells whose text starts like a number are right-aligned.
    """
    rows = [[_cell(fn(row)) for fn in columns.values()] for _, row in frame.iterrows()]
    return Table(columns=list(columns), rows=rows, **kwargs)


def _cell(value: Any) -> Cell:
    text = _text(value)
    return Cell(text, num=bool(text) and (text[0].isdigit() or text[0] in "+-–<"))


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _ci(prefix: str) -> Any:
    return lambda r: with_ci(r[prefix], r.get(f"{prefix}_lo"), r.get(f"{prefix}_hi"))


# --- manifest -------------------------------------------------------------------------------


def _flat(prefix: str, value: Any) -> Iterable[tuple[str, Any]]:
    """``(key, value)`` rows of a config/manifest entry, one level of nesting spelled out."""
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield f"{prefix}.{key}", inner
    else:
        yield prefix, value


def _when(timestamp: float | None) -> str | None:
    if not timestamp:
        return None
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _options_that_ran(options: dict[str, Any], methods: list[str]) -> dict[str, Any]:
    """The run's options without the sections of registered methods it did not run (an audit's
    config keeps every method's defaults; the appendix shows what mattered)."""
    ran = set(methods)
    unused = {
        spec.options_key
        for spec in registry.specs()
        if spec.options_key is not None and spec.name not in ran
    } - {spec.options_key for spec in registry.specs() if spec.name in ran}
    kept = {k: v for k, v in options.items() if k not in unused}
    if isinstance(kept.get("method_options"), dict):
        kept["method_options"] = {
            k: v for k, v in kept["method_options"].items() if k not in unused
        } or None
    return {k: v for k, v in kept.items() if v not in (None, {}, [])}


def _readable(value: Any) -> Any:
    """A section of options as ``name = value`` pairs, not JSON."""
    if isinstance(value, dict):
        return "; ".join(f"{k} = {v}" for k, v in value.items())
    return value


def _manifest_rows(run: dict[str, Any], units: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = [
        ("run", f"#{run.get('id')} · {run.get('kind')} · {run.get('title') or 'untitled'}"),
        ("status", run.get("status")),
        (
            "units",
            f"{run.get('units_done', 0)} done, {run.get('units_error', 0)} failed, "
            f"{run.get('units_total', 0)} in all",
        ),
        ("created", _when(run.get("created"))),
        ("updated", _when(run.get("updated"))),
    ]
    config = dict(run.get("config") or {})
    dataset = dict(config.pop("dataset", None) or {})
    if "rejected" in dataset:
        dataset["rejected"] = f"{len(dataset['rejected'] or [])} rows"
    options = dict(config.pop("options", None) or {})
    for key, value in config.items():
        rows += _flat(f"config.{key}", value)
    for key, value in _options_that_ran(options, config.get("methods") or []).items():
        rows += _flat(f"config.options.{key}", _readable(value))
    rows += _flat("dataset", dataset)
    manifest = {
        k: v for k, v in (run.get("manifest") or {}).items() if k not in PRIVATE_MANIFEST_KEYS
    }
    if "sessions" in manifest:
        manifest["sessions"] = len(manifest["sessions"] or [])
    for key, value in manifest.items():
        rows += _flat(f"manifest.{key}", value)
    versions = next((u["manifest"].get("versions") for u in units if u.get("manifest")), None)
    rows += _flat("versions", versions or {})
    return rows


def manifest_section(report: Report, run: dict[str, Any] | None, units: list[dict]) -> Section:
    meta_keys = (
        "selection_label",
        "interval",
        "resamples",
        "bootstrap_seed",
        "paired_test",
        "multiple_comparisons",
        "rouge_variant",
        "extract_k",
        "members",
        "nonmembers",
        "membership_interval",
        "victim",
        "base",
        "attacker",
        "dtypes",
        "dtype_note",
    )
    settings = [
        (f"report.{k}", report.meta[k]) for k in meta_keys if report.meta.get(k) is not None
    ]
    rows = (_manifest_rows(run, units) if run else []) + settings
    table = Table(
        columns=[], rows=[[Cell(k), Cell(_text(v))] for k, v in rows if v not in ({}, [])], kv=True
    )
    notes = [] if run else ["No run record was given: only the report's own settings are shown."]
    return Section("manifest", "Appendix: run manifest", notes=notes, tables=[table])


# --- tables and figures ---------------------------------------------------------------------


def _figure(fig: go.Figure, number: int, title: str) -> Figure:
    # plotly's JSON encoder already writes <, > and / as \\u escapes; the replace keeps that
    # guarantee should an encoder ever not, since a "</script>" would end the data block.
    data = figures.standalone(fig).to_json().replace("<", "\\u003c").replace(">", "\\u003e")
    return Figure(id=f"plot-{number}", title=title, json=Markup(data))


def _verbatim_columns(t1: pd.DataFrame, extract_k: Any) -> dict[str, Any]:
    """Table 1's verbatim columns (with their interval when the frame has one), if measured."""
    k = f"k={extract_k}" if extract_k else "k"
    headers = {
        "extractable": f"Extractable ({k})",
        "match_tokens": "Match (tokens)",
        "span_tokens": "Span (tokens)",
    }
    return {
        header: _ci(column)
        for column, header in headers.items()
        if column in t1 and t1[column].notna().any()  # older runs measured none
    }


def _pz_columns(t1: pd.DataFrame, discover_p: Any) -> dict[str, Any]:
    """Table 1's probabilistic-extraction columns, if any unit measured p_z."""
    if "pz_zero" not in t1 or not t1["pz_zero"].notna().any():
        return {}
    p = f"p={discover_p}" if discover_p else "p"
    return {
        "log10 p_z (median)": lambda r: num(r["log10_p_z"], 1),
        "p_z = 0 (share)": lambda r: num(r["pz_zero"], 2),
        f"n at {p} (median)": lambda r: power_of_ten(r["log10_n_at_p"]),
    }


def _method_figure_columns(t1: pd.DataFrame) -> dict[str, Any]:
    """Table 1's columns of the methods' own figures, of the methods some cell measured."""
    return {
        f.table1.html: (lambda r, f=f, digits=f.table1.digits: num(r[f.name], digits))
        for f in shown_table1_figures(t1)
        if f.table1 is not None
    }


def _chance_columns(t1: pd.DataFrame) -> dict[str, Any]:
    """Table 1's chance-level columns (memprobe_core.chance), if some unit has a chance level."""
    if "chance_units" not in t1 or not (pd.to_numeric(t1["chance_units"]) > 0).any():
        return {}
    return {
        "Chance level (mean)": lambda r: num(r["mem_chance"]),
        "Mem − chance mean": lambda r: (
            "–" if pd.isna(r["mem_above_chance"]) else f"{r['mem_above_chance']:+.3f}"
        ),
        "Beats chance (share, units)": lambda r: (
            "–" if not r["chance_units"] else f"{num(r['beats_chance'], 2)} ({r['chance_units']})"
        ),
    }


def method_table_section(name: str, table: MethodTable, frame: pd.DataFrame) -> Section:
    """A method's own report table (``MethodSpec.report_table``), its section id the method's
    name."""
    columns = {c.html: (lambda r, c=c: table_cell(r[c.key], c)) for c in table.columns}
    return Section(name, table.title, notes=list(table.notes), tables=[_table(frame, columns)])


def table1_section(report: Report, first_figure: int) -> Section:
    t1 = report.table1
    columns: dict[str, Any] = {
        "Method": lambda r: r["method_label"],
        "Domain": lambda r: r["domain"],
        "Length": lambda r: r["length"],
        "n": lambda r: n_mark(r["n"], r["small_n"]),
        "Mem [95 % CI]": _ci("mem"),
        "LCS_P [95 % CI]": _ci("lcs_p"),
        "Dis [95 % CI]": _ci("dis"),
        "Objective": lambda r: num(r["objective"]),
    }
    columns.update(_verbatim_columns(t1, report.meta.get("extract_k")))
    columns.update(_pz_columns(t1, report.meta.get("discover_p")))
    columns.update(_method_figure_columns(t1))
    columns.update(_chance_columns(t1))
    if has_pam(t1):  # the prior-aware check (docs/method.md §24), with --pam
        columns["Prior-aware check (units)"] = pam_cell
    notes = [
        f"Mem = {report.meta.get('selection_label', 'objective')}. Means with "
        f"{report.meta.get('interval', 'BCa bootstrap 95 %')} intervals "
        f"({report.meta.get('resamples', '?')} resamples, seed "
        f"{report.meta.get('bootstrap_seed', 0)}); 'all' pools the domains.",
        f"† n < {SMALL_N}: too few snippets for a reliable interval. A mean without brackets has "
        "no interval (fewer than two values, or all equal).",
    ]
    if report.meta.get("pz_scheme") and "pz_zero" in t1 and t1["pz_zero"].notna().any():
        notes.append(
            f"p_z: the chance that one sample under {report.meta['pz_scheme']} writes the true "
            "suffix after the prefix (Hayes et al. 2024), median over units with p_z > 0; "
            "'p_z = 0': share of units with a suffix token the scheme cannot draw; n: samples "
            "needed to extract it with probability p."
        )
    notes.extend(chance_notes(report.meta))
    notes.extend(pam_notes(report.meta))
    section = Section("table1", "Table 1", notes=notes, tables=[_table(t1, columns)])
    section.tables += _bracket_table(t1, report.meta.get("pz_scheme"))
    per_domain = t1[t1["domain"] != "all"]
    for length in sorted(per_domain["length"].unique()):
        fig = figures.domain_bars(per_domain[per_domain["length"] == length], "mem")
        title = f"Mem by domain and method, length {length} (95 % CI)"
        fig.update_layout(title=title)
        section.figures.append(_figure(fig, first_figure + len(section.figures), title))
    return section


def _bracket_table(t1: pd.DataFrame, scheme: Any) -> list[Table]:
    """Each Table 1 cell's extraction-risk bracket in words (docs/method.md §14), when some cell
    measured a bound around p_z (``[]``: none did)."""
    found = bracket_lines(t1, scheme)
    if not found:
        return []
    rows = [
        [_cell(row["method_label"]), _cell(row["domain"]), _cell(row["length"]), _cell(words)]
        for row, words in found
    ]
    under = f" under {scheme}" if scheme else ""
    note = (
        f"Per cell, the median unit of each measure{under}: a certified lower bound on the "
        "chance that one sample writes the suffix within the edit budget (near-verbatim), the "
        "exact chance that it writes it verbatim (p_z), and the rank-based bound that no "
        "decoding of any configuration beats (Liu et al. 2026); then the least protected unit's "
        "bits. Medians of the bounds are over the units where each is informative (a bound "
        "above 0, a finite b), as p_z's is over the units with p_z > 0."
    )
    columns = ["Method", "Domain", "Length", "Extraction risk bracket"]
    return [Table(columns=columns, rows=rows, title="Extraction risk bracket", notes=[note])]


def paired_section(report: Report) -> Section:
    columns = {
        "Method": lambda r: r["method_label"],
        "over": lambda r: method_label(r["baseline"]),
        "Length": lambda r: r["length"],
        "pairs": lambda r: n_mark(r["n_pairs"], r["small_n"]),
        "ΔMem [95 % CI]": lambda r: signed_ci(r["mean_diff"], r["lo"], r["hi"]),
        "W/T/L": lambda r: f"{r['wins']}/{r['ties']}/{r['losses']}",
        "test": lambda r: r["test"],
        "p": lambda r: p_text(r["p_value"]),
        "p Holm": lambda r: p_text(r["p_holm"]),
    }
    notes = [
        "Per snippet and length: method − baseline. Tests two-sided: wilcoxon = signed-rank on "
        "the non-tied pairs, sign = exact sign test (fewer than 6 non-tied pairs), none = every "
        "pair tied (p = 1). p Holm: adjusted across the comparisons (a gain and its mirror "
        "count once)."
    ]
    return Section("paired", "Paired gains", notes=notes, tables=[_table(report.paired, columns)])


def membership_section(report: Report, first_figure: int) -> Section:
    """The verdict first (the validity controls folded in), then the table, each voided row
    badged, and the ROC curves."""
    blind, control = report.blind_baseline, report.random_split
    m = with_voided_by(report.membership, blind, control)
    verdict = membership_verdict(m, blind, control)
    columns = {
        "Score": lambda r: r["score_label"],
        "kind": lambda r: r["kind"],
        "Length": lambda r: r["length"],
        "members / non-members": lambda r: f"{r['n_members']} / {r['n_nonmembers']}",
        "AUROC [95 % CI]": _ci("auroc"),
        "TPR @ 1 % FPR [95 % CI]": _ci("tpr_at_1"),
        "TPR @ 0.1 % FPR [95 % CI]": _ci("tpr_at_01"),
        "voided by": lambda r: r[VOIDED_BY] or "",
    }
    meta = report.meta
    notes = [
        "Members vs non-members by each membership signal and by each extraction method's Mem "
        "(higher = more member-like). AUROC 0.5 is chance. TPR at a fixed low FPR is what an "
        "attack is judged by (Carlini et al. 2022). Intervals: "
        f"{meta.get('membership_interval', 'bootstrap 95 %')}; a figure without brackets has "
        "no interval.",
    ]
    if meta.get("shared_texts_note"):
        notes.append(f"Warning: {meta['shared_texts_note']}")
    if meta.get("tpr_rule"):
        notes.append(f"TPR at FPR: {meta['tpr_rule']}")
    if meta.get("membership_note"):
        notes.append(f"FPR: {meta['membership_note']}")
    if meta.get("membership_left_out"):
        notes.append("Left out (ReCaLL's prefix texts): " + ", ".join(meta["membership_left_out"]))
    tables = [_table(m, columns)] if not m.empty else []
    section = Section("membership", "Membership", notes=notes, tables=tables)
    section.verdicts = [verdict] if verdict is not None else []
    for length in sorted(report.roc["length"].unique()) if not report.roc.empty else []:
        fig = figures.roc_figure(report.roc, length, membership=m)
        title = f"ROC, length {length}"
        section.figures.append(_figure(fig, first_figure + len(section.figures), title))
    return section


def inference_section(report: Report) -> Section:
    """A dataset-inference run's test per length, its control and the fitted weights."""
    section = Section(
        "inference",
        "Dataset inference",
        notes=[
            f"Was the suspect set used to train the victim? {INFERENCE_METHOD}.",
            f"Assumption: {INFERENCE_ASSUMPTION}.",
            "The membership table and validity controls read the suspect set as members and "
            "the held-out set as non-members.",
        ],
    )
    rows = []
    for one in report.dataset_inference:
        for name, outcome in (("suspect vs held-out", one.test), ("control", one.control)):
            if outcome is None:
                continue
            rows.append(
                [
                    _cell(one.length),
                    Cell(name),
                    _cell(f"{one.n_suspect} / {one.n_heldout}"),
                    _cell(f"{outcome.p_value:.3g}"),
                    Cell("rejected" if outcome.rejected else "not rejected"),
                    _cell(f"{outcome.t:.3f}"),
                    _cell(f"{outcome.df:.1f}"),
                ]
            )
        # The verdict, not the bare test, leads: its reasons carry the controls and notes.
        verdict = inference_verdict(one, report.blind_baseline)
        headline = f"Length {one.length}: {verdict.headline}"
        section.verdicts.append(dataclasses.replace(verdict, headline=headline))
        if one.weights:
            weights = ", ".join(f"{n} {w:.3f}" for n, w in one.weights.items())
            section.notes.append(f"Length {one.length}, fitted weights: {weights}.")
    if rows:
        section.tables.append(
            Table(
                columns=["Length", "test", "suspect / held-out", "p", "at the level", "t", "df"],
                rows=rows,
                title="One-sided Welch t-test of the learnt scores (B halves)",
            )
        )
    return section


def validity_section(report: Report) -> Section:
    """A labelled audit's validity controls: the blind baseline and the random-split control."""
    blind, control = report.blind_baseline, report.random_split
    section = Section(
        "validity",
        "Validity controls",
        notes=[
            'Can the split be told apart without the model (Das et al. 2024, "Blind Baselines '
            'Beat Membership Inference Attacks for Foundation Models")? And does the evaluation '
            "give chance when the labels mean nothing?"
        ],
    )
    if blind is not None and blind.note:
        section.notes.append(f"Blind baseline not run: {blind.note}.")
    elif blind is not None:
        if blind.warning:
            section.warnings.append(f"Blind baseline: {blind.warning}")
        figures = [
            ("AUROC", "auroc"),
            *((f"TPR @ {100 * f:g} % FPR", n) for n, f in FPR_TARGETS.items()),
        ]
        rows = [
            [
                Cell("blind baseline (no model)"),
                _cell(f"{blind.n_members} / {blind.n_nonmembers}"),
                _cell(blind.folds or "–"),
                *(
                    _cell(with_ci(*(blind.figure(n + end) for end in ("", "_lo", "_hi"))))
                    for _, n in figures
                ),
            ]
        ]
        notes = [blind_method(blind) + "."]
        if blind.best_score_label is not None:
            notes.append(
                f"Best score of the membership table: {blind.best_score_label} (length "
                f"{blind.best_length}), AUROC {num(blind.best_auroc)}."
            )
        section.tables.append(
            Table(
                columns=[
                    "Control",
                    "members / non-members",
                    "folds",
                    *(f"{label} [95 % CI]" for label, _ in figures),
                ],
                rows=rows,
                title="Blind baseline",
                notes=notes,
            )
        )
    warning = random_split_warning(control)
    if warning:
        section.warnings.append(f"Random-split control: {warning}")
    if control is None or control.empty:
        section.notes.append(f"Random-split control: {RANDOM_SPLIT_TOO_FEW}.")
        return section
    columns = {
        "Score": lambda r: r["score_label"],
        "kind": lambda r: r["kind"],
        "Length": lambda r: r["length"],
        "half A / half B": lambda r: f"{r['n_half_a']} / {r['n_half_b']}",
        "AUROC [95 % CI]": _ci("auroc"),
        "p": lambda r: p_text(r["p_value"]),
        "p Holm": lambda r: p_text(r["p_holm"]),
        "flagged": lambda r: "FLAGGED" if r["flagged"] else "",
    }
    notes = [RANDOM_SPLIT_METHOD[0].upper() + RANDOM_SPLIT_METHOD[1:] + "."]
    if not warning:
        notes.append(RANDOM_SPLIT_OK[0].upper() + RANDOM_SPLIT_OK[1:] + ".")
    section.tables.append(_table(control, columns, title="Random-split control", notes=notes))
    return section


PII_COUNTS = ("copied", "invented")


def _pii_totals(pii: pd.DataFrame) -> str:
    """The PII table's totals stated, each "none" when zero (memprobe_core.pii)."""
    return totals_statement(*(int(pd.to_numeric(pii[c]).sum()) for c in PII_COUNTS))


def pii_section(report: Report) -> Section:
    columns = {
        "Method": lambda r: r["method_label"],
        "units": lambda r: r["units"],
        "in truth": lambda r: r["truth"],
        "copied": lambda r: r["copied"],
        "invented": lambda r: r["invented"],
        "copied %": lambda r: (
            "–" if pd.isna(r["copied_share"]) else f"{100 * r['copied_share']:.1f}"
        ),
    }
    notes = [
        "PII items in the true suffixes, copied into the outputs, and invented by them.",
        "All methods: " + _pii_totals(report.pii),
    ]
    return Section("pii", "PII", notes=notes, tables=[_table(report.pii, columns)])


def cost_section(report: Report) -> Section:
    columns = {
        "Method": lambda r: r["method_label"],
        "units": lambda r: r["units"],
        "victim queries": lambda r: r["victim_queries"],
        "attacker queries": lambda r: r["attacker_queries"],
        "generated tokens": lambda r: r["generated_tokens"],
        "seconds": lambda r: f"{r['seconds']:.1f}",
        "s / unit": lambda r: f"{r['seconds_per_unit']:.1f}",
    }
    return Section("costs", "Costs", tables=[_table(report.costs, columns)])


def errors_section(report: Report) -> Section:
    columns = {c: (lambda r, c=c: r[c]) for c in ("snippet_id", "method", "length", "error")}
    return Section("errors", "Failed units", tables=[_table(report.errors, columns)])


# --- prompts and outputs --------------------------------------------------------------------


def _method_block(unit: dict[str, Any]) -> dict[str, Any]:
    """One method's chosen prompt and output, the output's common subsequence highlighted."""
    split = (unit.get("manifest") or {}).get("split") or {}
    scoring = (unit.get("manifest") or {}).get("scoring")
    output, suffix = str(unit.get("output") or ""), split.get("suffix")
    scores = f"Mem {num(unit.get('mem'))} · LCS_P {num(unit.get('lcs_p'))}"
    pam = unit_pam_words(unit.get("verbatim"))
    if pam:  # the unit's prior-aware check (docs/method.md §24)
        scores += f" · {pam}"
    block = {
        "label": method_label(unit["method"]),
        "prompt": str(unit.get("prompt") or ""),
        "rest": "",
    }
    if suffix is None:  # units of older versions kept no split
        return block | {
            "scores": scores + " · no stored suffix to compare with",
            "output_html": output,
            "suffix_html": "–",
        }
    config = _scoring(scoring)
    # No tokenizer here: the scored window counts words, as a replay on the Runs page does.
    ov = overlap(output, str(suffix), config, suffix_tokens=split.get("suffix_tokens"))
    return block | {
        "scores": f"{scores} · {ov.lcs_tokens} of {ov.suffix_tokens} suffix words in the common "
        "subsequence",
        "output_html": Markup(segments_to_html(ov.output_segments)),
        "suffix_html": Markup(segments_to_html(ov.suffix_segments)),
        "rest": ov.output_rest,
    }


def _scoring(stored: dict[str, Any] | None) -> ScoringConfig | None:
    """The unit's scoring options; the defaults when they cannot be read (another version)."""
    if not stored:
        return None
    try:
        return ScoringConfig(**stored)
    except (TypeError, ValueError) as exc:
        log.warning(
            "scoring options %s unreadable (%s); highlighting with the defaults", stored, exc
        )
        return None


def _example_groups(
    units: list[dict[str, Any]], labels: dict[str, str | None]
) -> list[dict[str, Any]]:
    """Per (snippet, length), in run order: each method's block, in the paper's order."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for unit in units:
        groups.setdefault((unit["snippet_id"], int(unit["length"])), []).append(unit)
    out = []
    for (snippet_id, length), members in groups.items():
        order = method_order(u["method"] for u in members)
        members = sorted(members, key=lambda u: order.index(u["method"]))
        best = max(members, key=lambda u: -1.0 if u.get("mem") is None else float(u["mem"]))
        label = labels.get(snippet_id)
        summary = (
            f"{snippet_id} · {members[0].get('domain', 'unknown')} · length {length}"
            + (f" · {label}" if label else "")
            + f" · best Mem {num(best.get('mem'))} "
            f"({method_label(best['method'])})"
        )
        out.append({"summary": summary, "methods": [_method_block(u) for u in members]})
    return out


def examples_section(
    units: list[dict[str, Any]], labels: dict[str, str | None], max_groups: int
) -> Section:
    groups = _example_groups(units, labels)
    notes = [
        "Per snippet and length, each method's chosen prompt (p*) and the victim's output for "
        "it; the words of the longest common subsequence with the true suffix are highlighted. "
        "Grey text is past the scored window."
    ]
    if len(groups) > max_groups:
        notes.append(
            f"The first {max_groups} of {len(groups)} (snippet, length) pairs are shown; "
            "`memprobe report RUN --csv` writes every unit."
        )
    return Section("examples", "Prompts and outputs", notes=notes, examples=groups[:max_groups])
