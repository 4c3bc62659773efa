"""The Audit page's validity controls in a real Streamlit run: the blind baseline's warning and
the random-split table, every text shown as text."""

from __future__ import annotations

import pandas as pd
from streamlit.testing.v1 import AppTest

from memprobe_core.highlight import markdown_escape
from memprobe_core.membership.blind import RANDOM_SPLIT_COLUMNS, RANDOM_SPLIT_OK, BlindBaseline
from memprobe_core.membership.evaluate import MEMBERSHIP_COLUMNS
from memprobe_core.report.build import Report

MARKUP = "<b>bold</b> *star* :red[x]"


def _view() -> None:
    import streamlit as st

    from ui_common.audit_view import validity_view

    validity_view(st.session_state["report"])


def _report(blind: BlindBaseline | None, control: pd.DataFrame | None = None) -> Report:
    empty = pd.DataFrame()
    report = Report(table1=empty, paired=empty, pii=empty, costs=empty, blind_baseline=blind)
    if control is not None:
        report.random_split = control
    return report


def _run(report: Report) -> AppTest:
    at = AppTest.from_function(_view, default_timeout=30)
    at.session_state["report"] = report
    at.run()
    assert not at.exception, at.exception
    return at


def _control(flagged: bool) -> pd.DataFrame:
    row = {
        "score": "loss",
        "score_label": "Loss",
        "kind": "signal",
        "length": 100,
        "n_half_a": 10,
        "n_half_b": 10,
        "auroc": 0.95 if flagged else 0.52,
        "auroc_lo": 0.85 if flagged else 0.3,
        "auroc_hi": 1.0 if flagged else 0.7,
        "p_value": 0.0001 if flagged else 0.8,
        "p_holm": 0.0001 if flagged else 0.8,
        "flagged": flagged,
    }
    return pd.DataFrame([row], columns=RANDOM_SPLIT_COLUMNS)


def test_a_blind_baseline_warning_is_shown_as_text() -> None:
    blind = BlindBaseline(
        n_members=30,
        n_nonmembers=30,
        folds=5,
        seed=0,
        figures={"auroc": 0.99, "auroc_lo": 0.97, "auroc_hi": 1.0},
        warning=f"split told apart {MARKUP}",
    )
    at = _run(_report(blind, _control(flagged=False)))
    (warning,) = at.warning
    # Escaped for Markdown: the reader sees the characters, not bold text or a colour.
    assert warning.value == markdown_escape(f"Blind baseline: split told apart {MARKUP}")
    assert "\\<b\\>bold\\</b\\> \\*star\\* \\:red\\[x\\]" in warning.value
    shown = at.dataframe[0].value
    assert list(shown["AUROC [95 % CI]"]) == ["0.990 [0.970, 1.000]"]
    assert list(shown["folds"]) == [5]
    assert list(at.dataframe[1].value["score"]) == ["Loss"]  # labels, not field names
    captions = [c.value for c in at.caption]
    assert markdown_escape(RANDOM_SPLIT_OK) in captions


def test_a_flagged_random_split_warns() -> None:
    blind = BlindBaseline(n_members=30, n_nonmembers=30, folds=5, seed=0, figures={"auroc": 0.5})
    at = _run(_report(blind, _control(flagged=True)))
    (warning,) = at.warning
    assert warning.value.startswith(markdown_escape("Random-split control: random-split control"))


def test_a_baseline_that_did_not_run_says_why_and_an_unlabelled_run_shows_nothing() -> None:
    blind = BlindBaseline(n_members=1, n_nonmembers=5, folds=0, seed=0, note="too few members")
    at = _run(_report(blind))
    assert [i.value for i in at.info] == [
        markdown_escape("Blind baseline not run: too few members")
    ]
    assert not at.warning
    at = _run(_report(None))
    assert not at.subheader and not at.dataframe


def _membership_view() -> None:
    import streamlit as st

    from ui_common.audit_view import membership_view

    membership_view(st.session_state["report"])


def test_the_membership_view_leads_with_the_verdict_and_badges_voided_rows() -> None:
    rows = [
        dict.fromkeys(MEMBERSHIP_COLUMNS)
        | {"score": s, "score_label": s.title(), "kind": "signal", "length": 64}
        | {"n_members": 12, "n_nonmembers": 12, "auroc": 1.0}
        for s in ("loss", "zlib")
    ]
    blind = BlindBaseline(n_members=12, n_nonmembers=12, folds=5, seed=0, figures={"auroc": 1.0})
    report = _report(blind, _control(flagged=False))
    report.membership = pd.DataFrame(rows, columns=MEMBERSHIP_COLUMNS)
    at = AppTest.from_function(_membership_view, default_timeout=30)
    at.session_state["report"] = report
    at.run()
    assert not at.exception, at.exception
    kinds = [type(e).__name__ for e in at.main if type(e).__name__ in ("Warning", "Dataframe")]
    assert kinds[:2] == ["Warning", "Dataframe"]  # the verdict before the table
    headline = "inconclusive: the sets differ without the model (blind baseline AUROC 1.00)"
    assert at.warning[0].value.startswith(markdown_escape(headline))
    shown = at.dataframe[0].value
    assert list(shown["voided by"]) == ["blind baseline separates the sets"] * 2
