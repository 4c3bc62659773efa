"""Report figures of the leakage measures beyond one greedy answer (docs/method.md §14–§16):
probabilistic extraction's medians and the adversarial compression ratio in Table 1's cells, and
the divergence attack's totals per method and length.

Each reads the verbatim columns a result row carries (``memprobe_core.store.frames``); a frame
from a run that measured none of them gives NaN (Table 1) or no rows (totals), and the text and
HTML reports then leave the columns or the section out.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from memprobe_core.attacks.registry import method_label, method_rank
from memprobe_core.membership.extraction_probability import describe_extraction_probability

DIVERGENCE_COLUMNS = [
    "method",
    "method_label",
    "length",
    "units",
    "samples",
    "generated_tokens",
    "spans",
    "distinct_spans",
    "snippets_given_back",
    "own_spans",
    "matched_tokens",
    "longest",
    "units_with_span",
    "min_tokens",
]


def _numbers(group: pd.DataFrame, column: str) -> pd.Series:
    if column not in group:  # a frame from before the column existed
        return pd.Series([math.nan] * len(group), index=group.index, dtype=float)
    return pd.to_numeric(group[column], errors="coerce")


def pz_figures(group: pd.DataFrame) -> dict[str, float]:
    """Probabilistic extraction of a Table 1 cell: the median log10 p_z and log10 n_at_p over
    the units whose p_z > 0, and the share of measured units whose p_z = 0 (a suffix token the
    scheme cannot draw); NaN where none was measured."""
    log10_p_z = _numbers(group, "log10_p_z")
    zero = _numbers(group, "pz_outside_support") > 0
    measured = log10_p_z.notna() | zero
    positive = log10_p_z.notna()
    log10_n = _numbers(group, "log10_n_at_p")[positive]
    return {
        "log10_p_z": float(log10_p_z[positive].median()) if positive.any() else math.nan,
        "pz_zero": float(zero[measured].mean()) if measured.any() else math.nan,
        "log10_n_at_p": float(log10_n.median()) if log10_n.notna().any() else math.nan,
    }


def acr_figures(group: pd.DataFrame) -> dict[str, float]:
    """The adversarial compression ratio of a Table 1 cell: the median ACR over the units where
    a prompt was found, and the share of ``acr`` units that are memorized (ACR > 1)."""
    memorized = group["acr_memorized"] if "acr_memorized" in group else pd.Series(dtype=object)
    measured = memorized.notna()
    acr = _numbers(group, "acr").dropna()
    return {
        "acr": float(acr.median()) if len(acr) else math.nan,
        "acr_memorized": float(memorized[measured].astype(bool).mean())
        if measured.any()
        else math.nan,
    }


def _distinct_matches(group: pd.DataFrame) -> set[tuple[str, int, int]] | None:
    """The distinct ``(doc, doc_start, tokens)`` spans the group's units found: two units whose
    samples gave back the same passage count it once (``None``: not recorded, older rows)."""
    if "divergence_matches" not in group:
        return None
    found: set[tuple[str, int, int]] = set()
    for matches in group["divergence_matches"]:
        if isinstance(matches, (list, tuple)):
            found.update((str(doc), int(start), int(tokens)) for doc, start, tokens in matches)
    return found


def divergence_totals(results: pd.DataFrame) -> pd.DataFrame:
    """The divergence attack's totals per method and length (:data:`DIVERGENCE_COLUMNS`): its
    units, samples and generated tokens; the verbatim spans of at least ``min_tokens`` tokens
    found in them (in any snippet of the audited set or the reference corpus, and in the unit's
    own snippet), the distinct ones over the whole audit and the snippets they are in, the
    tokens they cover, the longest, and how many units found one."""
    if results.empty or "divergence_spans" not in results:
        return pd.DataFrame(columns=DIVERGENCE_COLUMNS)
    rows = results[pd.to_numeric(results["divergence_spans"], errors="coerce").notna()]
    out = []
    for (method, length), group in rows.groupby(["method", "length"]):
        spans = _numbers(group, "divergence_spans")
        distinct = _distinct_matches(group)
        min_tokens = _numbers(group, "divergence_min_tokens").dropna().unique()
        out.append(
            {
                "method": method,
                "method_label": method_label(method),
                "length": int(length),
                "units": len(group),
                "samples": int(_numbers(group, "divergence_samples").fillna(0).sum()),
                "generated_tokens": int(
                    _numbers(group, "divergence_generated_tokens").fillna(0).sum()
                ),
                "spans": int(spans.sum()),
                "distinct_spans": len(distinct) if distinct is not None else int(spans.sum()),
                "snippets_given_back": len({doc for doc, _, _ in distinct})
                if distinct is not None
                else None,
                "own_spans": int(_numbers(group, "divergence_own_spans").fillna(0).sum()),
                "matched_tokens": int(_numbers(group, "divergence_tokens").fillna(0).sum()),
                "longest": int(_numbers(group, "divergence_longest").fillna(0).max()),
                "units_with_span": int((spans > 0).sum()),
                "min_tokens": ", ".join(str(int(v)) for v in sorted(min_tokens)) or "–",
            }
        )
    frame = pd.DataFrame(out, columns=DIVERGENCE_COLUMNS)
    order = frame["method"].map(method_rank)
    return frame.assign(_o=order).sort_values(["_o", "length"]).drop(columns="_o")


def describe_acr(verbatim: dict[str, Any]) -> str | None:
    """One line on an ``acr`` result (``None`` for other results)."""
    if "acr_memorized" not in verbatim:
        return None
    target = verbatim.get("acr_target_tokens")
    if verbatim.get("acr") is None:
        bound = verbatim.get("acr_bound")
        below = f": ACR < {bound:.2f}" if isinstance(bound, (int, float)) else ""
        return (
            f"Adversarial compression: no prompt reproduced the {target}-token target within "
            f"the search budget{below}; not memorized."
        )
    verdict = "memorized (ACR > 1)" if verbatim.get("acr_memorized") else "not memorized"
    return (
        f"Adversarial compression: a {verbatim.get('acr_prompt_tokens')}-token prompt reproduces "
        f"the {target}-token target exactly: ACR {verbatim['acr']:.2f}, {verdict}."
    )


def describe_divergence(verbatim: dict[str, Any]) -> str | None:
    """One line on a ``divergence`` result (``None`` for other results)."""
    if "divergence_spans" not in verbatim:
        return None
    spans = verbatim.get("divergence_spans") or 0
    where = (
        f"; longest {verbatim.get('divergence_longest')} tokens, "
        f"{verbatim.get('divergence_own_spans')} in this snippet"
        if spans
        else ""
    )
    return (
        f"Divergence: {spans} verbatim span(s) of at least {verbatim.get('divergence_min_tokens')} "
        f"tokens of the audited text in {verbatim.get('divergence_samples')} samples "
        f"({verbatim.get('divergence_generated_tokens')} tokens){where}."
    )


def describe_lines_of_method(verbatim: dict[str, Any] | None) -> list[str]:
    """Plain-text lines on what a method measured itself (ACR, divergence spans)."""
    verbatim = verbatim or {}
    lines = [describe_acr(verbatim), describe_divergence(verbatim)]
    return [line for line in lines if line]


def describe(verbatim: dict[str, Any] | None) -> list[str]:
    """Plain-text lines on a result's leakage measures beyond its greedy answer (the CLI)."""
    verbatim = verbatim or {}
    lines = describe_lines_of_method(verbatim)
    if "pz_scheme" in verbatim:
        lines.append(describe_extraction_probability(verbatim))
    return lines
