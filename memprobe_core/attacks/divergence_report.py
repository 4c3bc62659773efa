"""What the divergence method shows in reports: its per-unit figures, its totals per method and
length (a report table of its own), and the one line on a result (docs/method.md §16).

Kept beside :mod:`memprobe_core.attacks.divergence`, which registers them with its
``MethodSpec``; the report and the pages render them without naming the method.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from memprobe_core.attacks.figures import Figure, MethodTable, TableColumn
from memprobe_core.attacks.registry import method_label, method_rank
from memprobe_core.records import JsonValue

# The figures a divergence unit records (``divergence._record``), as the results frame shows
# them; ``divergence_docs`` stays in the stored result only (the totals count the snippets from
# the matches, over the whole audit).
FIGURES: tuple[Figure, ...] = (
    Figure("divergence_spans", "divergence spans", "int", "distinct verbatim spans found"),
    Figure("divergence_own_spans", "spans in own snippet", "int", "of them, in the unit's snippet"),
    Figure("divergence_longest", "longest span (tokens)", "int", "tokens of the longest span"),
    Figure("divergence_docs", "snippets given back", "int", "snippets with a span", column=False),
    Figure("divergence_tokens", "span tokens", "int", "tokens the spans cover"),
    Figure("divergence_min_tokens", "min span tokens", "int", "the shortest span counted"),
    Figure("divergence_samples", "samples", "int", "sampled answers"),
    Figure("divergence_generated_tokens", "sampled tokens", "int", "tokens sampled"),
    Figure(
        "divergence_matches",
        "spans (snippet, start, tokens)",
        "json",
        "the distinct spans, [[snippet, start, tokens], …]",
    ),
)

TOTALS_COLUMNS = [
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


def _totals_row(method: str, length: Any, group: pd.DataFrame) -> dict[str, Any]:
    spans = _numbers(group, "divergence_spans")
    distinct = _distinct_matches(group)
    min_tokens = _numbers(group, "divergence_min_tokens").dropna().unique()
    return {
        "method": method,
        "method_label": method_label(method),
        "length": int(length),
        "units": len(group),
        "samples": int(_numbers(group, "divergence_samples").fillna(0).sum()),
        "generated_tokens": int(_numbers(group, "divergence_generated_tokens").fillna(0).sum()),
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


def divergence_totals(results: pd.DataFrame) -> pd.DataFrame:
    """The divergence attack's totals per method and length (:data:`TOTALS_COLUMNS`): its
    units, samples and generated tokens; the verbatim spans of at least ``min_tokens`` tokens
    found in them (in any snippet of the audited set or the reference corpus, and in the unit's
    own snippet), the distinct ones over the whole audit and the snippets they are in, the
    tokens they cover, the longest, and how many units found one."""
    if results.empty or "divergence_spans" not in results:
        return pd.DataFrame(columns=TOTALS_COLUMNS)
    rows = results[pd.to_numeric(results["divergence_spans"], errors="coerce").notna()]
    out = [
        _totals_row(method, length, group)
        for (method, length), group in rows.groupby(["method", "length"])
    ]
    frame = pd.DataFrame(out, columns=TOTALS_COLUMNS)
    order = frame["method"].map(method_rank)
    return frame.assign(_o=order).sort_values(["_o", "length"]).drop(columns="_o")


TOTALS_TABLE = MethodTable(
    title="Divergence",
    text_title="Divergence: verbatim spans (≥ min tokens) of the audited set in the samples "
    "(own: in the unit's snippet)",
    notes=(
        "Divergence attack (Nasr et al. 2023): verbatim spans of at least 'min tokens' tokens "
        "of the audited snippets (and any reference corpus) found in the victim's samples of "
        "repeat-a-word prompts; 'in own snippet': in the snippet of the unit that sampled them.",
    ),
    columns=(
        TableColumn("method_label", "Method", "Method"),
        TableColumn("length", "Length", "Length"),
        TableColumn("units", "units", "units"),
        TableColumn("samples", "samples", "samples"),
        TableColumn("generated_tokens", "tokens", "generated tokens"),
        TableColumn("spans", "spans", "spans"),
        TableColumn("distinct_spans", "distinct", "distinct spans"),
        TableColumn("snippets_given_back", "snippets", "snippets given back", missing="–"),
        TableColumn("own_spans", "own", "in own snippet"),
        TableColumn("matched_tokens", "matched", "matched tokens"),
        TableColumn("longest", "longest", "longest"),
        TableColumn("units_with_span", "units w/ span", "units with a span"),
        TableColumn("min_tokens", "min", "min tokens"),
    ),
    frame_columns=tuple(TOTALS_COLUMNS),
    build=divergence_totals,
)


def describe_divergence(verbatim: Mapping[str, JsonValue]) -> str | None:
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
