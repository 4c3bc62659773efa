"""``memprobe report RUN --membership-csv / --roc-csv`` on a labelled run, and ``--json``."""

from __future__ import annotations

import json

import pytest

from memprobe_core.attacks.result import AttackResult
from memprobe_core.cli import main
from memprobe_core.report.build import MEMBERSHIP_COLUMNS, ROC_COLUMNS
from memprobe_core.report.export import read_safe_csv
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey

# snippet -> (label, loss): members have the lower loss except m1 against n1.
LOSSES = {
    "m0": ("member", 1.0),
    "m1": ("member", 2.6),
    "n0": ("nonmember", 3.0),
    "n1": ("nonmember", 2.5),
}


@pytest.fixture
def labelled_run(tmp_path):
    path = tmp_path / "runs.sqlite"
    with Store(path) as store:
        run_id = store.create_run(
            "audit",
            snippets=[
                Snippet(s, f"text of {s}", "code", label=lab) for s, (lab, _) in LOSSES.items()
            ],
            units=[UnitKey(s, "ps_base", 4) for s in LOSSES],
        )
        for snippet, (_, loss) in LOSSES.items():
            result = AttackResult(
                method="ps_base",
                snippet_id=snippet,
                domain="code",
                length=4,
                prompt="p",
                output="o",
                mem=0.5,
                lcs_p=0.0,
                objective=0.5,
                alpha=1.0,
                membership={"loss": loss},
            )
            store.finish_unit(run_id, UnitKey(snippet, "ps_base", 4), result)
    return path, run_id


def test_report_writes_the_membership_and_roc_tables_as_csv(labelled_run, tmp_path, capsys):
    path, run_id = labelled_run
    table_csv, roc_csv = tmp_path / "membership.csv", tmp_path / "roc.csv"
    args = ["--store", str(path), "report", str(run_id), "--resamples", "200"]
    code = main([*args, "--membership-csv", str(table_csv), "--roc-csv", str(roc_csv)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Membership (labelled audit)" in captured.out
    assert f"wrote {table_csv}" in captured.err and f"wrote {roc_csv}" in captured.err
    table = read_safe_csv(table_csv, text_columns=["score", "score_label", "kind"])
    assert list(table.columns) == MEMBERSHIP_COLUMNS
    loss = table[table["score"] == "loss"].iloc[0]
    # 1.0 beats both non-members, 2.6 beats 2.5 only (lower loss = member) → 3 / 4.
    assert loss["auroc"] == pytest.approx(0.75)
    assert (loss["n_members"], loss["n_nonmembers"]) == (2, 2)
    roc = read_safe_csv(roc_csv, text_columns=["score", "score_label", "kind"])
    assert list(roc.columns) == ROC_COLUMNS and len(roc) > 2
    # Every Mem is 0.5: P-S-Base cannot separate (AUROC ½), and says so.
    assert table[table["score"] == "ps_base"].iloc[0]["auroc"] == pytest.approx(0.5)

    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["membership"][0]["score"] == "loss" and data["meta"]["nonmembers"] == 2


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_an_output_naming_a_sidecar_file_of_the_store_exits_2(labelled_run, suffix, capsys):
    path, run_id = labelled_run
    sidecar = f"{path}{suffix}"  # SQLite's pending writes or locks: writing it corrupts the store
    assert main(["--store", str(path), "report", str(run_id), "--csv", sidecar]) == 2
    err = capsys.readouterr().err
    assert (
        f"--csv {sidecar} is the SQLite {suffix} file of --store, which this command reads" in err
    )
    assert len(err.splitlines()) == 1
    assert Store(path).get_run(run_id)
