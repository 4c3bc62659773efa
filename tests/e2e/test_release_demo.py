"""The release demo on the embedded models (docs/ci.md): the canary-fine-tuned copy of Gemma
against the base model on the same canary texts, then the base against itself.

`memprobe audit --corpus --canaries` fine-tunes the copy on a random half of a generated pool and
audits it (12 + 12 texts, fine-tuned once and cached);
the same texts, exported with their ids and labels, are audited on the base model twice. The diff
must show the copy leaking more, significantly; the base against itself must show no significant
change; the gate must exit 1 and 0 on them, and its JUnit file must parse.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from memprobe_core.cli import main
from memprobe_core.store import Store

pytestmark = pytest.mark.slow
AUDIT = ["--methods", "signals", "verbatim", "--lengths", "64"]


@pytest.mark.timeout(2400)
def test_the_canary_copy_leaks_more_than_the_base_and_the_base_matches_itself(tmp_path, capsys):
    store = tmp_path / "runs.sqlite"
    cli = ["--store", str(store)]
    # 12 + 12 texts: with 6 + 6 the Holm-corrected AUROC changes were significant on one
    # machine's generated pool and not on another's (p Holm 0.016 vs 0.10-0.13).
    assert main([*cli, "audit", "--corpus", "--canaries", "--per-domain", "12", *AUDIT]) == 0
    with Store(store) as opened:
        texts = opened.samples(1)
    dataset = tmp_path / "canaries.jsonl"
    dataset.write_text(
        "".join(
            json.dumps({"id": s.id, "text": s.text, "domain": s.domain, "label": s.label}) + "\n"
            for s in texts
        ),
        encoding="utf-8",
    )
    on_base = [str(dataset), "--id-column", "id", "--domain-column", "domain"]
    on_base += ["--victim", "gemma-3-270m", "--base", "gemma-3-270m", *AUDIT]
    assert main([*cli, "audit", *on_base]) == 0  # run 2
    assert main([*cli, "audit", *on_base]) == 0  # run 3: the same audit again
    capsys.readouterr()

    assert main([*cli, "diff", "2", "1", "--json", "--resamples", "2000"]) == 0
    leak = json.loads(capsys.readouterr().out)
    assert leak["units"] == 48 and leak["only_a"] == leak["only_b"] == 0
    aurocs = {r["signal"]: r for r in leak["figures"] if r["figure"] == "auroc"}
    assert all(r["b"] >= r["a"] for r in aurocs.values()), aurocs
    assert any(r["significant"] and r["change"] > 0 for r in aurocs.values()), aurocs
    assert main([*cli, "diff", "2", "3", "--json", "--resamples", "2000"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert not any(r["significant"] for r in same["figures"]), same["figures"]

    # The pool is generated on each machine from its own non-member seed, and its halves are a
    # seeded random split: on some machines' pools the blind baseline (no model) tells the 12 + 12
    # texts apart by chance, and the report then voids the AUROCs of every run on them. The gate
    # skips voided checks by default (exit 0, each shown with its figure and a note) and fails
    # them under [controls] voided = "fail".
    voided = any(r["voided_a"] or r["voided_b"] for r in aurocs.values())
    policy = tmp_path / "policy.toml"
    limits = "[increase]\nauroc = 0.0\nextraction_rate = 0.0\n"
    policy.write_text(limits, encoding="utf-8")
    junit = tmp_path / "gate.xml"

    def gate(run: int, *extra: str) -> int:
        return main([*cli, "gate", str(run), "--policy", str(policy), "--baseline", "2", *extra])

    if voided:
        assert gate(1) == 0
        out = capsys.readouterr().out
        assert "skipped: voided by run 2's validity control" in out
        # The copy's increase is still shown above the limit, and the base's against itself not.
        assert re.search(r"skip increase\.auroc at \w+ @ 64: \+0\.\d+ \[.*\] > 0", out), out
        assert gate(3) == 0
        assert re.search(r"increase\.auroc at \w+ @ 64: \+0\.000 <= 0", capsys.readouterr().out)
        policy.write_text(limits + '[controls]\nvoided = "fail"\n', encoding="utf-8")
    assert gate(1, "--junit", str(junit)) == 1
    assert "FAIL increase.auroc at " in capsys.readouterr().out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures", "0")) >= 1
    if not voided:
        assert gate(3) == 0
