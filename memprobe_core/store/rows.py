"""Rows to records and back: JSON columns, run / unit / candidate records, results as columns.

What the store writes for an ``AttackResult`` (:func:`result_columns`, the trace being
``candidates`` rows), how it reads a row back as a record (:func:`run_dict`, :func:`unit_dict`,
:func:`candidate_dict`) and a record as the ``AttackResult`` or ``Candidate`` it stored
(:func:`result_from_row`, :func:`candidate_from_row`).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, fields
from typing import Any, cast

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.store.columns import JSON_RESULT_COLUMNS, RESULT_COLUMNS_SQL
from memprobe_core.store.records import (
    CandidateRecord,
    RunRecord,
    UnitKey,
    UnitRecord,
)


def dumps(value: Any) -> str:
    """JSON text of a config, manifest or result (non-ASCII kept, unknown objects as ``str``).

    A lone surrogate (a file name byte that is not UTF-8, ``\\xfc.jsonl`` read as ``"\\udcfc"``)
    cannot be stored as UTF-8 text: such a value is written with ``\\u`` escapes, which read
    back as the same string.
    """
    text = json.dumps(value, ensure_ascii=False, default=str)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(value, ensure_ascii=True, default=str)
    return text


def loads(text: str | None, default: Any = None) -> Any:
    """The value of a JSON column, or ``default`` when the column is NULL."""
    return default if text is None else json.loads(text)


# --- row conversion -------------------------------------------------------------------------------
RUN_LIST_SQL = (
    "SELECT r.*, COUNT(u.snippet_id) AS units_total, "
    "COALESCE(SUM(u.status = 'done'), 0) AS units_done, "
    "COALESCE(SUM(u.status = 'error'), 0) AS units_error, "
    "COALESCE(SUM(u.status = 'running'), 0) AS units_running, "
    "COALESCE(SUM(u.status = 'pending'), 0) AS units_pending "
    "FROM runs r LEFT JOIN units u ON u.run_id = r.id"
)


def key_params(unit: UnitKey) -> tuple[str, str, int]:
    """``(snippet_id, method, length)``: a unit's key as SQL parameters."""
    return (unit.snippet_id, unit.method, int(unit.length))


def run_dict(row: sqlite3.Row) -> RunRecord:
    """A ``runs`` row (with unit counts) as a record, config and manifest decoded."""
    data = dict(row)
    data["config"] = loads(data.get("config"), {})
    data["manifest"] = loads(data.get("manifest"), {})
    return cast(RunRecord, data)


def unit_dict(row: sqlite3.Row) -> UnitRecord:
    """A ``units`` row as a record with its ``UnitKey`` under ``key`` and JSON columns decoded."""
    data = dict(row)
    data["key"] = UnitKey(data["snippet_id"], data["method"], int(data["length"]))
    for column in JSON_RESULT_COLUMNS:
        data[column] = loads(data.get(column), {})
    return cast(UnitRecord, data)


def candidate_dict(row: sqlite3.Row) -> CandidateRecord:
    """A ``candidates`` row as a record (``idx`` renamed ``index``, JSON columns decoded)."""
    data = dict(row)
    data["index"] = data.pop("idx")
    data["flags"] = loads(data.get("flags"), [])
    data["extra"] = loads(data.get("extra"), {})
    data["is_round_best"] = bool(data["is_round_best"])
    return cast(CandidateRecord, data)


def result_columns(result: AttackResult) -> dict[str, Any]:
    """An ``AttackResult``'s values for the ``units`` result columns (the trace is not one)."""
    data = {
        "domain": result.domain,
        "prompt": result.prompt,
        "output": result.output,
        "mem": result.mem,
        "lcs_p": result.lcs_p,
        "objective": result.objective,
        "dis": result.dis,
        "alpha": result.alpha,
        "pii": result.pii,
        "costs": asdict(result.costs),
        "manifest": result.manifest,
        "mem_init": result.mem_init,
        "mem_best": result.mem_best,
        "mem_reference": result.mem_reference,
        "verbatim": result.verbatim,
        "membership": result.membership,
    }
    return {c: dumps(data[c]) if c in JSON_RESULT_COLUMNS else data[c] for c in RESULT_COLUMNS_SQL}


def candidate_from_row(row: CandidateRecord) -> Candidate:
    """A ``candidate_dict`` back as the ``Candidate`` the method scored."""
    values = cast(dict[str, Any], row)
    return Candidate(**{f.name: values[f.name] for f in fields(Candidate)})


def _score(unit: UnitRecord, column: str) -> float:
    """A score column of an ended unit, as stored. A row migrated from an old schema may hold
    ``None`` where its version did not store the value; it is passed on as it is (the report
    leaves such cells empty), not made up."""
    return cast(float, cast(dict[str, Any], unit)[column])


def result_from_row(unit: UnitRecord, trace: list[Candidate]) -> AttackResult:
    """A ``unit_dict`` of a finished or cancelled unit and its candidates as an ``AttackResult``."""
    return AttackResult(
        method=unit["method"],
        snippet_id=unit["snippet_id"],
        domain=unit["domain"] or "unknown",
        length=int(unit["length"]),
        prompt=unit["prompt"] or "",
        output=unit["output"] or "",
        mem=_score(unit, "mem"),
        lcs_p=_score(unit, "lcs_p"),
        objective=_score(unit, "objective"),
        alpha=_score(unit, "alpha"),
        dis=unit["dis"],
        trace=trace,
        pii=unit["pii"],
        costs=Costs(**unit["costs"]),
        manifest=unit["manifest"],
        status="cancelled" if unit["status"] == "cancelled" else "finished",
        mem_init=unit.get("mem_init"),
        mem_best=unit.get("mem_best"),
        mem_reference=unit.get("mem_reference"),
        verbatim=unit.get("verbatim") or {},
        membership=unit.get("membership") or {},
    )
