"""The text, JSON and HTML reports lead with the verdict (docs/method.md §10, "Verdicts"): the
controls' conclusion comes before the tables and charts whose figures it voids, and a dataset
inference on sets the blind baseline tells apart never reads "evidence"."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from memprobe_core.cli.output import terminal_json
from memprobe_core.membership.blind import BlindBaseline
from memprobe_core.membership.inference import DatasetInference, WelchOutcome
from memprobe_core.report.build import Report, build_report, report_to_dict
from memprobe_core.report.html import render_html
from memprobe_core.report.text import render_text
from tests.unit.report.test_report_validity import _results, _texts

SEPARATES = "inconclusive: the sets differ without the model (blind baseline AUROC 1.00)"


@pytest.fixture(scope="module")
def labelled():
    """12 members against 12 non-members whose texts alone tell them apart (blind AUROC 1)."""
    return build_report(_results(), resamples=500, seed=0, texts=_texts())


@pytest.fixture(scope="module")
def inferred():
    """The issue's run: 6 suspect against 6 held-out texts (3 vs 3 tested), p = 0.022, and a
    blind baseline that separates the two sets."""
    test = WelchOutcome(2.9, 3.8, 0.022, True, (3, 3), (3, 3), 0.8, 0.2)
    one = DatasetInference(
        length=64, n_suspect=6, n_heldout=6, significance=0.05, seed=0, test=test
    )
    blind = BlindBaseline(
        n_members=6, n_nonmembers=6, folds=5, seed=0, figures={"auroc": 1.0}, warning="apart"
    )
    empty = pd.DataFrame()
    return Report(
        table1=empty,
        paired=empty,
        pii=empty,
        costs=empty,
        dataset_inference=[one],
        blind_baseline=blind,
    )


def test_the_text_report_leads_dataset_inference_with_the_verdict(inferred) -> None:
    text = render_text(inferred)
    head = text.index("Dataset inference — ")
    verdict = text.index(f"Length 64: {SEPARATES}")
    assert head < verdict < text.index("Method: ") < text.index("Welch t = ")
    assert "  - too few texts (3 vs 3) for this test" in text
    assert "Test alone: p = 0.022 < 0.05, 3 vs 3 texts tested" in text
    assert "evidence that the suspect set was used" not in text


def test_the_text_report_leads_the_membership_table_with_the_verdict(labelled) -> None:
    text = render_text(labelled)
    verdict = text.index(f"Verdict: {SEPARATES}")
    assert text.index("Membership (labelled audit)") < verdict < text.index("Voided by")
    assert verdict < text.index("Validity controls (labelled audit)")
    table_row = next(line for line in text.splitlines() if line.strip().startswith("Loss "))
    assert table_row.endswith("blind baseline separates the sets")


def test_json_carries_each_verdict_with_its_reasons(inferred, labelled) -> None:
    (one,) = json.loads(terminal_json(report_to_dict(inferred)))["dataset_inference"]
    assert one["verdict"]["conclusion"] == "inconclusive"
    assert one["verdict"]["headline"] == SEPARATES
    assert any(r.startswith("too few texts (3 vs 3)") for r in one["verdict"]["reasons"])
    assert one["test_result"].startswith("p = 0.022 < 0.05, 3 vs 3 texts tested")
    data = json.loads(terminal_json(report_to_dict(labelled)))
    assert data["membership_verdict"]["headline"] == SEPARATES
    assert data["membership_verdict"]["reasons"]
    assert {row["voided_by"] for row in data["membership"]} == {"blind baseline separates the sets"}
    assert report_to_dict(inferred)["membership_verdict"] is None  # no table, no verdict


def test_the_html_report_shows_the_verdict_before_the_tables_and_charts(inferred, labelled) -> None:
    page = render_html(inferred)
    section = page[page.index('<section id="inference">') :]
    verdict = section.index(f"Length 64: {SEPARATES}")
    assert verdict < section.index("<table") and verdict < section.index('<p class="note">')
    assert "too few texts (3 vs 3) for this test" in section
    assert "evidence that the suspect set was used" not in page

    page = render_html(labelled)
    section = page[page.index('<section id="membership">') :]
    section = section[: section.index("</section>")]
    verdict = section.index(SEPARATES)
    assert verdict < section.index("<table") < section.index('class="plot"')
    assert '<div class="verdict inconclusive">' in section
    assert (
        "<th>voided by</th>" in section and "<td>blind baseline separates the sets</td>" in section
    )
