"""The canary demo on the embedded victim (docs/method.md §11), the CLI path an auditor takes:
`memprobe audit --corpus --canaries` fine-tunes a copy of Gemma-3-270M on a random half of a
generated pool, then audits that copy on both halves. Kept small for CI (6 + 6 texts, 6 training
steps): the fine-tuned half must stand out on the loss, the run must record its victim by path,
and a second audit must reuse the built victim instead of training again."""

from __future__ import annotations

import json

import pytest

from memprobe_core.cli import main
from memprobe_core.store import Store


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_fine_tuned_half_stands_out_and_the_victim_is_reused(tmp_path, capsys):
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "audit", "--corpus", "--canaries", "--per-domain", "6"]
    argv += ["--methods", "signals", "--lengths", "64"]
    assert main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    with Store(store) as opened:
        (run,) = opened.list_runs()
        config = opened.get_run(run["id"])["config"]
        labels = [s.label for s in opened.samples(run["id"])]
    path = config["dataset"]["canaries"]["model_path"]
    assert config["models"]["victim"] == config["models"]["base"] == path
    assert labels.count("member") == labels.count("nonmember") == 6

    assert main(["--store", str(store), "report", str(run["id"]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    loss = next(r for r in report["membership"] if r["score"] == "loss")
    assert loss["auroc"] >= 0.9, loss  # 6 training steps on the members, none on the others
    assert report["blind_baseline"]["n_members"] == 6

    assert main([*argv, "--limit", "3"]) == 0  # the same settings: the victim is reused
    assert "fine-tuning the canary victim" not in capsys.readouterr().err
    with Store(store) as opened:
        assert opened.list_runs()[0]["units_total"] == 3  # --limit applies to the canaries
