"""A gate's checks as JUnit XML and as versioned JSON, the two forms CI systems read.

JUnit: one ``<testsuite>`` per gate run, one ``<testcase>`` per check (its ``classname`` the
policy key, its ``name`` the place), a ``<failure>`` with the check's message for a breach, a
``<skipped>`` naming the validity control for a check whose figure the run's report voids, or the
units whose bound was not measured — the form GitLab, Jenkins and GitHub's test reporters
display. JSON: ``docs/schemas/gate-v2.json``.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from memprobe_core.highlight import show_controls
from memprobe_core.release.gate import Check, GateResult
from memprobe_core.report.export import write_output

GATE_SCHEMA = "memprobe-gate/2"


def junit_xml(result: GateResult) -> str:
    """The gate's checks as a JUnit XML document (UTF-8, with its declaration)."""
    name = f"memprobe gate: run {result.run}" + (
        f" against run {result.baseline}" if result.baseline is not None else ""
    )
    failures, skipped = len(result.breaches()), len(result.skipped())
    suites = ET.Element("testsuites", name="memprobe", tests=str(len(result.checks)))
    suites.set("failures", str(failures))
    suites.set("skipped", str(skipped))
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=name,
        tests=str(len(result.checks)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    properties = ET.SubElement(suite, "properties")
    for key, value in (("policy", result.policy.source), ("note", result.note)):
        if value:
            ET.SubElement(properties, "property", name=key, value=_xml_text(value))
    for check in result.checks:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"memprobe.{check.limit}",
            name=_xml_text(check.scope),
            time="0",
        )
        message = _xml_text(check.message())
        if check.skipped:
            ET.SubElement(case, "skipped", message=message).text = message
        elif not check.passed:
            kind = (
                "VoidedByControl"
                if check.voided_by
                else "NotMeasured"
                if check.not_measured
                else "LimitBreached"
            )
            failure = ET.SubElement(case, "failure", message=message, type=kind)
            failure.text = message
    ET.indent(suites)
    # ElementTree escapes text and attributes (names and messages may hold any snippet id).
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _xml_text(text: str) -> str:
    """``text`` with every control character shown as a visible escape (``\\x1b``): XML 1.0
    cannot hold most of them, and a file name or snippet id may carry any."""
    return show_controls(text, multiline=False)


def write_junit(result: GateResult, path: str | Path) -> Path:
    """Write :func:`junit_xml` to ``path`` (ExportError for a folder that cannot be written)."""
    return write_output(junit_xml(result).encode("utf-8"), path, "JUnit XML")


def gate_json(result: GateResult) -> dict[str, Any]:
    """The gate's result as ``docs/schemas/gate-v2.json`` describes it."""
    return {
        "schema": GATE_SCHEMA,
        "run": result.run,
        "baseline": result.baseline,
        "policy": result.policy.source,
        "voided": result.policy.voided,
        "passed": result.passed,
        "exit_code": result.exit_code,
        "skipped": len(result.skipped()),
        "note": result.note,
        "checks": [_check_json(c) for c in result.checks],
    }


def _check_json(check: Check) -> dict[str, Any]:
    return {
        "limit": check.limit,
        "scope": check.scope,
        "value": _finite(check.value),
        "low": _finite(check.low),
        "high": _finite(check.high),
        "threshold": check.threshold,
        "passed": check.passed,
        "p_holm": _finite(check.p_holm),
        "voided_by": check.voided_by,
        "skipped": check.skipped,
        "message": check.message(),
    }


def _finite(value: float) -> float | None:
    """JSON has no NaN: a missing figure or interval is ``null``."""
    return value if math.isfinite(value) else None
