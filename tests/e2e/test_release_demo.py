"""The release demo on the embedded models (docs/ci.md): the canary-fine-tuned copy of Gemma
against the base model on the same canary texts, then the base against itself.

`memprobe audit --corpus --canaries` fine-tunes the copy on a random half of a generated pool and
audits it (12 + 12 texts, fine-tuned once and cached);
the same texts, exported with their ids and labels, are audited on the base model twice. The diff
must show the copy leaking more, significantly; the base against itself must show no significant
change; the gate must exit 1 and 0 on them, and its JUnit file must parse.

The extraction-risk bracket and the prior-aware check on the same runs (docs/method.md §21, §22,
§24): every trained canary costs the copy far fewer bits than the base model, its near-verbatim
lower bound rises, the prior-aware check calls the canaries memorised on the copy and nothing
memorised on the base; a gate with `[limits] min_bits` fails the copy and passes the base.
"""

from __future__ import annotations

import json
import re
import statistics
import xml.etree.ElementTree as ET
from collections import Counter

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
    canaries = ["--corpus", "--canaries", "--per-domain", "12"]
    assert main([*cli, "audit", *canaries, *AUDIT, "--pam"]) == 0
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
    assert main([*cli, "audit", *on_base, "--pam"]) == 0  # run 2
    # Run 3, the same audit again (its bracket's lower side is left out: no test reads it).
    assert main([*cli, "audit", *on_base, "--no-near-verbatim"]) == 0
    capsys.readouterr()
    check_the_bracket_and_the_prior_aware_check(store, tmp_path, capsys)

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


def _figures(store, run_id: int) -> dict[str, dict]:
    """snippet id -> its verbatim unit's label, b, near-verbatim bound and prior-aware verdict."""
    with Store(store) as opened:
        frame = opened.results_frame(run_id)
    rows = frame[frame["method"] == "verbatim"].to_dict("records")
    return {r["snippet_id"]: r for r in rows}


def _log10(row: dict, column: str) -> float:
    """A log10 probability of the row; -inf for a probability of 0 (stored as missing)."""
    value = row.get(column)
    return float("-inf") if value is None or value != value else float(value)


def _lower(row: dict) -> float:
    return _log10(row, "near_verbatim_log10_lower")


def check_the_bracket_and_the_prior_aware_check(store, tmp_path, capsys) -> None:
    """Measured on two machines' pools (docs/benchmarks.md, "Canary demo with the bracket"): the
    trained canaries cost the copy 5-29 bits and the base 138-231; on the 12 + 12 copy 7 of 12
    canaries and 2 of 12 held-out texts came out memorised, nothing on the base."""
    copy, base = _figures(store, 1), _figures(store, 2)
    members = [k for k, r in copy.items() if r["label"] == "member"]
    held_out = [k for k, r in copy.items() if r["label"] == "nonmember"]
    assert len(members) == len(held_out) == 12
    for snippet_id in members:
        assert copy[snippet_id]["extraction_bits"] < base[snippet_id]["extraction_bits"]
        assert _lower(copy[snippet_id]) >= _lower(base[snippet_id])
        assert _lower(copy[snippet_id]) >= _log10(copy[snippet_id], "log10_p_z")  # never below
    median = statistics.median
    assert median(copy[k]["extraction_bits"] for k in members) < median(
        copy[k]["extraction_bits"] for k in held_out
    )
    assert median(_lower(copy[k]) for k in members) > median(_lower(base[k]) for k in members)
    verdicts = {
        (model, label): Counter(r["pam_verdict"] for r in runs.values() if r["label"] == label)
        for model, runs in (("copy", copy), ("base", base))
        for label in ("member", "nonmember")
    }
    # The copy also learns the generator's style, so a held-out text can come out memorised
    # too (2 of 12 on one machine's pool, 7 of 12 canaries): the canaries must lead, and the
    # base must call nothing memorised.
    copy_members = verdicts["copy", "member"]["memorised"]
    assert copy_members > verdicts["copy", "nonmember"]["memorised"], verdicts
    assert copy_members >= 3, verdicts
    assert verdicts["base", "member"]["memorised"] == 0, verdicts
    assert verdicts["base", "nonmember"]["memorised"] == 0, verdicts

    # The gate limits the least protected unit's b: the copy fails, the base passes.
    policy = tmp_path / "bits.toml"
    policy.write_text("[limits]\nmin_bits = 40\n", encoding="utf-8")
    cli = ["--store", str(store), "gate"]
    assert main([*cli, "1", "--policy", str(policy)]) == 1
    assert "FAIL limits.min_bits at verbatim @ 64" in capsys.readouterr().out
    assert main([*cli, "2", "--policy", str(policy)]) == 0
    assert "limits.min_bits at verbatim @ 64" in capsys.readouterr().out
