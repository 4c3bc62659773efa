"""The diff as people read it (issue 52): figure, method and signal labels, no raw keys, one
mapping for the Runs page's table and the HTML diff."""

from __future__ import annotations

import html
import re

from memprobe_core.release.diff import DIFF_COLUMNS, diff_runs
from memprobe_core.release.render import DIFF_SHOWN, diff_html, diff_shown
from memprobe_core.store import Store
from tests.unit.release.conftest import add_run
from tests.unit.release.test_diff import BASE, CANDIDATE

RAW_KEYS = {"a", "b", "low", "high", "p", "p_holm", "p Holm", "voided_a", "voided_b", "mean_mem"}
RAW_KEYS |= {"significant", "True", "False"}
RAW_KEYS |= {"extraction_rate", "auroc", "loss", "ppl", "min_k_pp", "ps_base"}


def _diff(tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "runs.sqlite"
    Store(path)
    a = add_run(path, "base", BASE)
    b = add_run(path, "candidate", CANDIDATE)
    return diff_runs(Store(path), a, b, resamples=200)


def test_the_shown_table_has_labels_not_keys(tmp_path) -> None:
    diff = _diff(tmp_path)
    shown = diff_shown(diff)
    assert list(shown.columns) == list(DIFF_SHOWN)
    assert not RAW_KEYS & set(shown.columns)
    assert set(shown["figure"]) == {"mean Mem", "extraction rate", "AUROC"}
    assert set(shown["where"]) == {"P-S-Base @ 40", "Loss @ 40"}
    mem = shown[shown["figure"] == "mean Mem"].iloc[0]
    row = diff.table[diff.table["figure"] == "mean_mem"].iloc[0]
    assert mem["change B − A [95 % CI]"] == (
        f"{row['change']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"
    )
    assert mem["A"] == f"{row['a']:.3f}" and mem["B"] == f"{row['b']:.3f}"
    assert mem["p (Holm-adjusted)"].endswith(", significant") and mem["voided by"] == "–"
    assert set(DIFF_COLUMNS) <= set(diff.table.columns)  # the keys stay in the data (JSON, CSV)


def test_the_html_diff_shows_the_same_labels(tmp_path) -> None:
    page = diff_html(_diff(tmp_path))
    heads = [html.unescape(h) for h in re.findall(r"<th[^>]*>([^<]*)</th>", page)]
    assert heads == list(DIFF_SHOWN)
    cells = {html.unescape(c) for c in re.findall(r"<td>([^<]*)</td>", page)}
    assert {"mean Mem", "P-S-Base @ 40", "Loss @ 40"} <= cells
    assert not RAW_KEYS & cells
    assert " / P-S-Base @ 40: Mem " in page  # the changed units, by the method's label
