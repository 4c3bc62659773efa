"""A labelled audit on the embedded victim: demo members against generated non-members.

The CLI path an auditor takes (`memprobe audit --corpus --nonmembers`, then `memprobe report`),
on the real embedded Gemma victim, kept small for CI: 3 members and 3 non-members of the legal
domain, P-S-Base at length 60, one of each put in front of the others for ReCaLL
(``--recall-shots 1``). It checks that every unit carries its signals and verbatim metrics and
that the report's membership table has a row per signal and per method with AUROC in [0, 1],
on the 2 + 2 texts left after the prefixes; the README's AUROC table comes from a larger run.
"""

from __future__ import annotations

import json

import pytest

from memprobe_core.cli import main
from memprobe_core.membership import SIGNALS
from memprobe_core.store import Store


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_labelled_audit_reports_auroc_per_signal_and_method(tmp_path, capsys):
    store = tmp_path / "runs.sqlite"
    args = ["--store", str(store), "audit", "--corpus", "--nonmembers", "--domains", "legal"]
    args += ["--per-domain", "3", "--lengths", "60", "--methods", "ps_base", "--seed", "0"]
    args += ["--recall-shots", "1"]
    # Nothing below reads the near-verbatim bound, a beam search per snippet (~10-15 s on a CPU);
    # its own tests are test_near_verbatim_embedded.py and the unit tests.
    args += ["--no-near-verbatim"]
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    run = Store(store).list_runs()[0]
    assert (run["status"], run["units_done"]) == ("finished", 6)
    results = Store(store).results_frame(run["id"])
    assert sorted(results["label"]) == ["member"] * 3 + ["nonmember"] * 3
    prefixes = Store(store).get_run(run["id"])["config"]["options"]["measure"]["recall_prefix_ids"]
    assert len(prefixes) == 2
    evaluated = results[~results["snippet_id"].isin(prefixes)]
    measured = [
        s.column for s in SIGNALS if not (s.needs_reference or s.needs_samples or s.needs_option)
    ]
    assert evaluated[measured].notna().all().all(), evaluated[measured]
    assert results.loc[results["snippet_id"].isin(prefixes), "signal_recall"].isna().all()
    assert results["extractable"].notna().all()

    assert main(["--store", str(store), "report", str(run["id"]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {row["score"]: row for row in report["membership"]}
    scored = {
        s.name for s in SIGNALS if not (s.needs_reference or s.needs_samples or s.needs_option)
    }
    assert set(rows) == scored | {"ps_base"}
    assert all(0.0 <= row["auroc"] <= 1.0 for row in rows.values())
    assert all((row["n_members"], row["n_nonmembers"]) == (2, 2) for row in rows.values())
