"""The upgrade to schema version 2: each unit's result JSON becomes columns of ``units``.

Reads every result schema 1 stored, checks it can be read (and read back by the store and the
report) and writes it as the result columns; a result it cannot read is quarantined
(:mod:`.quarantine`) and its finished unit becomes a failed one. Released: never edit what it
does.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, cast

from memprobe_core.store.columns import (
    JSON_RESULT_COLUMNS,
    RESULT_COLUMNS_SQL,
    V3_COLUMNS,
    V4_COLUMNS,
)
from memprobe_core.store.frames import result_row
from memprobe_core.store.quarantine import quarantine
from memprobe_core.store.records import UnitRecord
from memprobe_core.store.rows import dumps, loads, result_from_row


def v2_result_columns(conn: sqlite3.Connection) -> None:
    """Version 2: the result JSON of each unit becomes columns; the JSON column is dropped.

    A result that cannot be read (not UTF-8, not JSON, not an object, keys missing or of the
    wrong type, or one the reader would fail on), or a finished unit without one, is kept as it
    was in table ``quarantine`` with the reason (:func:`quarantine`); its unit gets no result
    columns, and a finished or cancelled one becomes a failed unit saying so. The other rows are
    upgraded as before.
    """
    # Version 2's columns only: a released migration must keep doing what it did.
    later = V3_COLUMNS + V4_COLUMNS
    columns = {c: t for c, t in RESULT_COLUMNS_SQL.items() if c not in later}
    for column, sql_type in columns.items():
        conn.execute(f"ALTER TABLE units ADD COLUMN {column} {sql_type}")
    rows = conn.execute(
        "SELECT rowid, run_id, snippet_id, method, length, status, error, typeof(result), "
        "CAST(result AS BLOB) FROM units "
        "WHERE result IS NOT NULL OR status IN ('done', 'cancelled')"
    ).fetchall()
    sets = ", ".join(f"{c} = ?" for c in columns)
    for rowid, run_id, snippet_id, method, length, status, error, kind, raw in rows:
        key = {"run_id": run_id, "snippet_id": snippet_id, "method": method, "length": length}
        try:
            values = _v1_result_columns(raw, key, status, columns)
        except ValueError as unreadable:
            entry = quarantine(
                conn,
                key,
                status=status,
                error=error,
                result=_stored_value(kind, raw),
                reason=str(unreadable),
                schema_version=1,
            )
            if status in ("done", "cancelled"):
                conn.execute(
                    "UPDATE units SET status = 'error', error = ? WHERE rowid = ?",
                    (
                        f"its result, stored by schema 1, could not be read when the store was "
                        f"upgraded ({unreadable}); the original is kept in table quarantine "
                        f"(id {entry}); `memprobe resume {run_id} --retry-errors` measures an "
                        "audit's unit again",
                        rowid,
                    ),
                )
            continue
        conn.execute(f"UPDATE units SET {sets} WHERE rowid = ?", (*values, rowid))
    conn.execute("ALTER TABLE units DROP COLUMN result")


# Keys every schema-1 result has (``AttackResult.to_dict`` of a finished or cancelled unit), by
# the JSON types they may hold; ``dis`` and the JSON parts may be null.
_V1_TEXT_KEYS = ("domain", "prompt", "output")
_V1_NUMBER_KEYS = ("mem", "lcs_p", "objective", "alpha")
_V1_OBJECT_KEYS = ("pii", "costs", "manifest")


def _v1_result_columns(
    raw: bytes | None, key: dict[str, Any], status: str, columns: dict[str, str]
) -> list[Any]:
    """The version-2 column values of a schema-1 result (``raw``: the stored bytes).

    Raises:
        ValueError: the result cannot be read; the message says why.
    """
    if raw is None:
        raise ValueError(f"a {status} unit without a stored result")
    try:
        result = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc
    if not isinstance(result, dict):
        raise ValueError(f"{_json_type(result)} instead of a JSON object")
    missing = [k for k in (*_V1_TEXT_KEYS, *_V1_NUMBER_KEYS) if k not in result]
    if missing:
        raise ValueError(f"keys missing: {', '.join(missing)}")
    wrong = [
        f"{k} is {_json_type(result[k])}" for k in _V1_TEXT_KEYS if not isinstance(result[k], str)
    ]
    wrong += [
        f"{k} is {_json_type(result[k])}" for k in _V1_NUMBER_KEYS if not _is_number(result[k])
    ]
    if result.get("dis") is not None and not _is_number(result["dis"]):
        wrong.append(f"dis is {_json_type(result['dis'])}")
    wrong += [
        f"{k} is {_json_type(result[k])}"
        for k in _V1_OBJECT_KEYS
        if result.get(k) is not None and not isinstance(result[k], dict)
    ]
    if wrong:
        raise ValueError(f"wrong types: {'; '.join(wrong)}")
    values = {
        c: dumps(result.get(c) or {}) if c in JSON_RESULT_COLUMNS else result.get(c)
        for c in columns
    }
    # What the store will read back (a result, a report row) must be readable too.
    record = cast(
        UnitRecord,
        {
            **key,
            "status": status,
            **{c: loads(v, {}) if c in JSON_RESULT_COLUMNS else v for c, v in values.items()},
        },
    )
    try:
        result_from_row(record, [])
        result_row(int(key["run_id"]), record, {})
    except Exception as exc:  # any failure of the readers: the row is what cannot be read
        raise ValueError(f"cannot be read back: {type(exc).__name__}: {exc}") from exc
    return list(values.values())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _stored_value(kind: str, raw: bytes | None) -> str | bytes | None:
    """A column's value as it was stored: its text, or its bytes when they are not UTF-8."""
    if raw is None or kind == "blob":
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
