"""``diff_runs`` and ``memprobe diff``: paired figures, their tests, refusals and outputs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from scipy import stats

from memprobe_core.cli import main
from memprobe_core.membership.evaluate import auroc
from memprobe_core.release.diff import ALPHA, DIFF_COLUMNS, bootstrap_aurocs, diff_runs
from memprobe_core.release.pairing import IncomparableRuns
from memprobe_core.release.render import DIFF_SCHEMA
from memprobe_core.store import Store
from tests.unit.release.conftest import add_run

ROOT = Path(__file__).resolve().parents[3]

# 12 members whose Mem rises by 0.3 to 0.5 on the candidate (the baseline extracts none of them)
# and 12 non-members unchanged; losses: the candidate separates members, the baseline does not.
BASE = [(f"m{i}", "member", 0.1, False, 3.0 + 0.01 * i) for i in range(12)] + [
    (f"n{i}", "nonmember", 0.1, False, 3.005 + 0.01 * i) for i in range(12)
]
CANDIDATE = [(f"m{i}", "member", 0.4 + 0.01 * i, i < 8, 1.0 + 0.01 * i) for i in range(12)] + [
    (f"n{i}", "nonmember", 0.1, False, 3.0 + 0.01 * i) for i in range(12)
]


def test_a_model_that_leaks_more_shows_a_significant_increase(store_path) -> None:
    a = add_run(store_path, "base", BASE)
    b = add_run(store_path, "canary copy", CANDIDATE)
    diff = diff_runs(Store(store_path), a, b, resamples=500)
    rows = {(r.figure, r.signal): r for r in diff.table.itertuples(index=False)}
    mem = rows[("mean_mem", "")]
    assert mem.n == 24 and mem.change == pytest.approx(
        np.mean([0.3 + 0.01 * i for i in range(12)]) / 2
    )
    assert mem.test == "wilcoxon" and mem.significant and mem.low > 0
    rate = rows[("extraction_rate", "")]
    # McNemar: 8 units extracted by the candidate only, none by the baseline only.
    assert (rate.a, rate.b) == (0.0, pytest.approx(8 / 24))
    assert rate.test == "mcnemar" and rate.p == pytest.approx(stats.binomtest(8, 8).pvalue)
    loss = rows[("auroc", "loss")]
    assert loss.b == 1.0 and loss.a < 0.6 and loss.significant
    assert list(diff.table.columns) == DIFF_COLUMNS
    top = diff.changed.iloc[0]  # m11: 0.1 -> 0.51
    assert (top["snippet_id"], top["change"]) == ("m11", pytest.approx(0.41))


def test_the_same_audit_twice_shows_no_significant_change(store_path) -> None:
    a = add_run(store_path, "base", BASE)
    b = add_run(store_path, "base", BASE)
    diff = diff_runs(Store(store_path), a, b, resamples=500)
    assert not diff.table["significant"].any()
    assert (diff.table["change"].fillna(0) == 0).all()
    assert set(diff.table["test"]) <= {"none", "bootstrap"}


def test_the_paired_auroc_bootstrap_scores_like_the_report() -> None:
    rng = np.random.default_rng(0)
    members, nonmembers = rng.normal(1, 1, 30), rng.normal(0, 1, 40)
    ((point, boot),) = bootstrap_aurocs([(members, nonmembers)], 2000, 0)
    assert point == pytest.approx(auroc(members, nonmembers))
    assert boot.shape == (2000,) and abs(boot.mean() - point) < 0.02
    # Paired: the same resampled snippets score both, so a run against itself never differs.
    (_, first), (_, second) = bootstrap_aurocs([(members, nonmembers)] * 2, 500, 3)
    assert np.array_equal(first, second)


def test_runs_that_share_no_unit_are_refused_naming_what_differs(store_path) -> None:
    a = add_run(store_path, "base", BASE, length=40)
    b = add_run(store_path, "other", BASE, length=100)
    with pytest.raises(IncomparableRuns, match="share no finished unit.*lengths 40.*lengths 100"):
        diff_runs(Store(store_path), a, b)
    with pytest.raises(IncomparableRuns, match="given twice"):
        diff_runs(Store(store_path), a, a)


def test_runs_sharing_some_units_are_compared_on_those_with_a_note(store_path) -> None:
    a = add_run(store_path, "base", BASE)
    b = add_run(store_path, "canary copy", CANDIDATE[:20])
    diff = diff_runs(Store(store_path), a, b, resamples=200)
    assert diff.runs.units == 20 and (diff.runs.only_a, diff.runs.only_b) == (4, 0)
    assert "left out: 4 of run 1's and 0 of run 2's" in diff.runs.note()


def test_memprobe_diff_prints_and_writes_every_form(store_path, tmp_path, capsys) -> None:
    a = add_run(store_path, "base", BASE)
    b = add_run(store_path, "<b>candidate</b>", CANDIDATE)
    csv, html = tmp_path / "diff.csv", tmp_path / "diff.html"
    args = ["--store", str(store_path), "diff", str(a), str(b), "--resamples", "200"]
    assert main([*args, "--csv", str(csv), "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert "mean_mem" in out and "significant: Holm-adjusted p" in out
    assert csv.read_text().splitlines()[0].split(",") == DIFF_COLUMNS
    page = html.read_text()
    assert "&lt;b&gt;candidate&lt;/b&gt;" in page and "<b>candidate</b>" not in page
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, json.loads((ROOT / "docs" / "schemas" / "diff-v2.json").read_text()))
    assert data["schema"] == DIFF_SCHEMA and data["units"] == 24 and data["alpha"] == ALPHA == 0.05
    assert all(set(row) == set(DIFF_COLUMNS) for row in data["figures"])
    assert not any(
        isinstance(v, float) and math.isnan(v) for r in data["figures"] for v in r.values()
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["diff", "1", "99"], "run 99 is not in store"),
        (["diff", "1", "1"], "given twice"),
        (["diff", "1", "0"], "RUN_B 0"),
        (["diff", "1", "2", "--resamples", "5"], "resamples must be a whole number"),
    ],
)
def test_diff_errors_exit_2_naming_the_problem(store_path, capsys, argv, message) -> None:
    add_run(store_path, "base", BASE)
    add_run(store_path, "candidate", CANDIDATE)
    assert main(["--store", str(store_path), *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_html_shows_control_characters_in_ids_as_escapes(store_path, tmp_path) -> None:
    odd = [("\x1b[31mred<i>", "member", 0.1, False, None)]
    a = add_run(store_path, "base", odd)
    b = add_run(store_path, "candidate", [(s, lab, 0.9, e, loss) for s, lab, _, e, loss in odd])
    html = tmp_path / "diff.html"
    assert main(["--store", str(store_path), "diff", str(a), str(b), "--html", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    assert "\x1b" not in page and "\\x1b[31mred&lt;i&gt;" in page
    assert (
        main(["--store", str(store_path), "diff", str(a), str(b), "--html", str(store_path)]) == 2
    )
    assert Store(store_path).get_run(a)  # the store is still a store
