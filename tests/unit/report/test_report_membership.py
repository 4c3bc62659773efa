"""The report on a labelled audit (membership table, notes, text, JSON) and Table 1's verbatim columns."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from memprobe_core.report.build import (
    MEMBERSHIP_COLUMNS,
    ROC_COLUMNS,
    TABLE1_COLUMNS,
    build_report,
    report_to_dict,
    table1,
)
from memprobe_core.report.text import render_text
from memprobe_core.store import RESULT_COLUMNS

# Members m0..m2, non-members n0..n3 (unlabelled u0); loss lower for members (1 / 12 overlap).
SNIPPETS = {
    "m0": ("member", 1.0, 0.9),
    "m1": ("member", 1.5, 0.2),
    "m2": ("member", 2.0, 0.6),
    "n0": ("nonmember", 3.0, 0.5),
    "n1": ("nonmember", 2.5, 0.1),
    "n2": ("nonmember", 4.0, 0.3),
    "n3": ("nonmember", 1.8, 0.7),
    "u0": (None, 0.1, 1.0),
}


def results(*, labelled: bool = True, verbatim: bool = True) -> pd.DataFrame:
    rows = []
    for i, (snippet, (label, loss, mem)) in enumerate(SNIPPETS.items()):
        for method in ("ps_base", "interactive"):
            rows.append(
                dict.fromkeys(RESULT_COLUMNS)
                | {
                    "run_id": 1,
                    "snippet_id": snippet,
                    "domain": "code",
                    "method": method,
                    "method_label": method,
                    "length": 100,
                    "mem": mem if method == "ps_base" else mem / 2,
                    "lcs_p": 0.1,
                    "objective": 0.2,
                    "alpha": 1.0,
                    "victim_queries": 1,
                    "attacker_queries": 0,
                    "generated_tokens": 10,
                    "seconds": 1.0,
                    "pii_truth": 0,
                    "pii_copied": 0,
                    "pii_invented": 0,
                    "label": label if labelled else None,
                    "signal_loss": loss,
                    **(
                        {
                            "extract_k": 50,
                            # P-S-Base: every other unit extractable, one not measured.
                            "extractable": None if i == 0 else bool(i % 2),
                            "span_tokens": 10 * i,
                        }
                        if verbatim and method == "ps_base"
                        else {}
                    ),
                }
            )
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def test_build_report_fills_the_membership_table_and_its_notes() -> None:
    report = build_report(results(), resamples=500)
    assert list(report.membership.columns) == MEMBERSHIP_COLUMNS
    assert list(report.roc.columns) == ROC_COLUMNS
    by_score = report.membership.set_index("score")
    assert list(by_score.index) == ["loss", "ps_base", "interactive"]
    assert by_score.loc["loss", "auroc"] == pytest.approx(11 / 12)  # lower loss = member
    assert by_score.loc["ps_base", "auroc"] == pytest.approx(8 / 12)
    assert (report.meta["members"], report.meta["nonmembers"]) == (3, 4)
    assert report.meta["membership_fpr_resolution"] == pytest.approx(0.25)
    assert "4 non-members: the smallest non-zero FPR is 25 %" in report.meta["membership_note"]
    assert "stratified" in report.meta["membership_interval"]
    assert set(report.roc["score"]) == {"loss", "ps_base", "interactive"}


def test_an_unlabelled_run_has_no_membership_table_or_notes() -> None:
    report = build_report(results(labelled=False), resamples=500)
    assert report.membership.empty and report.roc.empty
    assert "members" not in report.meta and "membership_note" not in report.meta
    assert "Membership" not in render_text(report)


def test_members_only_says_why_there_is_no_table() -> None:
    frame = results()
    frame["label"] = frame["label"].map({"member": "member", "nonmember": None})
    report = build_report(frame, resamples=500)
    assert report.membership.empty
    assert (report.meta["members"], report.meta["nonmembers"]) == (3, 0)
    assert "needs at least one of each" in render_text(report)


def test_the_text_report_shows_the_membership_table() -> None:
    text = render_text(build_report(results(), resamples=500))
    assert "Membership (labelled audit)" in text
    section = text[text.index("Membership (labelled audit)") :]
    for header in ("AUROC", "TPR@1%", "TPR@0.1%", "n (member/non)"):
        assert header in section
    loss_line = next(line for line in section.splitlines() if line.strip().startswith("Loss"))
    assert "0.917" in loss_line and "3/4" in loss_line
    assert "TPR@1% and TPR@0.1% are TPR at FPR 0" in section


@pytest.mark.parametrize(("rule", "words"), [("le", "FPR ≤ target"), ("lt", "FPR < target")])
def test_every_report_names_its_tpr_at_fpr_rule(rule, words) -> None:
    report = build_report(results(), resamples=500, fpr_rule=rule)
    assert report.meta["fpr_rule"] == rule and report.meta["tpr_rule"].startswith(words)
    assert f"TPR at FPR: {words}" in render_text(report)
    assert report_to_dict(report)["meta"]["tpr_rule"] == report.meta["tpr_rule"]


def test_report_to_dict_carries_membership_and_roc() -> None:
    report = build_report(results(), resamples=500)
    data = json.loads(json.dumps(report_to_dict(report)))
    assert [r["score"] for r in data["membership"]] == ["loss", "ps_base", "interactive"]
    assert data["membership"][0]["auroc"] == pytest.approx(11 / 12)
    assert len(data["roc"]) == len(report.roc) and set(data["roc"][0]) == set(ROC_COLUMNS)
    assert data["meta"]["membership_note"] == report.meta["membership_note"]


def test_table1_gains_verbatim_columns_after_the_existing_ones() -> None:
    at = TABLE1_COLUMNS.index("objective")
    assert TABLE1_COLUMNS[at : at + 4] == [
        "objective",
        "extractable",
        "match_tokens",
        "span_tokens",
    ]
    t1 = table1(results(), resamples=500)
    assert list(t1.columns) == TABLE1_COLUMNS
    base = t1[t1["method"] == "ps_base"].iloc[0]
    # Extractable of units 1..7 (unit 0 not measured): 1,0,1,0,1,0,1 → 4 / 7.
    assert base["extractable"] == pytest.approx(4 / 7)
    assert base["span_tokens"] == pytest.approx(sum(10 * i for i in range(8)) / 8)
    ours = t1[t1["method"] == "interactive"].iloc[0]
    assert math.isnan(ours["extractable"]) and math.isnan(ours["span_tokens"])  # not measured


def test_the_text_table1_shows_verbatim_columns_when_measured() -> None:
    text = render_text(build_report(results(), resamples=500))
    header = next(line for line in text.splitlines() if "Objective" in line)
    assert "Extractable (k=50)" in header and "Span (tokens)" in header
    base_line = next(line for line in text.splitlines() if line.strip().startswith("P-S-Base"))
    assert "0.571" in base_line and "35.0" in base_line
    old = render_text(build_report(results(verbatim=False), resamples=500))
    assert "Extractable" not in old and "Span" not in old


def test_left_out_snippets_play_no_part_in_the_membership_table_only() -> None:
    """ReCaLL's prefix texts are left out of membership evaluation; Table 1 keeps them."""
    whole = build_report(results(), resamples=500)
    first_member = next(k for k, (label, *_) in SNIPPETS.items() if label == "member")
    report = build_report(results(), resamples=500, left_out={first_member})
    assert (report.meta["members"], report.meta["nonmembers"]) == (2, 4)
    assert report.meta["membership_left_out"] == [first_member]
    assert set(report.membership["n_members"]) == {2}
    assert report.table1["n"].sum() == whole.table1["n"].sum()
    assert f"Left out (ReCaLL's prefix texts): {first_member}" in render_text(report)
