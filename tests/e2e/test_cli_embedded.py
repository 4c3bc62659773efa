"""`memprobe audit` then `memprobe report` on the built-in corpus with the real embedded models.

Kept small for CI (2 snippets, length 100, 1 round × 4 candidates; length 200 took twice as
long); the README's example report comes from a full-size run of the same command (length 200,
rounds 3, n 24).
"""

from __future__ import annotations

import json

import pytest

from memprobe_core.cli import main
from memprobe_core.store import Store


@pytest.mark.slow
# A few minutes on an idle 2-core machine; the cap leaves room for a busy one.
@pytest.mark.timeout(2400)
def test_audit_and_report_on_embedded_models(tmp_path, capsys):
    store = tmp_path / "runs.sqlite"
    code = main(
        [
            "--store",
            str(store),
            "audit",
            "--corpus",
            "--domains",
            "legal",
            "--limit",
            "2",
            "--lengths",
            "100",
            "--methods",
            "ps_base",
            "ps_inst",
            "interactive",
            "--rounds",
            "1",
            "--n",
            "4",
            "--title",
            "CI embedded audit",
            # Nothing below reads the near-verbatim bound, a beam search per snippet (~10-15 s on
            # a CPU); its own tests are test_near_verbatim_embedded.py and the unit tests.
            "--no-near-verbatim",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    run = Store(store).list_runs()[0]
    assert (run["status"], run["units_done"], run["units_total"]) == ("finished", 6, 6)

    assert (
        main(
            [
                "--store",
                str(store),
                "report",
                str(run["id"]),
                "--csv",
                str(tmp_path / "results.csv"),
            ]
        )
        == 0
    )
    report_text = capsys.readouterr().out
    with capsys.disabled():
        print("\n" + report_text)
    assert "Table 1" in report_text and "Ours (interactive)" in report_text
    assert "Paired improvement" in report_text

    assert main(["--store", str(store), "report", str(run["id"]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {r["method"]: r for r in report["table1"] if r["domain"] == "legal"}
    assert set(rows) == {"ps_base", "ps_inst", "interactive"}
    for row in rows.values():
        assert row["n"] == 2 and 0.0 <= row["mem"] <= 1.0
    assert rows["ps_base"]["mem"] > 0.0, rows["ps_base"]  # the base model continues licences
    assert report["meta"]["victim"] == "gemma-3-270m"
    # Every role's dtype: resolved when the run was created, in its config, each loaded model's
    # in the manifest, both in the report; auto keeps the measured victim float32 on a CPU.
    recorded = Store(store).get_run(run["id"])
    dtypes = recorded["config"]["models"]["dtypes"]
    assert dtypes["victim"] == "float32"
    loaded = recorded["manifest"]["models"]
    assert loaded["victim"]["dtype"] == dtypes["victim"]
    assert loaded["attacker"]["dtype"] == dtypes["attacker"]
    for role in ("victim", "attacker"):
        assert f"{role} {dtypes[role]}" in report["meta"]["dtypes"]
    costs = {r["method"]: r for r in report["costs"]}
    assert (
        costs["interactive"]["attacker_queries"] > 0 and costs["ps_base"]["attacker_queries"] == 0
    )
