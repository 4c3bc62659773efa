"""The prior-aware check's ``pam_*`` keys travel from a unit's stored record into the results
frame and its formula-safe CSV (docs/method.md §24); a unit stored before the check, or without
``--pam``, has them empty, never a made-up verdict."""

from __future__ import annotations

import io

import pandas as pd

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.result import AttackResult
from memprobe_core.measuring.prior_aware import COMMON, PAM_KEYS
from memprobe_core.records import VerbatimRecord
from memprobe_core.report.export import readable_export, to_safe_csv
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey

CHECK: VerbatimRecord = {
    "pam_log_ratio": 0.2,
    "pam_p": 0.35,
    "pam_verdict": COMMON,
    "pam_own_token_p": 0.8,
    "pam_prior_token_p": 0.75,
    "pam_prefixes": 19,
    "pam_source": '=HYPERLINK("http://x") built-in snippets',
}


def _result(unit: UnitKey, verbatim: VerbatimRecord) -> AttackResult:
    return AttackResult(
        method=unit.method,
        snippet_id=unit.snippet_id,
        domain="legal",
        length=unit.length,
        prompt="p",
        output="o",
        mem=0.5,
        lcs_p=0.1,
        objective=0.4,
        alpha=0.5,
        costs=Costs(victim_queries=1),
        verbatim=verbatim,
    )


def _stored(tmp_path, verbatims: list[VerbatimRecord]) -> pd.DataFrame:
    store = Store(tmp_path / "runs.sqlite")
    snippet = Snippet(id="s", text=" ".join(f"w{i}" for i in range(40)), domain="legal")
    methods = ["ps_base", "ps_inst", "verbatim"][: len(verbatims)]
    units = [UnitKey("s", m, 20) for m in methods]
    run_id = store.create_run("compare", snippets=[snippet], units=units)
    for unit, verbatim in zip(units, verbatims):
        store.finish_unit(run_id, unit, _result(unit, verbatim))
    return store.results_frame(run_id).set_index("method")


def test_the_results_frame_carries_every_pam_key(tmp_path) -> None:
    frame = _stored(tmp_path, [CHECK, {"pam_not_measured": "no weights"}, {}])
    assert set(PAM_KEYS) <= set(frame.columns)
    assert frame.loc["ps_base", list(CHECK)].tolist() == list(CHECK.values())
    assert frame.loc["ps_inst", "pam_not_measured"] == "no weights"
    assert frame.loc["verbatim", list(PAM_KEYS)].isna().all()  # no check: empty


def test_the_csv_has_the_pam_columns_formula_safe(tmp_path) -> None:
    frame = _stored(tmp_path, [CHECK, {}])
    csv = to_safe_csv(readable_export(frame.reset_index())).decode()
    back = pd.read_csv(io.StringIO(csv))
    assert {"pam_verdict", "pam_p", "pam_source"} <= set(back.columns)
    assert back["pam_verdict"].iloc[0] == COMMON
    assert "'=HYPERLINK" in csv and ",=HYPERLINK" not in csv


def test_a_run_without_the_check_exports_no_pam_column(tmp_path) -> None:
    frame = _stored(tmp_path, [{}, {}])
    exported = readable_export(frame.reset_index())
    assert not [c for c in exported.columns if c.startswith("pam_")]
