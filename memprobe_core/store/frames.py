"""Run results as pandas frames: one row per finished unit, failed unit or scored candidate.

``memprobe_core.store.Store.results_frame`` and friends call these with rows they read; the
builders take rows, never a store, so the store can import them. ``result_row`` flattens one
finished unit (with the manifest's model and scoring columns) so a report or a CSV export never
has to know the column layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from memprobe_core.attacks.figures import CHANCE_COLUMNS, COMMON_VERBATIM_COLUMNS
from memprobe_core.attacks.figures import UNIT_COLUMNS as _UNIT_COLUMNS
from memprobe_core.attacks.registry import (
    extracts,
    figure_columns,
    figures,
    method_label,
    method_rank,
)
from memprobe_core.chance import chance_rows
from memprobe_core.membership.options import SIGNALS
from memprobe_core.store.records import CandidateRecord, UnitRecord

SIGNAL_COLUMNS: list[str] = [s.column for s in SIGNALS]


def verbatim_columns() -> list[str]:
    """The verbatim columns: the common ones, then every registered method's own figures
    (``MethodSpec.figures``) in report order. Read from the registry on each call, so a method
    registered after import (a test's) has its columns too."""
    return [*COMMON_VERBATIM_COLUMNS, *figure_columns()]


def result_columns() -> list[str]:
    """The results frame's columns: the unit's, the verbatim ones, the membership signals and
    Mem's chance level (memprobe_core.chance; docs/method.md §2)."""
    signals = [s.column for s in SIGNALS]  # read at each call: a signal registered later too
    return [*_UNIT_COLUMNS, *verbatim_columns(), *signals, *CHANCE_COLUMNS]


# The columns as registered when the package is imported (every module of attacks registers on
# import): for code that needs a constant, e.g. a test's empty frame.
VERBATIM_COLUMNS: list[str] = verbatim_columns()
RESULT_COLUMNS: list[str] = result_columns()


# What a results table shows people (the Compare page's table, the Runs page's results): what a
# row is, its scores, the methods' own figures (:func:`shown_columns`), then its costs and PII.
_SHOWN_HEAD: list[str] = [
    "snippet_id",
    "length",
    "method",
    "method_label",
    "status",
    "mem",
    "lcs_p",
    "dis",
    "objective",
    "extractable",
    "span_tokens",
]
SHOWN_COST_COLUMNS: list[str] = [
    "seconds",
    "victim_queries",
    "attacker_queries",
    "generated_tokens",
]
_SHOWN_TAIL: list[str] = [*SHOWN_COST_COLUMNS, "pii_copied", "pii_invented"]


def shown_columns() -> list[str]:
    """The columns of :func:`results_table`: every registered method's own figures among them,
    read from the registry on each call (a method registered after import has its columns)."""
    return [*_SHOWN_HEAD, *figure_columns(), *_SHOWN_TAIL]


def results_table(results: pd.DataFrame) -> pd.DataFrame:
    """The rows of a results frame (:func:`results_frame`) as the pages show them: in report
    order (snippet, length, then the registry's method rank), :func:`shown_columns` only.

    The one table builder of the dashboard: the Compare page shows its comparison with it and
    the Runs page any run, both from the store's frame, so a method's figure shows on both as
    soon as it is in the frame (and so in the CSV and JSON report)."""
    if results.empty:
        return pd.DataFrame(columns=shown_columns())
    order = results["method"].map(method_rank)
    ranked = results.assign(_rank=order).sort_values(
        ["snippet_id", "length", "_rank"], kind="stable"
    )
    table = ranked.reindex(columns=shown_columns()).reset_index(drop=True)
    # A count stays a count where other methods leave it empty (not 13.0 beside a NaN).
    counts = [f.name for f in figures() if f.column and f.kind == "int"]
    return table.astype(dict.fromkeys(counts, "Int64"))


CANDIDATE_COLUMNS: list[str] = [
    "id",
    "run_id",
    "snippet_id",
    "method",
    "length",
    "round",
    "index",
    "prompt",
    "output",
    "mem",
    "lcs_p",
    "objective",
    "flags",
    "is_round_best",
    "created",
]
ERROR_COLUMNS: list[str] = ["snippet_id", "method", "length", "attempts", "error"]


def results_frame(
    units: list[UnitRecord],
    config: dict[str, Any],
    labels: dict[str, str | None] | None = None,
    scored_outputs: Mapping[tuple[str, str, int], str] | None = None,
) -> pd.DataFrame:
    """One row per finished unit of a run: scores, costs, PII counts and manifest columns.

    Args:
        units: ``unit_dict`` rows of the finished units (``Store.units(run_id, status="done")``).
        config: the run's config (model names for results whose manifest lacks them).
        labels: each snippet's member / non-member label (``Snippet.label``), when known.
        scored_outputs: the scored part of a unit's output where it is not the whole output
            (``(snippet_id, method, length)`` → text; the ``last`` output window), for the
            chance level.

    Columns: :func:`result_columns`.
    """
    labels = labels or {}
    # The chance level is computed here, from the stored units, and nowhere else: it is a
    # per-unit figure (one row of the results CSV) that needs the other units of the run, and
    # this is the one place that sees them all. Store → this frame → report, CSV and pages,
    # each reading the columns, so every view shows the same numbers and none re-scores.
    chance = chance_rows(units, config=config, scored_outputs=scored_outputs)
    rows = [
        {
            **result_row(unit["run_id"], unit, config, label=labels.get(unit["snippet_id"])),
            **unit_chance,
        }
        for unit, unit_chance in zip(units, chance)
    ]
    return pd.DataFrame(rows, columns=result_columns())


def errors_frame(units: list[UnitRecord]) -> pd.DataFrame:
    """One row per failed unit (``unit_dict`` rows): snippet_id, method, length, attempts, error."""
    return pd.DataFrame(
        [{k: u.get(k) for k in ERROR_COLUMNS} for u in units], columns=ERROR_COLUMNS
    )


def candidates_frame(candidates: list[CandidateRecord]) -> pd.DataFrame:
    """``candidate_dict`` rows as a frame, in scoring order; flags comma-joined."""
    frame = pd.DataFrame(candidates, columns=CANDIDATE_COLUMNS)
    frame["flags"] = frame["flags"].map(lambda f: ",".join(f) if isinstance(f, list) else f)
    return frame


def _model_name(manifest: dict[str, Any], config: dict[str, Any], role: str) -> str | None:
    """A model's id for a role: the result manifest first, then the run config's model names."""
    models = manifest.get("models")
    if isinstance(models, dict):
        # The result says which models it used; a role it left empty was not used.
        entry = models.get(role)
        if isinstance(entry, dict):
            return str(entry.get("model_id")) if entry.get("model_id") else None
        return str(entry) if entry else None
    named = (config.get("models") or {}).get(role)
    return str(named) if named else None


def pii_counts(pii: dict[str, Any]) -> tuple[int, int, int]:
    """``(in truth, copied, invented)`` item counts from an ``AttackResult.pii`` dict.

    Accepts counts or lists under ``truth``/``copied``/``invented`` (also ``in_truth``,
    ``suffix``), or a ``totals`` sub-dict, so the count survives small changes of the PII
    report's shape.
    """
    totals = pii.get("totals")
    source: dict[str, Any] = totals if isinstance(totals, dict) else pii

    def count(*names: str) -> int:
        for name in names:
            if name in source:
                value = source[name]
                if isinstance(value, (list, tuple, set)):
                    return len(value)
                if isinstance(value, dict):
                    return sum(
                        len(v) if isinstance(v, (list, tuple)) else int(v) for v in value.values()
                    )
                if value is None:
                    return 0
                return int(value)
        return 0

    return (
        count("truth", "in_truth", "suffix", "n_truth"),
        count("copied", "n_copied"),
        count("invented", "n_invented"),
    )


def result_row(
    run_id: int, result: Mapping[str, Any], config: dict[str, Any], *, label: str | None = None
) -> dict[str, Any]:
    """Flatten one finished unit (a ``unit_dict`` or an ``AttackResult`` dict) into a row."""
    costs = result.get("costs") or {}
    manifest = result.get("manifest") or {}
    scoring = manifest.get("scoring") or (config.get("options") or {}).get("scoring") or {}
    truth, copied, invented = pii_counts(result.get("pii") or {})
    seed = manifest.get("seed", (config.get("options") or {}).get("seed"))
    # The signals-only method asks no model for the suffix: its Mem, LCS_P, objective and PII
    # are not 0 but undefined, so they are empty (a CSV mean of its Mem would be a made-up 0).
    scored = extracts(result["method"])

    def extraction(value: Any) -> Any:
        return value if scored else None

    return {
        "run_id": run_id,
        "snippet_id": result["snippet_id"],
        "domain": result.get("domain", "unknown"),
        "method": result["method"],
        "method_label": method_label(result["method"]),
        "length": int(result["length"]),
        "mem": extraction(result.get("mem")),
        "lcs_p": extraction(result.get("lcs_p")),
        "dis": extraction(result.get("dis")),
        "objective": extraction(result.get("objective")),
        "alpha": result.get("alpha"),
        # A unit the user cancelled keeps its partial best, shown only where asked for.
        "status": "cancelled" if result.get("status") == "cancelled" else "finished",
        "prompt": result.get("prompt", ""),
        "output": result.get("output", ""),
        "prefix": (manifest.get("split") or {}).get("prefix"),
        "suffix": (manifest.get("split") or {}).get("suffix"),
        "victim_queries": costs.get("victim_queries", 0),
        "attacker_queries": costs.get("attacker_queries", 0),
        "generated_tokens": costs.get("generated_tokens", 0),
        "seconds": costs.get("wall_seconds", 0.0),
        "pii_truth": extraction(truth),
        "pii_copied": extraction(copied),
        "pii_invented": extraction(invented),
        **{
            role: _model_name(manifest, config, role)
            for role in ("victim", "base", "attacker", "init", "reverse")
        },
        "rouge_variant": scoring.get("variant"),
        "rouge_stemmer": scoring.get("stemmer"),
        "rouge_tokenizer": scoring.get("tokenizer"),
        "output_window": scoring.get("output_window"),
        "seed": seed,
        # Which Mem each selection rule gives (store/schema v3; None for older results).
        "mem_init": extraction(result.get("mem_init")),
        "mem_best": extraction(result.get("mem_best")),
        "mem_reference": extraction(result.get("mem_reference")),
        "selection": manifest.get("selection", "objective"),
        "compat": manifest.get("compat", "paper"),
        "meta_prompts": manifest.get("meta_prompts"),
        "answer_model": manifest.get("answer_model"),
        "generation_budget": (manifest.get("generation") or {}).get("budget_tokens"),
        "label": label,
        # Not measured (older results, black-box victims): None, never a made-up 0.
        **{c: (result.get("verbatim") or {}).get(c) for c in verbatim_columns()},
        **{s.column: (result.get("membership") or {}).get(s.name) for s in SIGNALS},
    }
