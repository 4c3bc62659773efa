"""A real ``memprobe probe --pam`` on the tiny Llama flows into ``memprobe report``: the stored
unit's verdict is counted in Table 1 (text, ``--json``, ``--table-csv``), said in words in the
text report and the HTML report's prompt-and-output block, and kept in ``--csv``
(docs/method.md §24)."""

from __future__ import annotations

import json

from memprobe_core.cli import main
from memprobe_core.measuring.prior_aware import PAM_VERDICTS, short_verdict
from memprobe_core.report.export import read_safe_csv
from tests.unit.cli.tiny_victim import TEXT


def test_a_probes_prior_aware_check_reaches_every_form_of_its_report(
    tmp_path, tiny_models, capsys
) -> None:
    store = ["--store", str(tmp_path / "runs.sqlite")]
    probe = [
        "probe",
        TEXT,
        "--method",
        "ps_base",
        "--length",
        "40",
        "--victim",
        "tiny",
        "--base",
        "tiny",
    ]
    assert main([*store, *probe, "--pam", "--pam-prefixes", "7", "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)["verbatim"]["pam_verdict"]
    assert verdict in PAM_VERDICTS

    assert main([*store, "report", "1", "--json"]) == 0
    (cell,) = json.loads(capsys.readouterr().out)["table1"]
    assert cell["pam_units"] == 1 and cell["pam_unmeasured_units"] == 0
    counted = {k: cell[k] for k in ("pam_memorised", "pam_common", "pam_not_memorised")}
    assert sum(counted.values()) == 1

    html, units, t1 = tmp_path / "r.html", tmp_path / "units.csv", tmp_path / "t1.csv"
    args = ["--html", str(html), "--csv", str(units), "--table-csv", str(t1)]
    assert main([*store, "report", "1", *args]) == 0
    text = capsys.readouterr().out
    assert f"1 {short_verdict(verdict)} / 1" in text
    assert f"P-S-Base @ 40: Prior-aware check: {verdict}." in text
    assert f"prior-aware check: {verdict}" in html.read_text(encoding="utf-8")
    assert read_safe_csv(units)["pam_verdict"].tolist() == [verdict]
    assert read_safe_csv(t1)["pam_units"].tolist() == [1]
