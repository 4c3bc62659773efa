"""A diff and a gate for people and programs: plain text, JSON (``docs/schemas/``) and a
self-contained HTML page for the diff (every text escaped: outputs and ids are anyone's)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from memprobe_core.attacks.registry import method_label
from memprobe_core.highlight import escape_html, overlap, segments_to_html
from memprobe_core.membership.options import SIGNAL_BY_NAME
from memprobe_core.release.diff import ALPHA, DIFF_COLUMNS, FIGURES, RunDiff
from memprobe_core.release.gate import GateResult
from memprobe_core.report.build import json_records
from memprobe_core.report.formatting import p_text

DIFF_SCHEMA = "memprobe-diff/2"
# What a person reads for each figure of the diff (the keys stay in the JSON and the CSV).
FIGURE_LABELS = {
    "mean_mem": "mean Mem",
    "extraction_rate": "extraction rate",
    "median_log10_p_z": "median log10 p_z",
    "median_near_verbatim_log10_lower": "median log10 near-verbatim lower bound",
    "median_extraction_bits": "median extraction bits",
    "auroc": "AUROC",
}
# The columns of the diff as people read it (page and HTML): label -> what it holds.
DIFF_SHOWN: dict[str, str] = {
    "figure": "the measured figure (" + "; ".join(f"{k}: {v}" for k, v in FIGURES.items()) + ")",
    "where": "the method (Mem, extraction) or the membership signal (AUROC), @ snippet length",
    "n": "paired units: finished in both runs",
    "A": "the baseline run's figure (A)",
    "B": "the candidate run's figure (B)",
    "change B − A [95 % CI]": "a mean of paired differences (AUROC: the difference of the two), "
    "with its 95 % interval: BCa (Mem, extraction), paired bootstrap (AUROC)",
    "test": "the paired test: wilcoxon / sign (Mem, p_z and its bounds), mcnemar (extracted or not), bootstrap "
    "(AUROC)",
    "p (Holm-adjusted)": f"the test's p-value, Holm-adjusted over the table; 'significant' below "
    f"{ALPHA:g}",
    "voided by": "the validity control of a run's report that voids the figure (A, B or both): "
    "inconclusive, not evidence either way (–: none)",
}
_SHOWN_OUTPUT_CHARS = 160  # per output in the text view; the HTML and JSON show them whole


def diff_text(diff: RunDiff) -> str:
    """The diff as the terminal shows it."""
    runs = diff.runs
    lines = [
        f"run {runs.run_b} ({runs.victim_b}) against run {runs.run_a} ({runs.victim_a}): "
        f"{runs.units} paired unit(s); change = run {runs.run_b} − run {runs.run_a}",
    ]
    if runs.note():
        lines.append(f"note: {runs.note()}")
    lines.append("")
    shown = diff.table.assign(
        where=[_where(r) for r in diff.table.itertuples(index=False)],
        **{
            "A": diff.table["a"].map(_num),
            "B": diff.table["b"].map(_num),
            "change [95 % CI]": [
                _change(r.change, r.low, r.high) for r in diff.table.itertuples(index=False)
            ],
            "p Holm": diff.table["p_holm"].map(p_text),
            "": diff.table["significant"].map(lambda s: "*" if s else ""),
            "voided": [_voided_sides(r) for r in diff.table.itertuples(index=False)],
        },
    )
    columns = ["figure", "where", "n", "A", "B", "change [95 % CI]", "test", "p Holm", ""]
    columns += ["voided"] if not diff.voided().empty else []
    lines.append(shown[columns].to_string(index=False) if not shown.empty else "(no figure)")
    lines.append(
        f"* significant: Holm-adjusted p < {ALPHA:g} over the {len(diff.table)} comparisons. "
        "Tests: wilcoxon / sign (paired Mem, p_z and its bounds), mcnemar (extracted or not), bootstrap "
        "(AUROC, snippets resampled in both runs together)."
    )
    lines += voided_notes(diff)
    if not diff.changed.empty:
        lines += ["", f"Units whose Mem changed most (top {len(diff.changed)})"]
        for row in diff.changed.itertuples(index=False):
            lines.append(
                f"  {row.snippet_id} / {row.method} @ {row.length}: Mem {_num(row.mem_a)} → "
                f"{_num(row.mem_b)} ({_change(row.change)})"
            )
            lines.append(f"    A: {_short(row.output_a)}")
            lines.append(f"    B: {_short(row.output_b)}")
    return "\n".join(lines)


def diff_json(diff: RunDiff) -> dict[str, Any]:
    """The diff as ``docs/schemas/diff-v1.json`` describes it."""
    runs = diff.runs
    return {
        "schema": DIFF_SCHEMA,
        "run_a": runs.run_a,
        "run_b": runs.run_b,
        "victim_a": runs.victim_a,
        "victim_b": runs.victim_b,
        "units": runs.units,
        "only_a": runs.only_a,
        "only_b": runs.only_b,
        "note": runs.note(),
        "alpha": ALPHA,
        "resamples": diff.resamples,
        "seed": diff.seed,
        "voided": voided_notes(diff),
        "figures": json_records(diff.table[DIFF_COLUMNS]),
        "changed": json_records(diff.changed),
    }


def figure_label(figure: str) -> str:
    """A diff figure's name as people read it (``mean_mem`` → ``mean Mem``)."""
    return FIGURE_LABELS.get(figure, figure.replace("_", " "))


def where_label(row: Any) -> str:
    """The method or signal of a diff row, by its label, and the length: ``P-S-Base @ 40``,
    ``Perplexity @ 40``."""
    if row.figure == "auroc":
        spec = SIGNAL_BY_NAME.get(str(row.signal))
        return f"{spec.label if spec is not None else row.signal} @ {row.length}"
    return f"{method_label(str(row.method))} @ {row.length}"


def _voided_by(row: Any) -> str:
    """``A and B: blind baseline …``, ``A: …``, ``A: …; B: …`` or ``–``."""
    a, b = row.voided_a or "", row.voided_b or ""
    if a and a == b:
        return f"A and B: {a}"
    return "; ".join(f"{side}: {why}" for side, why in (("A", a), ("B", b)) if why) or "–"


def diff_shown(diff: RunDiff) -> pd.DataFrame:
    """The diff's figures as people read them, the same on the Runs page and in the HTML diff:
    the columns of :data:`DIFF_SHOWN`, every value text (``–`` for a missing one)."""
    rows = [
        dict(
            zip(
                DIFF_SHOWN,
                (
                    figure_label(str(r.figure)),
                    where_label(r),
                    str(r.n),
                    _num(r.a),
                    _num(r.b),
                    _change(r.change, r.low, r.high),
                    str(r.test),
                    p_text(r.p_holm) + (", significant" if r.significant else ""),
                    _voided_by(r),
                ),
            )
        )
        for r in diff.table.itertuples(index=False)
    ]
    return pd.DataFrame(rows, columns=list(DIFF_SHOWN))


def diff_html(diff: RunDiff) -> str:
    """One self-contained page: the figures table and the changed units side by side, the text
    each output shares with the true suffix highlighted."""
    runs = diff.runs
    title = f"memprobe diff: run {runs.run_b} against run {runs.run_a}"
    shown = diff_shown(diff)
    head = "".join(
        f'<th title="{escape_html(DIFF_SHOWN[c])}">{escape_html(c)}</th>' for c in shown.columns
    )
    body = "".join(
        "<tr{}>{}</tr>".format(_row_class(row), "".join(f"<td>{_escaped(v)}</td>" for v in values))
        for row, values in zip(
            diff.table.itertuples(index=False), shown.itertuples(index=False, name=None)
        )
    )
    voided = "".join(f"<li>{_escaped(line)}</li>" for line in voided_notes(diff))
    voided = f"<ul class=voided>{voided}</ul>" if voided else ""
    units = "".join(_changed_html(row) for row in diff.changed.itertuples(index=False))
    explained = "".join(
        f"<li><b>{escape_html(figure_label(k))}</b>: {escape_html(v)}</li>"
        for k, v in FIGURES.items()
    )
    note = f"<p>{_escaped(runs.note())}</p>" if runs.note() else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{_escaped(title)}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;max-width:80em}}
table{{border-collapse:collapse}} td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:left}}
tr.significant{{background:#fff3cd}} tr.voided td{{color:#777}} .pair{{display:grid;grid-template-columns:1fr 1fr 1fr;gap:1em}}
.pair div{{white-space:pre-wrap;border:1px solid #ddd;padding:.5em}}
</style></head><body>
<h1>{_escaped(title)}</h1>
<p>Run {runs.run_b} ({_escaped(runs.victim_b)}) against run {runs.run_a}
({_escaped(runs.victim_a)}): {runs.units} paired unit(s); change = B − A. Highlighted rows
are significant (Holm-adjusted p &lt; {ALPHA:g}).</p>{note}
<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{voided}
<ul>{explained}</ul>
<h2>Units whose Mem changed most</h2>{units}
</body></html>
"""


def voided_notes(diff: RunDiff) -> list[str]:
    """One line per run and validity control that voids some of the diff's figures: which
    control, in which run's report, and which figures (``[]``: none voided)."""
    lines = []
    for side, run in (("a", diff.runs.run_a), ("b", diff.runs.run_b)):
        column = diff.table[f"voided_{side}"]
        for control in dict.fromkeys(c for c in column if c):
            rows = diff.table[column == control]
            where = ", ".join(_where(r) for r in rows.itertuples(index=False))
            lines.append(
                f"voided {side.upper()}: run {run}'s report voids the AUROC of {where} "
                f"({control}): inconclusive, not evidence either way (docs/method.md §10)"
            )
    return lines


def gate_text(result: GateResult) -> str:
    """One line per check (breaches first, then skipped ones), then the verdict."""
    against = f" against run {result.baseline}" if result.baseline is not None else ""
    lines = [f"gate: run {result.run}{against}, policy {result.policy.source}"]
    if result.note:
        lines.append(f"note: {result.note}")
    for check in sorted(result.checks, key=lambda c: (c.passed, not c.skipped)):
        mark = "FAIL" if not check.passed else "skip" if check.skipped else "ok  "
        lines.append(f"  {mark} {check.message()}")
    breaches = len(result.breaches())
    verdict = "passed" if result.passed else f"failed: {breaches} limit(s) breached"
    skipped = result.skipped()
    if skipped:
        why = [
            "voided by a validity control" if any(c.voided_by for c in skipped) else "",
            "not measured" if any(c.not_measured for c in skipped) else "",
        ]
        verdict += f" ({len(skipped)} skipped: {' or '.join(w for w in why if w)})"
    lines.append(f"{len(result.checks)} check(s), {verdict}")
    return "\n".join(lines)


def _changed_html(row: Any) -> str:
    shown = [
        segments_to_html(overlap(str(output or ""), str(row.suffix or "")).output_segments)
        for output in (row.output_a, row.output_b)
    ]
    suffix = _escaped(row.suffix or "")
    heading = (
        f"{row.snippet_id} / {method_label(str(row.method))} @ {row.length}: Mem "
        f"{_num(row.mem_a)} → {_num(row.mem_b)}"
    )
    return (
        f"<h3>{_escaped(heading)}</h3><div class=pair><div><b>true suffix</b><br>{suffix}</div>"
        f"<div><b>A</b><br>{shown[0]}</div><div><b>B</b><br>{shown[1]}</div></div>"
    )


def _escaped(value: Any) -> str:
    """HTML text of any value: markup escaped, control characters shown (``\\x1b``)."""
    return escape_html(value)


def _voided_sides(row: Any) -> str:
    """``A``, ``B``, ``A, B`` or ``""``: whose report voids this row's figure."""
    return ", ".join(side for side, v in (("A", row.voided_a), ("B", row.voided_b)) if v)


def _row_class(row: Any) -> str:
    classes = [
        c for c, on in (("significant", row.significant), ("voided", _voided_sides(row))) if on
    ]
    return f' class="{" ".join(classes)}"' if classes else ""


def _where(row: Any) -> str:
    return (
        f"{row.signal} @ {row.length}" if row.figure == "auroc" else f"{row.method} @ {row.length}"
    )


def _num(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) and math.isfinite(value) else "–"


def _change(change: float, low: float = math.nan, high: float = math.nan) -> str:
    if not math.isfinite(change):
        return "–"
    text = f"{change:+.3f}"
    if math.isfinite(low) and math.isfinite(high):
        text += f" [{low:+.3f}, {high:+.3f}]"
    return text


def _short(text: Any) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= _SHOWN_OUTPUT_CHARS else flat[: _SHOWN_OUTPUT_CHARS - 1] + "…"
