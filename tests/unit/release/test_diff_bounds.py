"""``memprobe diff`` compares the bracket around p_z paired per unit: the median rank-based
extraction cost (bits) and the median near-verbatim lower bound (docs/method.md §17, §22)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from memprobe_core.cli import main
from memprobe_core.release.diff import diff_runs
from memprobe_core.release.render import diff_html, diff_text
from memprobe_core.store import Store
from tests.unit.release.conftest import add_run
from tests.unit.release.test_diff import BASE

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "docs" / "schemas" / "diff-v2.json").read_text())
INDEX = {s: i for i, (s, *_) in enumerate(BASE)}


def shipped(snippet: str) -> dict[str, object]:
    """The baseline: 40 + i/10 bits, a near-verbatim bound of 10^-(9 + i/10)."""
    i = INDEX[snippet]
    return {
        "extraction_bits": 40.0 + i / 10,
        "extraction_window_tokens": 20,
        "near_verbatim_log10_lower": -9.0 - i / 10,
        "near_verbatim_edits": 5,
    }


def leakier(snippet: str) -> dict[str, object]:
    """The candidate: every unit 10 to 12 bits cheaper and its bound 2 to 3 decades likelier,
    except n11, which measured neither (a unit the pairing leaves out)."""
    if snippet == "n11":
        return {"extraction_bits": None, "extraction_not_measured": "no ranks"}
    i = INDEX[snippet]
    return {
        "extraction_bits": 30.0 + i / 10 - (i % 3),
        "extraction_window_tokens": 20,
        "near_verbatim_log10_lower": -7.0 - i / 10 + (i % 2),
        "near_verbatim_edits": 5,
    }


@pytest.fixture
def runs(store_path: Path) -> tuple[int, int]:
    return (
        add_run(store_path, "base", BASE, verbatim=shipped),
        add_run(store_path, "candidate", BASE, verbatim=leakier),
    )


def test_both_bounds_are_compared_paired_per_unit(store_path, runs) -> None:
    diff = diff_runs(Store(store_path), *runs, resamples=200)
    rows = {r.figure: r for r in diff.table.itertuples(index=False)}
    bits = rows["median_extraction_bits"]
    paired = [i for s, i in INDEX.items() if s != "n11"]  # 23 units measured in both runs
    assert bits.n == 23
    assert bits.a == pytest.approx(np.median([40 + i / 10 for i in paired]))
    assert bits.b == pytest.approx(np.median([30 + i / 10 - (i % 3) for i in paired]))
    assert bits.change == pytest.approx(bits.b - bits.a)
    assert bits.test == "wilcoxon" and bits.significant  # every pair fell
    lower = rows["median_near_verbatim_log10_lower"]
    assert lower.n == 23 and lower.change > 0 and lower.significant


def test_an_audit_against_itself_changes_neither_bound(store_path) -> None:
    a = add_run(store_path, "base", BASE, verbatim=shipped)
    b = add_run(store_path, "base", BASE, verbatim=shipped)
    table = diff_runs(Store(store_path), a, b, resamples=200).table
    bounds = table[
        table["figure"].isin(["median_extraction_bits", "median_near_verbatim_log10_lower"])
    ]
    assert len(bounds) == 2 and (bounds["change"] == 0).all() and not bounds["significant"].any()


def test_runs_that_measured_no_bound_show_no_bound_row(store_path) -> None:
    a, b = add_run(store_path, "base", BASE), add_run(store_path, "candidate", BASE)
    figures = set(diff_runs(Store(store_path), a, b, resamples=200).table["figure"])
    assert not figures & {"median_extraction_bits", "median_near_verbatim_log10_lower"}


def test_the_text_the_html_and_the_json_show_them(store_path, runs, capsys, tmp_path) -> None:
    diff = diff_runs(Store(store_path), *runs, resamples=200)
    text = diff_text(diff)
    assert "median_extraction_bits" in text and "median_near_verbatim_log10_lower" in text
    html = diff_html(diff)
    assert "<td>median extraction bits</td>" in html
    assert "<td>median log10 near-verbatim lower bound</td>" in html
    assert "no decoding writes the suffix&#39;s easiest window" in html  # explained, escaped
    page = tmp_path / "diff.html"
    argv = ["--store", str(store_path), "diff", *map(str, runs), "--resamples", "200", "--json"]
    assert main([*argv, "--html", str(page)]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, SCHEMA)
    shown = {row["figure"] for row in data["figures"]}
    assert {"median_extraction_bits", "median_near_verbatim_log10_lower"} <= shown
    assert "median extraction bits" in page.read_text(encoding="utf-8")
