"""The gate's per-unit bounds: ``[limits] min_bits`` and ``max_near_verbatim_p`` (docs/ci.md),
with ``[controls] unmeasured`` for units that did not measure them."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from memprobe_core.cli import main
from memprobe_core.release.gate import run_gate
from memprobe_core.release.policy import VOIDED_FAIL, PolicyError, read_policy
from memprobe_core.store import Store
from tests.unit.release.conftest import add_run
from tests.unit.release.test_diff import BASE
from tests.unit.release.test_gate import FAKE_AUDIT

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "docs" / "schemas" / "gate-v2.json").read_text())


def _policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _gate(store: Path, *argv: str) -> int:
    return main(["--store", str(store), "gate", *argv, "--resamples", "200"])


def bounds(snippet: str) -> dict[str, object]:
    """Every unit measured: m3 is the least protected (8 bits, a near-verbatim bound of 10^-3);
    the others 30 bits and 10^-9; n0's bound certified nothing (stored null: 0)."""
    weak = snippet == "m3"
    return {
        "pz_scheme": "plain",
        "log10_p_z": -12.0,
        "extraction_bits": 8.0 if weak else 30.0,
        "extraction_window_tokens": 20,
        "near_verbatim_log10_lower": -3.0 if weak else (None if snippet == "n0" else -9.0),
        "near_verbatim_edits": 5,
    }


def some_unmeasured(snippet: str) -> dict[str, object]:
    """As :func:`bounds`, but n1 and n2 (a black-box victim's units) measured neither bound."""
    if snippet in ("n1", "n2"):
        return {
            "pz_scheme": "plain",
            "log10_p_z": -12.0,
            "extraction_bits": None,
            "extraction_not_measured": "the victim's server returns no ranks",
            "near_verbatim_log10_lower": None,
            "near_verbatim_not_measured": "a black-box victim",
        }
    return bounds(snippet)


def test_a_policy_reads_the_bound_limits_and_the_unmeasured_control(tmp_path) -> None:
    policy = read_policy(
        _policy(
            tmp_path,
            "[limits]\nmin_bits = 12.5\nmax_near_verbatim_p = 1e-6\n"
            '[controls]\nunmeasured = "fail"\n',
        )
    )
    assert (policy.limits.bits, policy.limits.near_verbatim_p) == (12.5, 1e-6)
    assert policy.unmeasured == VOIDED_FAIL
    assert read_policy(_policy(tmp_path, "[limits]\nmin_bits = 0\n")).unmeasured == "skip"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[limits]\nmin_bits = -1\n", "limits.min_bits = -1: give the fewest bits"),
        ("[limits]\nmin_bits = 'many'\n", "limits.min_bits = 'many': give the fewest bits"),
        ("[limits]\nmin_bits = true\n", "limits.min_bits = True"),
        ("[limits]\nmin_bits = inf\n", "limits.min_bits = inf"),
        ("[limits]\nmax_near_verbatim_p = 2\n", "give the near-verbatim probability"),
        ("[limits]\nmax_near_verbatim_p = -1e-6\n", "as a number from 0 to 1"),
        ("[increase]\nmin_bits = 3\n", "unknown key increase.min_bits"),
        ('[limits]\nmin_bits = 3\n[controls]\nunmeasured = "ignore"\n', "controls.unmeasured"),
    ],
)
def test_a_bad_bound_limit_is_refused_naming_the_key(tmp_path, text, message) -> None:
    with pytest.raises(PolicyError, match=message):
        read_policy(_policy(tmp_path, text))


def test_a_bad_bound_limit_exits_2(store_path, tmp_path, capsys) -> None:
    run = add_run(store_path, "v", BASE, verbatim=bounds)
    assert (
        _gate(store_path, str(run), "--policy", str(_policy(tmp_path, "[limits]\nmin_bits = -3\n")))
        == 2
    )
    assert "limits.min_bits = -3" in capsys.readouterr().err


def test_every_measured_unit_passes_or_the_least_protected_is_named(store_path, tmp_path, capsys):
    run = add_run(store_path, "v", BASE, verbatim=bounds, methods=("ps_base", "ps_inst"))
    easy = _policy(tmp_path, "[limits]\nmin_bits = 8\nmax_near_verbatim_p = 1e-3\n")
    assert _gate(store_path, str(run), "--policy", str(easy)) == 0
    out = capsys.readouterr().out
    assert "ok   limits.min_bits at ps_base @ 40: 8 >= 8 (least protected unit: m3)" in out
    assert "limits.max_near_verbatim_p at ps_inst @ 40: 0.001 <= 0.001" in out
    assert "4 check(s), passed" in out
    strict = _policy(tmp_path, "[limits]\nmin_bits = 8.5\nmax_near_verbatim_p = 1e-4\n")
    assert _gate(store_path, str(run), "--policy", str(strict)) == 1
    out = capsys.readouterr().out
    assert "FAIL limits.min_bits at ps_base @ 40: 8 < 8.5 (least protected unit: m3)" in out
    assert "FAIL limits.max_near_verbatim_p at ps_base @ 40: 0.001 > 0.0001" in out
    assert "failed: 4 limit(s) breached" in out


def test_one_weak_unit_breaches_however_strong_the_rest(store_path, tmp_path) -> None:
    """A per-unit floor, not a cell's mean: 23 units at 30 bits do not cover one at 8."""
    run = add_run(store_path, "v", BASE, verbatim=bounds)
    policy = read_policy(_policy(tmp_path, "[limits]\nmin_bits = 20\n"))
    (check,) = run_gate(Store(store_path), run, policy, resamples=200).checks
    assert (check.value, check.passed, check.floor) == (8.0, False, True)


def test_units_that_did_not_measure_a_bound_are_said_not_silently_passed(
    store_path, tmp_path, capsys
) -> None:
    run = add_run(store_path, "v", BASE, verbatim=some_unmeasured)
    policy = _policy(tmp_path, "[limits]\nmin_bits = 5\nmax_near_verbatim_p = 0.01\n")
    assert _gate(store_path, str(run), "--policy", str(policy)) == 0
    out = capsys.readouterr().out
    assert (
        "skip limits.min_bits at ps_base @ 40: not measured on 2 of 24 unit(s) (the victim's "
        "server returns no ranks); skipped" in out
    )
    assert (
        "skip limits.max_near_verbatim_p at ps_base @ 40: not measured on 2 of 24 unit(s) (a "
        "black-box victim); skipped" in out
    )
    assert "4 check(s), passed (2 skipped: not measured)" in out
    assert '[controls] unmeasured = "fail" fails them instead' in out
    failing = _policy(
        tmp_path,
        '[limits]\nmin_bits = 5\nmax_near_verbatim_p = 0.01\n[controls]\nunmeasured = "fail"\n',
    )
    assert _gate(store_path, str(run), "--policy", str(failing)) == 1
    out = capsys.readouterr().out
    assert "FAIL limits.min_bits at ps_base @ 40: not measured on 2 of 24 unit(s)" in out
    assert 'failed ([controls] unmeasured = "fail")' in out


def test_a_bound_no_unit_measured_applies_to_nothing(store_path, tmp_path, capsys) -> None:
    run = add_run(store_path, "v", BASE)  # no p_z, no bounds: a run from before them
    for text, key in (
        ("[limits]\nmin_bits = 5\n", "limits.min_bits"),
        ("[limits]\nmax_near_verbatim_p = 0.1\n", "limits.max_near_verbatim_p"),
    ):
        assert _gate(store_path, str(run), "--policy", str(_policy(tmp_path, text))) == 2
        assert f"{key} applies to nothing: no unit of the run has" in capsys.readouterr().err


def test_infinite_bits_and_a_null_lower_bound_are_measured(store_path, tmp_path) -> None:
    """extraction_bits null beside its window is b = ∞; a null lower bound beside its edit
    budget certified nothing (0); neither is "not measured"."""
    run = add_run(
        store_path,
        "v",
        BASE[:2],
        verbatim=lambda s: {
            "extraction_bits": None,
            "extraction_window_tokens": 10,
            "near_verbatim_log10_lower": None,
            "near_verbatim_edits": 2,
        },
    )
    policy = read_policy(_policy(tmp_path, "[limits]\nmin_bits = 64\nmax_near_verbatim_p = 0\n"))
    checks = run_gate(Store(store_path), run, policy, resamples=200).checks
    assert [(c.value, c.passed, c.not_measured) for c in checks] == [
        (math.inf, True, ""),
        (0.0, True, ""),
    ]
    assert checks[0].message().startswith("limits.min_bits at ps_base @ 40: ∞ >= 64")


def test_junit_and_json_carry_the_bound_checks(store_path, tmp_path, capsys) -> None:
    run = add_run(store_path, "v", BASE, verbatim=some_unmeasured)
    junit = tmp_path / "gate.xml"
    policy = _policy(tmp_path, "[limits]\nmin_bits = 20\nmax_near_verbatim_p = 0.01\n")
    code = _gate(store_path, str(run), "--policy", str(policy), "--junit", str(junit), "--json")
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, SCHEMA)
    assert data["skipped"] == 2 and data["passed"] is False
    cases = ET.parse(junit).getroot().findall("testsuite/testcase")
    by_class: dict[str, list[ET.Element]] = {}
    for case in cases:
        by_class.setdefault(case.get("classname", ""), []).append(case)
    assert sorted(by_class) == ["memprobe.limits.max_near_verbatim_p", "memprobe.limits.min_bits"]
    bits = by_class["memprobe.limits.min_bits"]
    failure = next(c.find("failure") for c in bits if c.find("failure") is not None)
    assert failure.get("type") == "LimitBreached" and "least protected unit: m3" in failure.text
    skipped = [c.find("skipped") for c in cases if c.find("skipped") is not None]
    assert len(skipped) == 2 and all("not measured on 2 of 24" in s.get("message") for s in skipped)
    # Under "fail" the unmeasured units are failures of their own kind.
    failing = _policy(tmp_path, '[limits]\nmin_bits = 5\n[controls]\nunmeasured = "fail"\n')
    assert _gate(store_path, str(run), "--policy", str(failing), "--junit", str(junit)) == 1
    kinds = [f.get("type") for f in ET.parse(junit).getroot().iter("failure")]
    assert kinds == ["NotMeasured"]


def test_an_audit_that_turns_p_z_off_cannot_gate_a_bound(tmp_path, capsys) -> None:
    store = tmp_path / "runs.sqlite"
    policy = _policy(tmp_path, "[limits]\nmin_bits = 20\nmax_near_verbatim_p = 0.01\n")
    assert main(["--store", str(store), *FAKE_AUDIT, "--no-pz", "--policy", str(policy)]) == 2
    assert (
        "limits min_bits and max_near_verbatim_p, measured beside p_z, which --no-pz turns off"
        in capsys.readouterr().err
    )
    assert not store.exists() or Store(store).list_runs() == []


def test_bits_just_under_the_limit_do_not_read_as_the_limit(store_path, tmp_path) -> None:
    run = add_run(
        store_path, "v", BASE[:2], verbatim=lambda s: {**bounds(s), "extraction_bits": 74.99}
    )
    policy = read_policy(_policy(tmp_path, "[limits]\nmin_bits = 75\n"))
    (check,) = run_gate(Store(store_path), run, policy, resamples=200).checks
    assert not check.passed and check.message().startswith(
        "limits.min_bits at ps_base @ 40: 74.9 < 75"
    )
