"""A schema-1 store with one damaged result: the row is quarantined, the rest upgraded and usable.

Version 1 kept each unit's result as JSON in ``units.result``; the upgrade to version 2 reads it
into columns. A result it cannot read (not UTF-8, not JSON, not an object, keys missing or of the
wrong type, parts the report cannot read, a finished unit without one) used to stop the upgrade
with a traceback or a bare JSON message naming neither the store nor the row, and the store was
unusable. Now the row is kept as it was in table ``quarantine`` with the reason, its unit becomes
a failed unit saying so, a notice names the store and the row, and the other units upgrade.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.result import AttackResult
from memprobe_core.cli import main
from memprobe_core.store import SCHEMA_VERSION, Store, UnitKey
from memprobe_core.store.migrations import MIGRATIONS

GOOD = AttackResult(
    method="ps_inst",
    snippet_id="a",
    domain="legal",
    length=200,
    prompt="best prompt",
    output="best output",
    mem=0.75,
    lcs_p=0.1,
    objective=0.2,
    alpha=0.4,
    dis=0.3,
    pii={"truth": {"email": ["a@b.org"]}},
    costs=Costs(victim_queries=4, attacker_queries=3, generated_tokens=120, wall_seconds=1.5),
    manifest={"models": {"victim": {"model_id": "v-model"}}, "seed": 7},
).to_dict()


def damaged(**changes: object) -> str:
    return json.dumps({**GOOD, **changes})


def without(*keys: str) -> str:
    return json.dumps({k: v for k, v in GOOD.items() if k not in keys})


# How one result is damaged, and a word the reason must contain.
DAMAGE: dict[str, tuple[str | bytes | None, str]] = {
    "invalid JSON": ('{"mem": 0.75, "prompt": ', "not valid JSON"),
    "truncated JSON": (json.dumps(GOOD)[:40], "not valid JSON"),
    "not UTF-8": (b'{"mem": 0.5, "prompt": "\xff\xfe"}', "not UTF-8"),
    "JSON array": ("[1, 2]", "an array instead of a JSON object"),
    "JSON null": ("null", "null instead of a JSON object"),
    "JSON string": ('"done"', "a string instead of a JSON object"),
    "deeply nested": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "mem a string": (damaged(mem="high"), "mem is a string"),
    "mem a boolean": (damaged(mem=True), "mem is a boolean"),
    "mem null": (damaged(mem=None), "mem is null"),
    "prompt a number": (damaged(prompt=5), "prompt is a number"),
    "dis an object": (damaged(dis={"x": 1}), "dis is an object"),
    "costs a string": (damaged(costs="cheap"), "costs is a string"),
    "manifest an array": (damaged(manifest=[1]), "manifest is an array"),
    "pii a number": (damaged(pii=3), "pii is a number"),
    "unknown cost": (damaged(costs={"dollars": 3}), "dollars"),
    "scoring a string": (damaged(manifest={"scoring": "rouge"}), "cannot be read back"),
    "keys missing": (without("mem", "prompt"), "keys missing: prompt, mem"),
    "empty object": ("{}", "keys missing"),
    "SQL NULL": (None, "without a stored result"),
}


def version_1_store(path: Path, bad: str | bytes | None, *, bad_status: str = "done") -> None:
    """A schema-1 store: run 1 (an audit) with units a, b, c; b's result is ``bad``."""
    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0])
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO runs (id, kind, status, created, updated) VALUES (1, 'audit', 'finished', 0, 0)"
    )
    for position, snippet in enumerate("abc"):
        good = json.dumps({**GOOD, "snippet_id": snippet})
        conn.execute(
            "INSERT INTO units (run_id, snippet_id, method, length, position, status, result, "
            "attempts) VALUES (1, ?, 'ps_inst', 200, ?, ?, CAST(? AS TEXT), 1)",
            (
                snippet,
                position,
                bad_status if snippet == "b" else "done",
                bad if snippet == "b" else good,
            ),
        )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_version_1_result_is_quarantined_and_the_rest_upgraded(tmp_path, caplog, damage):
    bad, reason_word = DAMAGE[damage]
    path = tmp_path / "old.sqlite"
    version_1_store(path, bad)
    with caplog.at_level(logging.WARNING, logger="memprobe_core.store.schema"):
        store = Store(path)
    with store:
        assert store.schema_version == SCHEMA_VERSION
        # The notice: the store, the row, why, and that the rest was upgraded.
        (notice,) = store.notices
        assert notice.startswith(f"store {path}: the result of unit (run 1, snippet 'b', ")
        assert "ps_inst, length 200" in notice and reason_word in notice
        assert "table quarantine (id 1)" in notice and "rest of the store was upgraded" in notice
        assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [notice]
        # The row is kept exactly as it was stored, with the reason.
        (kept,) = store._read("SELECT * FROM quarantine")
        assert (kept["source"], kept["run_id"], kept["snippet_id"], kept["method"]) == (
            "units",
            1,
            "b",
            "ps_inst",
        )
        assert (kept["length"], kept["status"], kept["error"]) == (200, "done", None)
        assert kept["result"] == bad and reason_word in kept["reason"]
        assert kept["schema_version"] == 1
        # Its unit is a failed unit that says why; the others are upgraded and read as before.
        (failed,) = store.units(1, status="error")
        assert failed["key"] == UnitKey("b", "ps_inst", 200)
        assert "quarantine (id 1)" in failed["error"] and "--retry-errors" in failed["error"]
        for snippet in "ac":
            back = store.result(1, UnitKey(snippet, "ps_inst", 200))
            assert back is not None
            assert back.to_dict() == {**GOOD, "snippet_id": snippet, "trace": []}
        assert list(store.results_frame(1)["snippet_id"]) == ["a", "c"]
        assert list(store.errors_frame(1)["snippet_id"]) == ["b"]
        assert store.create_run("probe") == 2  # usable for new runs too
    with Store(path) as again:  # told once: the upgrade is done
        assert again.notices == []


@pytest.mark.parametrize("damage", ["invalid JSON", "JSON array", "costs a string", "SQL NULL"])
def test_the_cli_reports_and_lists_a_store_with_a_quarantined_row(tmp_path, capsys, damage):
    path = tmp_path / "old.sqlite"
    version_1_store(path, DAMAGE[damage][0])
    assert main(["--store", str(path), "runs"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert str(path) in err and "snippet 'b'" in err and "quarantine (id 1)" in err
    assert main(["--store", str(path), "report", "1"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "P-S-Inst" in out


def test_a_pending_unit_with_a_damaged_result_stays_pending(tmp_path):
    path = tmp_path / "old.sqlite"
    version_1_store(path, "{oops", bad_status="pending")
    with Store(path) as store:
        (notice,) = store.notices
        assert "snippet 'b'" in notice and "the unit stays pending" in notice
        assert [u["status"] for u in store.units(1)] == ["done", "pending", "done"]
        (kept,) = store._read("SELECT status, result FROM quarantine")
        assert (kept["status"], kept["result"]) == ("pending", "{oops")


def test_several_damaged_rows_are_each_quarantined_and_named(tmp_path):
    path = tmp_path / "old.sqlite"
    version_1_store(path, "[]")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE units SET result = 'nope' WHERE snippet_id = 'c'")
    conn.commit()
    conn.close()
    with Store(path) as store:
        assert [n.split("snippet ")[1][:3] for n in store.notices] == ["'b'", "'c'"]
        assert [r[0] for r in store._read("SELECT snippet_id FROM quarantine ORDER BY id")] == [
            "b",
            "c",
        ]
        assert len(store.results_frame(1)) == 1
