"""``memprobe gate``: policies read and refused, limits checked, exit codes, JUnit and JSON."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from memprobe_core.cli import main
from memprobe_core.release.gate import run_gate
from memprobe_core.release.junit import GATE_SCHEMA
from memprobe_core.release.policy import PolicyError, read_policy
from memprobe_core.store import Store, UnitKey
from tests.unit.release.conftest import add_run
from tests.unit.release.test_diff import BASE, CANDIDATE

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "docs" / "schemas" / "gate-v2.json").read_text())


def _policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _gate(store: Path, *argv: str) -> int:
    return main(["--store", str(store), "gate", *argv, "--resamples", "200"])


def test_a_policy_reads_every_key(tmp_path) -> None:
    policy = read_policy(
        _policy(
            tmp_path,
            "[limits]\nmax_mean_mem = 0.3\nmax_extraction_rate = 0.1\nmax_pii_copied = 0\n"
            "max_auroc = { loss = 0.6, zlib = 0.65 }\n"
            "[increase]\nmean_mem = 0\nextraction_rate = 0.05\nauroc = 0.02\nalpha = 0.01\n",
        )
    )
    assert (policy.limits.mean_mem, policy.limits.extraction_rate) == (0.3, 0.1)
    assert policy.limits.pii_copied == 0 and policy.limits.auroc_limit("zlib") == 0.65
    assert policy.limits.auroc_limit("min_k") is None
    assert policy.increase.auroc_limit("min_k") == 0.02 and policy.alpha == 0.01


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[limit]\nmax_mean_mem = 0.3\n", r"unknown table \[limit\]"),
        ("[limits]\nmax_mem = 0.3\n", "unknown key limits.max_mem"),
        ("[limits]\nmax_mean_mem = '0.3'\n", "limits.max_mean_mem = '0.3': give the mean Mem"),
        ("[limits]\nmax_mean_mem = 1.5\n", "as a number from 0 to 1"),
        ("[limits]\nmax_mean_mem = true\n", "limits.max_mean_mem = True"),
        ("[limits]\nmax_pii_copied = -1\n", "give a whole number of 0 or more"),
        ("[limits]\nmax_auroc = { lost = 0.6 }\n", "max_auroc.lost: unknown signal"),
        ("[increase]\nmean_mem = 0\nalpha = 1\n", "increase.alpha = 1"),
        ("limits = 3\n", "limits must be a table"),
        ("[limits]\n", "sets no limit"),
        ("[limits\nmax_mean_mem = 0.3\n", "is not valid TOML"),
    ],
)
def test_a_bad_policy_is_refused_naming_the_key(tmp_path, text, message) -> None:
    with pytest.raises(PolicyError, match=message):
        read_policy(_policy(tmp_path, text))


def test_an_unreadable_policy_file_is_refused(tmp_path) -> None:
    with pytest.raises(PolicyError, match="does not exist"):
        read_policy(tmp_path / "nope.toml")
    path = tmp_path / "latin.toml"
    path.write_bytes(b"[limits]\nmax_mean_mem = 0.3 # \xe9\n")
    with pytest.raises(PolicyError, match="is not UTF-8"):
        read_policy(path)


def test_exit_0_when_every_limit_holds_and_1_naming_each_breach(
    store_path, tmp_path, capsys
) -> None:
    run = add_run(store_path, "candidate", CANDIDATE)
    easy = _policy(tmp_path, "[limits]\nmax_mean_mem = 0.9\nmax_pii_copied = 0\n")
    assert _gate(store_path, str(run), "--policy", str(easy)) == 0
    assert "2 check(s), passed" in capsys.readouterr().out
    strict = _policy(tmp_path, "[limits]\nmax_mean_mem = 0.2\nmax_auroc = 0.9\n")
    assert _gate(store_path, str(run), "--policy", str(strict)) == 1
    out = capsys.readouterr().out
    assert "FAIL limits.max_mean_mem at ps_base @ 40: 0.278 [0.2" in out
    assert "FAIL limits.max_auroc at loss @ 40: 1 > 0.9" in out and "failed: 2 limit(s)" in out


def test_an_increase_breaches_only_when_significant(store_path, tmp_path, capsys) -> None:
    base = add_run(store_path, "base", BASE)
    same = add_run(store_path, "base again", BASE)
    leaky = add_run(store_path, "canary copy", CANDIDATE)
    policy = _policy(tmp_path, "[increase]\nmean_mem = 0.0\nextraction_rate = 0.0\nauroc = 0.1\n")
    assert _gate(store_path, str(same), "--policy", str(policy), "--baseline", str(base)) == 0
    capsys.readouterr()
    assert _gate(store_path, str(leaky), "--policy", str(policy), "--baseline", str(base)) == 1
    out = capsys.readouterr().out
    assert "FAIL increase.mean_mem at ps_base @ 40: +0.177 [+0.1" in out and "(p Holm" in out
    assert "FAIL increase.auroc at loss @ 40" in out
    # Two units up by 0.2: an increase above 0, but two pairs cannot show it is not noise.
    noisy = add_run(
        store_path,
        "base, two units luckier",
        [(s, lab, m + 0.2 * (s in ("m0", "n0")), e, loss) for s, lab, m, e, loss in BASE],
    )
    assert _gate(store_path, str(noisy), "--policy", str(policy), "--baseline", str(base)) == 0
    assert "> 0 (p Holm 1, not significant)" in capsys.readouterr().out
    # A bigger allowance than the increase passes, however significant.
    loose = _policy(tmp_path, "[increase]\nmean_mem = 0.5\n")
    assert _gate(store_path, str(leaky), "--policy", str(loose), "--baseline", str(base)) == 0


def test_junit_and_json_are_what_ci_systems_read(store_path, tmp_path, capsys) -> None:
    run = add_run(store_path, "<candidate & co>", CANDIDATE)
    junit = tmp_path / "gate.xml"
    policy = _policy(tmp_path, "[limits]\nmax_mean_mem = 0.2\nmax_pii_copied = 0\n")
    assert (
        _gate(store_path, str(run), "--policy", str(policy), "--junit", str(junit), "--json") == 1
    )
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, SCHEMA)
    assert data["schema"] == GATE_SCHEMA and data["passed"] is False and data["exit_code"] == 1
    root = ET.parse(junit).getroot()
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1") and len(cases) == 2
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("classname") for c in failed] == ["memprobe.limits.max_mean_mem"]
    assert failed[0].find("failure").get("message").startswith("limits.max_mean_mem at ps_base")


@pytest.mark.parametrize(
    ("policy", "extra", "message"),
    [
        ("[increase]\nmean_mem = 0\n", [], "give the run to compare with, --baseline RUN"),
        ("[limits]\nmax_auroc = 0.6\n", [], "max_auroc applies to nothing"),
        ("[limits]\nmax_mean_mem = 0.3\n", ["--baseline", "77"], "is only read by [increase]"),
        ("[increase]\nmean_mem = 0\n", ["--baseline", "77"], "run 77 is not in store"),
        ("[limits]\nmax_mean_mem = 0.3\n", ["--junit", "/nonexistent/dir/gate.xml"], "gate.xml"),
        ("[limits]\nmax_mem = 0.3\n", [], "unknown key limits.max_mem"),
    ],
)
def test_gate_errors_exit_2(store_path, tmp_path, capsys, policy, extra, message) -> None:
    run = add_run(store_path, "unlabelled", [(s, None, m, e, None) for s, _, m, e, _ in BASE])
    code = _gate(store_path, str(run), "--policy", str(_policy(tmp_path, policy)), *extra)
    assert code == 2 and message in capsys.readouterr().err


def test_a_bad_policy_is_refused_before_the_store_is_opened(tmp_path, capsys) -> None:
    store = tmp_path / "missing" / "runs.sqlite"
    policy = _policy(tmp_path, "[limits]\nmax_mem = 0.3\n")
    assert _gate(store, "1", "--policy", str(policy)) == 2
    assert "unknown key" in capsys.readouterr().err and not store.parent.exists()


def test_run_gate_checks_every_place_a_limit_applies(store_path, tmp_path) -> None:
    run = add_run(store_path, "candidate", CANDIDATE, methods=("ps_base", "ps_inst"))
    policy = read_policy(_policy(tmp_path, "[limits]\nmax_extraction_rate = 0.5\n"))
    result = run_gate(Store(store_path), run, policy, resamples=200)
    assert [c.scope for c in result.checks] == ["ps_base @ 40", "ps_inst @ 40"]
    assert all(c.passed for c in result.checks) and result.exit_code == 0


FAKE_AUDIT = ["audit", "--corpus", "--per-domain", "1", "--lengths", "40", "--methods", "ps_base"]
FAKE_AUDIT += ["--victim", "fake", "--base", "fake", "--no-signals"]


def test_an_audit_with_a_policy_gates_its_own_run(tmp_path, capsys) -> None:
    store = tmp_path / "runs.sqlite"
    strict = _policy(tmp_path, "[limits]\nmax_mean_mem = 0.01\n")
    junit = tmp_path / "gate.xml"
    code = main(
        ["--store", str(store), *FAKE_AUDIT, "--policy", str(strict), "--junit", str(junit)]
    )
    out = capsys.readouterr().out
    assert code == 1 and "Table 1" in out and "FAIL limits.max_mean_mem at ps_base @ 40" in out
    assert ET.parse(junit).getroot().find("testsuite").get("name") == "memprobe gate: run 1"
    easy = _policy(tmp_path, "[limits]\nmax_mean_mem = 1\n")
    assert main(["--store", str(store), *FAKE_AUDIT, "--policy", str(easy)]) == 0


@pytest.mark.parametrize(
    ("policy", "extra", "message"),
    [
        ("[limits]\nmax_mem = 1\n", [], "unknown key limits.max_mem"),
        ("[increase]\nmean_mem = 0\n", [], "--baseline RUN"),
        ("[increase]\nmean_mem = 0\n", ["--baseline", "5"], "run 5 is not in store"),
        (None, ["--junit", "gate.xml"], "give --policy FILE too"),
    ],
)
def test_an_audits_gate_is_refused_before_anything_runs(tmp_path, capsys, policy, extra, message):
    store = tmp_path / "runs.sqlite"
    given = ["--policy", str(_policy(tmp_path, policy))] if policy else []
    assert main(["--store", str(store), *FAKE_AUDIT, *given, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not store.exists() or Store(store).list_runs() == []


def test_a_limit_on_a_figure_the_run_lacks_and_an_unknown_run_exit_2(store_path, tmp_path, capsys):
    signals_only = add_run(store_path, "victim", BASE, methods=("signals",))
    policy = _policy(tmp_path, "[limits]\nmax_mean_mem = 0.3\n")
    assert _gate(store_path, str(signals_only), "--policy", str(policy)) == 2
    assert "limits.max_mean_mem applies to nothing" in capsys.readouterr().err
    assert _gate(store_path, "42", "--policy", str(policy)) == 2
    assert "run 42 is not in store" in capsys.readouterr().err


def test_an_unfinished_run_or_one_with_no_finished_unit_is_not_gated(store_path, tmp_path, capsys):
    policy = _policy(tmp_path, "[limits]\nmax_mean_mem = 0.9\n")
    running = add_run(store_path, "victim", BASE, status="interrupted")
    assert _gate(store_path, str(running), "--policy", str(policy)) == 2
    assert f"run {running} is interrupted (24 of 24 units done)" in capsys.readouterr().err
    with Store(store_path) as store:
        run = store.create_run(
            "audit",
            config={"models": {"victim": "v"}},
            snippets=[],
            units=[UnitKey("s", "ps_base", 40)],
        )
        store.fail_unit(run, UnitKey("s", "ps_base", 40), "boom")
        store.set_run_status(run, "finished")
    assert _gate(store_path, str(run), "--policy", str(policy)) == 2
    assert f"run {run} finished no unit (1 failed)" in capsys.readouterr().err


def test_pii_limit_on_a_run_that_scored_no_output_exits_2(store_path, tmp_path, capsys) -> None:
    run = add_run(store_path, "victim", BASE, methods=("signals",))
    assert (
        _gate(
            store_path,
            str(run),
            "--policy",
            str(_policy(tmp_path, "[limits]\nmax_pii_copied = 0\n")),
        )
        == 2
    )
    assert "limits.max_pii_copied applies to nothing" in capsys.readouterr().err


def test_whole_thresholds_read_as_whole_numbers_and_a_bom_is_skipped(store_path, tmp_path, capsys):
    run = add_run(store_path, "victim", CANDIDATE)
    policy = tmp_path / "bom.toml"
    policy.write_bytes(b"\xef\xbb\xbf[limits]\nmax_pii_copied = 1234\n")
    assert _gate(store_path, str(run), "--policy", str(policy)) == 0
    assert "limits.max_pii_copied at run: 0 <= 1234" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[limits]\nmax_mean_mem = 0.3\nmax_auroc = {}\n", "max_auroc = {} limits nothing"),
        ("max_mean_mem = 0.3\n", "key max_mean_mem is outside a table"),
    ],
)
def test_policies_that_limit_nothing_or_misplace_a_key_are_refused(tmp_path, text, message):
    with pytest.raises(PolicyError, match=message):
        read_policy(_policy(tmp_path, text))


def test_outputs_that_would_overwrite_what_the_command_reads_exit_2(store_path, tmp_path, capsys):
    run = add_run(store_path, "victim", BASE)
    policy = _policy(tmp_path, "[limits]\nmax_mean_mem = 0.9\n")
    assert _gate(store_path, str(run), "--policy", str(policy), "--junit", str(policy)) == 2
    assert "is --policy, which this command reads" in capsys.readouterr().err
    assert _gate(store_path, str(run), "--policy", str(policy), "--junit", str(store_path)) == 2
    assert "is --store, which this command reads" in capsys.readouterr().err
    assert read_policy(policy).limits.mean_mem == 0.9 and Store(store_path).get_run(run)


def test_control_characters_in_names_keep_the_junit_file_valid(store_path, tmp_path) -> None:
    run = add_run(store_path, "victim", CANDIDATE)
    policy = tmp_path / '\x1b[31m<x>&"\x01.toml'
    policy.write_text("[limits]\nmax_mean_mem = 0.2\n", encoding="utf-8")
    junit = tmp_path / "gate.xml"
    assert _gate(store_path, str(run), "--policy", str(policy), "--junit", str(junit)) == 1
    prop = ET.parse(junit).getroot().find("testsuite/properties/property")
    assert prop is not None and prop.get("value") == '\\x1b[31m<x>&"\\x01.toml'


def test_an_audits_gate_that_its_settings_cannot_check_is_refused_first(tmp_path, capsys) -> None:
    store = tmp_path / "runs.sqlite"
    auroc = _policy(tmp_path, "[limits]\nmax_auroc = 0.6\n")
    with_signals = [a for a in FAKE_AUDIT if a != "--no-signals"]
    assert main(["--store", str(store), *with_signals, "--policy", str(auroc)]) == 2
    assert "built-in corpus is labelled with --nonmembers" in capsys.readouterr().err
    labelled = [*FAKE_AUDIT, "--nonmembers", "--policy", str(auroc)]
    assert main(["--store", str(store), *labelled]) == 2
    assert "which --no-signals turns off" in capsys.readouterr().err
    mem = _policy(tmp_path, "[limits]\nmax_mean_mem = 0.6\n")
    signals = [a if a != "ps_base" else "signals" for a in FAKE_AUDIT]
    assert main(["--store", str(store), *signals, "--policy", str(mem)]) == 2
    assert (
        "limits mean Mem, which none of the methods (signals) measures" in capsys.readouterr().err
    )
    assert not store.exists() or Store(store).list_runs() == []


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_junit_file_naming_a_sidecar_of_an_sqlite_input_exits_2(
    store_path, tmp_path, suffix, capsys
):
    run = add_run(store_path, "victim", BASE)
    policy = _policy(tmp_path, "[limits]\nmax_mean_mem = 0.9\n")
    junit = f"{store_path}{suffix}"
    assert _gate(store_path, str(run), "--policy", str(policy), "--junit", junit) == 2
    assert f"--junit {junit} is the SQLite {suffix} file of --store" in capsys.readouterr().err
    # Any input that is an SQLite file, not the store alone (a store given as the policy).
    other = tmp_path / "other.sqlite"
    add_run(other, "victim", BASE)
    junit = f"{other}{suffix}"
    assert _gate(store_path, str(run), "--policy", str(other), "--junit", junit) == 2
    assert f"--junit {junit} is the SQLite {suffix} file of --policy" in capsys.readouterr().err


def test_a_policy_number_longer_than_python_reads_exits_2_naming_file_and_key(
    store_path, tmp_path, capsys
):
    run = add_run(store_path, "victim", BASE)
    policy = _policy(tmp_path, "[limits]\nmax_pii_copied = " + "9" * 5000 + "\n")
    assert _gate(store_path, str(run), "--policy", str(policy)) == 2
    err = capsys.readouterr().err
    assert f"policy file {policy.name!r} line 2: max_pii_copied = a number of 5,000 digits" in err
    assert "set_int_max_str_digits" not in err and len(err.splitlines()) == 1
