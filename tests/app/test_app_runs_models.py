"""Runs page, "Compare two models": the paired diff of two runs, its refusals, escaped text."""

from __future__ import annotations

import os
import re

from memprobe_core.release.diff import diff_runs
from memprobe_core.release.render import DIFF_SHOWN
from memprobe_core.store import Store
from tests.app.conftest import open_page, texts
from tests.unit.release.conftest import add_run, texts_by_label
from tests.unit.release.test_diff import BASE, CANDIDATE

MARKUP = "<b>candidate</b> **bold** [link](http://evil.example)"


def _path():
    return Store(os.environ["MEMPROBE_STORE"]).path


def test_the_tab_shows_the_cores_paired_figures_and_the_changed_units() -> None:
    base = add_run(_path(), "base model", BASE)
    candidate = add_run(_path(), MARKUP, CANDIDATE)
    at = open_page("pages/5_Runs.py")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert (at.selectbox(key="runs_diff_a").value, at.selectbox(key="runs_diff_b").value) == (
        base,
        candidate,
    )
    expected = diff_runs(Store(_path()), base, candidate)
    # The HTML diff's labels, no raw keys; a part on the page, the rest under "More columns".
    parts = [d.value for d in at.dataframe if "change B − A [95 % CI]" in d.value.columns]
    parts += [d.value for d in at.dataframe if "p (Holm-adjusted)" in d.value.columns]
    shown = parts[0]
    assert len(shown) == len(expected.table)
    assert set(c for p in parts for c in p.columns) == set(DIFF_SHOWN)
    page = texts(at)
    significant = int(expected.table["significant"].sum())
    assert f"{significant} of {len(expected.table)} changes significant" in page
    # The victim's name is shown as text: its markup neither renders nor links.
    summary = next(m.value for m in at.markdown if "paired units" in m.value)
    assert "\\<b\\>" in summary or "&lt;b&gt;" in summary
    assert "Units whose Mem changed most" in [h.value for h in at.subheader]
    top = expected.changed.iloc[0]
    assert (
        f"{top['snippet_id']} / P-S-Base @ 40: Mem {top['mem_a']:.3f} → {top['mem_b']:.3f}" in page
    )


def test_runs_with_no_unit_in_common_are_explained_not_crashed() -> None:
    add_run(_path(), "base", BASE, length=40)
    add_run(_path(), "other", BASE, length=100)
    at = open_page("pages/5_Runs.py")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("share no finished unit" in w.value for w in at.warning)


def test_figures_a_validity_control_voids_are_marked_on_the_page() -> None:
    """Both runs' texts tell members from non-members without the model: each report's blind
    baseline voids its AUROC, and the page says so beside the figure (as `memprobe diff`)."""
    base = add_run(_path(), "base model", BASE, text=texts_by_label)
    candidate = add_run(_path(), "candidate", CANDIDATE, text=texts_by_label)
    at = open_page("pages/5_Runs.py")
    assert not at.exception and not at.error, [e.value for e in at.error]
    page = texts(at)
    assert "of them increases; 1 voided by a validity control." in page
    warning = "\n".join(w.value for w in at.warning)
    for side, run in (("A", base), ("B", candidate)):
        assert (
            f"voided {side}: run {run}'s report voids the AUROC of loss @ 40 (blind baseline "
            "separates the sets)" in re.sub(r"\\(.)", r"\1", warning)
        )
    shown = next(d.value for d in at.dataframe if "voided by" in d.value.columns)
    row = shown[shown["voided by"] != "–"]
    assert list(row["voided by"]) == ["A and B: blind baseline separates the sets"]
