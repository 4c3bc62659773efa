"""The validity controls travel with the figure: an AUROC the run's report voids (blind baseline,
too few texts) is marked voided in ``diff`` (text, JSON, HTML, CSV) and skipped, or failed, by
``gate`` (text, JSON, JUnit); and a per-signal limit on a signal the run lacks is refused."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from memprobe_core.cli import main
from memprobe_core.membership.blind import random_halves
from memprobe_core.membership.verdict import with_voided_by
from memprobe_core.release.controls import voided_figures
from memprobe_core.release.diff import diff_runs
from memprobe_core.release.policy import PolicyError, read_policy
from memprobe_core.report.build import report_for_run, report_to_dict
from memprobe_core.store import Store
from tests.unit.release.conftest import add_run, texts_by_label
from tests.unit.release.test_diff import BASE, CANDIDATE

ROOT = Path(__file__).resolve().parents[3]
GATE_SCHEMA = json.loads((ROOT / "docs" / "schemas" / "gate-v2.json").read_text())
DIFF_SCHEMA = json.loads((ROOT / "docs" / "schemas" / "diff-v2.json").read_text())
BLIND = "blind baseline separates the sets"
FEW = [u for u in CANDIDATE if u[0][1:] in ("0", "1", "2", "3")]  # 4 members, 4 non-members


def _policy(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _gate(store: Path, *argv: str) -> int:
    return main(["--store", str(store), "gate", *argv, "--resamples", "200"])


def test_the_report_voids_the_auroc_of_a_split_told_apart_without_the_model(store_path) -> None:
    """The premise of every test below: the report's own rule says so, and the release tools
    read it from there (``voided_figures``), not from a rule of their own."""
    told_apart = add_run(store_path, "victim", CANDIDATE, text=texts_by_label)
    fair = add_run(store_path, "victim", CANDIDATE)
    store = Store(store_path)
    report = report_to_dict(report_for_run(store, told_apart, resamples=200))
    assert report["membership_verdict"]["headline"].startswith(
        "inconclusive: the sets differ without the model (blind baseline AUROC 1.00)"
    )
    assert voided_figures(store, told_apart, resamples=200, seed=0) == {("loss", 40): BLIND}
    assert voided_figures(store, fair, resamples=200, seed=0) == {}
    few = add_run(store_path, "victim", FEW)
    assert voided_figures(store, few, resamples=200, seed=0) == {
        ("loss", 40): "too few texts (4 vs 4)"
    }
    rebuilt = report_for_run(store, few, resamples=200)
    table = with_voided_by(rebuilt.membership, rebuilt.blind_baseline, rebuilt.random_split)
    assert set(table["voided_by"]) == {"too few texts (4 vs 4)"}
    # Members whose loss follows the random-split control's own halves (seed 0, the gate's
    # --ci-seed): two halves that should differ by chance only are told apart.
    halves = random_halves([u[0] for u in CANDIDATE if u[1] == "member"], 0)
    rigged = [
        (s, lab, m, e, 1.0 if halves.get(s) else 2.0) if lab == "member" else (s, lab, m, e, x)
        for s, lab, m, e, x in CANDIDATE
    ]
    flagged = add_run(store_path, "victim", rigged)
    assert voided_figures(store, flagged, resamples=200, seed=0) == {
        ("loss", 40): "random-split control flagged"
    }


def test_a_voided_auroc_is_skipped_with_a_note_by_default(store_path, tmp_path, capsys) -> None:
    run = add_run(store_path, "victim", CANDIDATE, text=texts_by_label)
    policy = _policy(tmp_path, "[limits]\nmax_auroc = 0.6\n")
    junit = tmp_path / "gate.xml"
    assert _gate(store_path, str(run), "--policy", str(policy), "--junit", str(junit)) == 0
    out = capsys.readouterr().out
    assert (
        f"  skip limits.max_auroc at loss @ 40: 1 > 0.6; skipped: voided by run {run}'s "
        f"validity control: {BLIND}" in out
    )
    assert "note: 1 check(s) skipped: the report calls their figure inconclusive" in out
    assert '[controls] voided = "fail" fails them instead' in out
    assert "1 check(s), passed (1 skipped: voided by a validity control)" in out
    (suite,) = ET.parse(junit).getroot().findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("1", "0", "1")
    (case,) = suite.findall("testcase")
    skipped = case.find("skipped")
    assert case.find("failure") is None and skipped is not None
    assert f"voided by run {run}'s validity control: {BLIND}" in skipped.get("message")
    assert _gate(store_path, str(run), "--policy", str(policy), "--json") == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, GATE_SCHEMA)
    assert (data["voided"], data["passed"], data["skipped"]) == ("skip", True, 1)
    (check,) = data["checks"]
    assert (
        check["skipped"]
        and check["voided_by"] == f"voided by run {run}'s validity control: {BLIND}"
    )


def test_under_voided_fail_a_voided_auroc_fails_the_gate(store_path, tmp_path, capsys) -> None:
    run = add_run(store_path, "victim", CANDIDATE, text=texts_by_label)
    # A limit the figure keeps (AUROC 1 <= 1): the breach is the control's alone.
    policy = _policy(tmp_path, '[limits]\nmax_auroc = 1\n[controls]\nvoided = "fail"\n')
    junit = tmp_path / "gate.xml"
    assert _gate(store_path, str(run), "--policy", str(policy), "--junit", str(junit)) == 1
    out = capsys.readouterr().out
    assert (
        f'  FAIL limits.max_auroc at loss @ 40: 1 <= 1; failed ([controls] voided = "fail"): '
        f"voided by run {run}'s validity control: {BLIND}" in out
    )
    assert "1 check(s), failed: 1 limit(s) breached" in out
    failure = ET.parse(junit).getroot().find("testsuite/testcase/failure")
    assert failure is not None and failure.get("type") == "VoidedByControl"
    assert BLIND in failure.get("message")
    assert _gate(store_path, str(run), "--policy", str(policy), "--json") == 1
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, GATE_SCHEMA)
    assert (data["voided"], data["passed"], data["skipped"]) == ("fail", False, 0)


def test_too_few_texts_void_the_auroc_as_the_report_does(store_path, tmp_path, capsys) -> None:
    run = add_run(store_path, "victim", FEW)
    policy = _policy(tmp_path, "[limits]\nmax_auroc = 0.6\nmax_mean_mem = 0.9\n")
    assert _gate(store_path, str(run), "--policy", str(policy)) == 0
    out = capsys.readouterr().out
    assert "skip limits.max_auroc at loss @ 40: 1 > 0.6; skipped: voided by run" in out
    assert "validity control: too few texts (4 vs 4)" in out
    assert "ok   limits.max_mean_mem at ps_base @ 40" in out  # Mem has no such control


def test_a_fair_split_is_checked_as_before(store_path, tmp_path, capsys) -> None:
    run = add_run(store_path, "victim", CANDIDATE)
    policy = _policy(tmp_path, "[limits]\nmax_auroc = 0.6\n")
    assert _gate(store_path, str(run), "--policy", str(policy)) == 1
    out = capsys.readouterr().out
    assert "FAIL limits.max_auroc at loss @ 40: 1 > 0.6" in out and "voided" not in out


def test_an_increase_of_a_voided_auroc_is_skipped_naming_each_run(
    store_path, tmp_path, capsys
) -> None:
    base = add_run(store_path, "base", BASE, text=texts_by_label)
    leaky = add_run(store_path, "candidate", CANDIDATE, text=texts_by_label)
    policy = _policy(tmp_path, "[increase]\nauroc = 0.0\nmean_mem = 0.5\n")
    assert _gate(store_path, str(leaky), "--policy", str(policy), "--baseline", str(base)) == 0
    out = capsys.readouterr().out
    assert (
        "skip increase.auroc at loss @ 40: +0.458 [" in out
        and f"voided by run {base}'s validity control: {BLIND}; voided by run {leaky}'s "
        f"validity control: {BLIND}"
        in out
    )
    fair = add_run(store_path, "base, texts that say nothing of the label", BASE)
    assert _gate(store_path, str(leaky), "--policy", str(policy), "--baseline", str(fair)) == 0
    out = capsys.readouterr().out
    assert f"skipped: voided by run {leaky}'s validity control: {BLIND}\n" in out
    assert f"run {fair}'s validity control" not in out
    failing = _policy(tmp_path, '[increase]\nauroc = 0.0\n[controls]\nvoided = "fail"\n', "f.toml")
    assert _gate(store_path, str(leaky), "--policy", str(failing), "--baseline", str(base)) == 1


def test_the_diff_marks_both_voided_figures_in_every_form(store_path, tmp_path, capsys) -> None:
    a = add_run(store_path, "base", BASE, text=texts_by_label)
    b = add_run(store_path, "candidate", CANDIDATE, text=texts_by_label)
    diff = diff_runs(Store(store_path), a, b, resamples=200)
    auroc = diff.table[diff.table["figure"] == "auroc"]
    assert list(auroc["voided_a"]) == [BLIND] and list(auroc["voided_b"]) == [BLIND]
    others = diff.table[diff.table["figure"] != "auroc"]
    assert set(others["voided_a"]) == set(others["voided_b"]) == {""}
    csv, html = tmp_path / "diff.csv", tmp_path / "diff.html"
    args = ["--store", str(store_path), "diff", str(a), str(b), "--resamples", "200"]
    assert main([*args, "--csv", str(csv), "--html", str(html)]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.strip().startswith("auroc    loss @ 40")]
    assert row.rstrip().endswith("A, B")
    for side, run in (("A", a), ("B", b)):
        assert (
            f"voided {side}: run {run}'s report voids the AUROC of loss @ 40 ({BLIND}): "
            "inconclusive, not evidence either way" in out
        )
    header, *rows = csv.read_text().splitlines()
    assert header.split(",")[-2:] == ["voided_a", "voided_b"]
    assert sum(r.endswith(f",{BLIND},{BLIND}") for r in rows) == 1
    page = html.read_text()
    assert '<tr class="significant voided">' in page or '<tr class="voided">' in page
    assert f"run {b}&#39;s report voids the AUROC of loss @ 40 ({BLIND})" in page
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, DIFF_SCHEMA)
    assert len(data["voided"]) == 2
    (voided,) = [r for r in data["figures"] if r["figure"] == "auroc"]
    assert (voided["voided_a"], voided["voided_b"]) == (BLIND, BLIND)


def test_a_diff_of_fair_splits_marks_nothing(store_path, capsys) -> None:
    a = add_run(store_path, "base", BASE)
    b = add_run(store_path, "candidate", CANDIDATE)
    assert main(["--store", str(store_path), "diff", str(a), str(b), "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert "voided" not in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[limits]\nmax_auroc = 0.6\n[controls]\nvoided = "ignore"\n',
            "controls.voided = 'ignore'",
        ),
        ('[limits]\nmax_auroc = 0.6\n[controls]\nvoid = "skip"\n', "unknown key controls.void"),
        ('voided = "skip"\n[limits]\nmax_auroc = 0.6\n', "put it under [controls]"),
        ('[controls]\nvoided = "fail"\n', "sets no limit"),
    ],
)
def test_a_bad_controls_table_is_refused_naming_the_key(tmp_path, text, message) -> None:
    with pytest.raises(PolicyError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_policy(_policy(tmp_path, text))


# --- category 9: a per-signal limit on a signal the run lacks ------------------------------


def test_a_per_signal_limit_on_a_signal_the_run_lacks_exits_2(store_path, tmp_path, capsys):
    run = add_run(store_path, "victim", CANDIDATE)
    both = _policy(tmp_path, "[limits]\nmax_auroc = { loss = 0.99, dc_pdd = 0.5 }\n")
    assert _gate(store_path, str(run), "--policy", str(both)) == 2
    err = capsys.readouterr().err
    assert (
        "limits.max_auroc.dc_pdd applies to nothing: no DC-PDD (dc_pdd) AUROC of labelled "
        "members and non-members to check (the run has: loss); audit with that signal "
        "measured, or drop limits.max_auroc.dc_pdd" in err
    )
    alone = _policy(tmp_path, "[limits]\nmax_auroc = { dc_pdd = 0.5 }\n", "alone.toml")
    assert _gate(store_path, str(run), "--policy", str(alone)) == 2
    assert "limits.max_auroc.dc_pdd applies to nothing" in capsys.readouterr().err
    unlabelled = add_run(store_path, "victim", [(s, None, m, e, x) for s, _, m, e, x in BASE])
    assert _gate(store_path, str(unlabelled), "--policy", str(both)) == 2
    assert "to check (the run has none)" in capsys.readouterr().err
    kept = _policy(tmp_path, "[limits]\nmax_auroc = { loss = 0.99 }\n", "kept.toml")
    assert _gate(store_path, str(run), "--policy", str(kept)) == 1  # AUROC 1 > 0.99


def test_an_increase_limit_the_runs_cannot_check_exits_2(store_path, tmp_path, capsys) -> None:
    base = add_run(store_path, "base", BASE)
    cand = add_run(store_path, "candidate", CANDIDATE)
    per_signal = _policy(tmp_path, "[increase]\nauroc = { loss = 0.1, pac = 0.1 }\n")
    argv = [str(cand), "--baseline", str(base), "--policy"]
    assert _gate(store_path, *argv, str(per_signal)) == 2
    assert (
        f"increase.auroc.pac applies to nothing: no PAC (pac) AUROC of labelled members and "
        f"non-members to check (runs {base} and {cand} both have: loss)" in capsys.readouterr().err
    )
    unlabelled = [(s, None, m, e, x) for s, _, m, e, x in BASE]
    ua, ub = add_run(store_path, "a", unlabelled), add_run(store_path, "b", unlabelled)
    mixed = _policy(tmp_path, "[increase]\nmean_mem = 0.5\nauroc = 0.0\n", "mixed.toml")
    assert _gate(store_path, str(ub), "--baseline", str(ua), "--policy", str(mixed)) == 2
    assert (
        f"increase.auroc applies to nothing: runs {ua} and {ub} share no AUROC of a "
        "membership signal (labelled audits) figure" in capsys.readouterr().err
    )


FAKE_AUDIT = ["audit", "--corpus", "--per-domain", "1", "--lengths", "40", "--methods", "ps_base"]
FAKE_AUDIT += ["--victim", "fake", "--base", "fake", "--nonmembers"]


@pytest.mark.parametrize(
    ("policy", "signal"),
    [
        ("[limits]\nmax_auroc = { loss = 0.99, dc_pdd = 0.5 }\n", "limits.max_auroc.dc_pdd"),
        ("[increase]\nauroc = { samia = 0.1 }\n", "increase.auroc.samia"),
    ],
)
def test_an_audits_per_signal_limit_on_a_signal_it_does_not_measure_is_refused_first(
    tmp_path, capsys, policy, signal
) -> None:
    store = tmp_path / "runs.sqlite"
    base = add_run(store, "base", BASE)
    path = _policy(tmp_path, policy)
    extra = ["--baseline", str(base)] if "increase" in policy else []
    assert main(["--store", str(store), *FAKE_AUDIT, "--policy", str(path), *extra]) == 2
    err = capsys.readouterr().err
    assert (
        f"policy.toml: {signal} limits a signal this audit does not measure (it measures: " in err
    )
    # memprobe's own signals; an installed plugin's would follow them (docs/adding-a-signal.md)
    assert "(it measures: loss, ppl, suffix_loss, zlib, lowercase, min_k, min_k_pp" in err
    assert [r["id"] for r in Store(store).list_runs()] == [base]  # no audit stored


def test_an_auroc_limit_the_loaded_victim_cannot_give_is_refused_before_the_run_is_stored(
    tmp_path, capsys
) -> None:
    # `fake` scores no text: no signal is measured, so a Min-K%++ limit applies to nothing.
    store = tmp_path / "runs.sqlite"
    path = _policy(tmp_path, "[limits]\nmax_auroc = { min_k_pp = 0.99 }\n")
    assert main(["--store", str(store), *FAKE_AUDIT, "--policy", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        "policy.toml: limits.max_auroc.min_k_pp limits a signal this audit does not measure "
        "(the victim cannot score a text: it measures none)" in err
    ), err
    assert not store.exists() or Store(store).list_runs() == []  # no audit stored


def test_min_k_pp_is_not_promised_for_a_victim_a_server_scores(tmp_path) -> None:
    from types import SimpleNamespace

    from memprobe_core.cli import build_parser
    from memprobe_core.cli.release import check_signals_measured
    from memprobe_core.release.gate import GateError

    policy = read_policy(_policy(tmp_path, "[limits]\nmax_auroc = { min_k_pp = 0.99 }\n"))
    args = build_parser().parse_args([*FAKE_AUDIT, "--policy", "policy.toml"])
    check_signals_measured(policy, args)  # by the flags alone, min_k_pp is asked for
    server = SimpleNamespace(white_box=False, scores_text=True, tokenizer=None)
    with pytest.raises(GateError) as refused:
        check_signals_measured(policy, args, server)  # type: ignore[arg-type]
    message = str(refused.value)
    assert (
        "limits.max_auroc.min_k_pp limits a signal this victim cannot give (min_k_pp needs a "
        "victim loaded with its weights, the 'hf' backend; it measures: loss, ppl, "
        "suffix_loss, zlib, lowercase, min_k"
    ) in message  # and then any plugin's signals (docs/adding-a-signal.md)
    assert "min_k_pp," not in message and message.endswith("; load the victim so or drop the limit")


def test_a_baseline_with_no_better_than_blind_scores_does_not_void_an_increase() -> None:
    # The shipped model (baseline) showing no membership signal is the reference an increase is
    # measured from; a control on the sets still voids it. The release demo's canary copy over
    # the base (tests/e2e/test_release_demo.py) was skipped before this rule.
    from memprobe_core.membership.verdict import NO_BETTER_THAN_BLIND
    from memprobe_core.release.gate import _baseline_voids

    assert _baseline_voids(NO_BETTER_THAN_BLIND) == ""
    assert _baseline_voids(f"{NO_BETTER_THAN_BLIND}; too few texts (4 vs 4)") == (
        "too few texts (4 vs 4)"
    )
    assert _baseline_voids("blind baseline separates the sets") == (
        "blind baseline separates the sets"
    )
    assert _baseline_voids("") == ""
