"""Compare, Audit and Runs pages (fake backend): empty store, runs to completion, exports."""

from __future__ import annotations

from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, saved, texts


def _probe(at, rounds: int = 1, n: int = 2):
    at.number_input(key="probe_length").set_value(40)
    at.number_input(key="probe_rounds").set_value(rounds)
    at.number_input(key="probe_n").set_value(n)
    at.button(key="probe_run").click()
    return run_until(at, saved)


def test_runs_page_on_an_empty_store_says_what_to_do() -> None:
    at = open_page("pages/5_Runs.py")
    assert "has no run yet" in texts(at)
    assert not at.get("download_button")


def test_runs_page_replays_a_probe_and_offers_csv() -> None:
    at = _probe(open_page("pages/1_Probe.py"), rounds=2, n=2)
    at.switch_page("pages/5_Runs.py").run()
    assert not at.exception, at.exception
    labels = {b.proto.label for b in at.get("download_button")}
    assert {"Report (Table 1) CSV", "Results CSV", "Raw candidates CSV"} <= labels
    replay = [df.value for df in at.dataframe if "prompt" in df.value.columns][0]
    assert len(replay) == 1 + 2 * 2
    at.slider(key="runs_upto_1_0").set_value(1).run()
    replay = [df.value for df in at.dataframe if "prompt" in df.value.columns][0]
    assert list(replay["round"].unique()) == [0, 1]


def test_runs_page_compares_two_runs() -> None:
    at = _probe(open_page("pages/1_Probe.py"))
    at.button(key="probe_run").click()
    run_until(at, lambda a: len(Store_runs()) == 2 and saved(a))
    at.switch_page("pages/5_Runs.py").run()
    assert not at.exception
    assert at.selectbox(key="runs_cmp_a").value != at.selectbox(key="runs_cmp_b").value
    assert any("Mean Mem" in str(c.proto.spec) for c in at.get("plotly_chart"))


def Store_runs():
    import os

    return Store(os.environ["MEMPROBE_STORE"]).list_runs()


def test_compare_runs_the_methods_side_by_side() -> None:
    at = open_page("pages/2_Compare.py")
    assert set(at.multiselect(key="cmp_methods").value) == {"ps_base", "ps_inst", "interactive"}
    at.number_input(key="cmp_length").set_value(40)
    at.number_input(key="cmp_rounds").set_value(1)
    at.number_input(key="cmp_n").set_value(2)
    at.button(key="cmp_run").click()
    run_until(at, saved)
    scores = [
        df.value for df in at.dataframe if "Mem" in df.value.columns or "mem" in df.value.columns
    ][0]
    # A table wider than the page comes in parts (ui_common.tables.fit_columns): the same rows.
    for part in at.dataframe:
        if "method" in part.value and list(part.value["method"]) == list(scores["method"]):
            scores = scores.join(part.value[[c for c in part.value if c not in scores]])
    assert list(scores["method"]) == ["P-S-Base", "P-S-Inst", "Ours (interactive)"]
    assert len([c for c in at.code]) >= 3  # one prompt per method
    assert sum("<mark" in h.proto.body or "true suffix" in h.proto.body for h in at.html) >= 3
    (run,) = Store_runs()
    assert run["kind"] == "compare" and run["units_done"] == 3
    # Mem's chance level: a column (a number, or "undefined"; never None) and the chart's line.
    assert {"chance level", "above chance"} <= set(scores.columns)
    assert set(scores["above chance"]) <= {"yes", "no", "undefined"}
    assert scores["chance level"].notna().all() and (scores["chance level"] > 0).all()
    bars = [c for c in at.get("plotly_chart") if "Scores by method" in str(c.proto.spec)]
    assert bars and "chance level of Mem" in str(bars[0].proto.spec)
    assert "Chance level of Mem" in texts(at)


def test_compare_audits_the_instruct_model_and_keeps_probe_on_gemma(monkeypatch) -> None:
    from memprobe_core.models.embedded import DEFAULT_BASE, DEFAULT_INSTRUCT, DEFAULT_VICTIM

    monkeypatch.delenv("MEMPROBE_UI_FAKE")  # the real defaults (nothing is loaded: no run)
    at = open_page("pages/2_Compare.py")
    assert at.sidebar.selectbox(key="model_instruct_kind").value == "embedded"
    assert at.sidebar.selectbox(key="model_instruct_embedded").value == DEFAULT_INSTRUCT
    assert at.sidebar.selectbox(key="model_base_embedded").value == DEFAULT_BASE
    assert "Instruct model (victim for P-S-Inst and Ours)" in {e.label for e in at.sidebar.expander}
    assert DEFAULT_INSTRUCT != DEFAULT_BASE  # else P-S-Inst would repeat P-S-Base
    at.switch_page("pages/1_Probe.py").run()
    assert not at.exception, at.exception
    victim = at.sidebar.selectbox(key="model_victim_embedded").value
    assert victim == DEFAULT_VICTIM == "gemma-3-270m"
    at.switch_page("pages/2_Compare.py").run()
    assert at.sidebar.selectbox(key="model_instruct_embedded").value == DEFAULT_INSTRUCT


def test_compare_records_the_instruct_model_as_the_victim() -> None:
    at = open_page("pages/2_Compare.py")
    at.sidebar.text_input(key="model_instruct_fake").set_value("fake:victim").run()
    at.multiselect(key="cmp_methods").set_value(["ps_base", "ps_inst"])
    at.number_input(key="cmp_length").set_value(40)
    at.button(key="cmp_run").click()
    run_until(at, saved)
    (run,) = Store_runs()
    assert run["config"]["models"]["victim"] == "fake:victim"
    assert run["config"]["models"]["base"] == "fake"


def test_compare_offers_reverse_lm_only_with_a_reverse_model() -> None:
    at = open_page("pages/2_Compare.py")
    assert "Reverse-LM" not in at.multiselect(key="cmp_methods").options
    at.sidebar.checkbox(key="model_use_reverse").check().run()
    assert "Reverse-LM" in at.multiselect(key="cmp_methods").options


def test_audit_runs_and_reports() -> None:
    at = open_page("pages/3_Audit.py")
    assert "No audit in the store yet" in texts(at)
    at.number_input(key="audit_limit").set_value(1)
    at.multiselect(key="audit_methods").set_value(["ps_inst", "interactive"])
    at.multiselect(key="audit_lengths").set_value([50])
    at.number_input(key="audit_rounds").set_value(1)
    at.number_input(key="audit_n").set_value(2)
    at.button(key="audit_start").click()
    run_until(at, lambda a: "state: finished" in texts(a), timeout=120)
    (run,) = Store_runs()
    assert run["kind"] == "audit" and run["units_done"] + run["units_error"] == run["units_total"]
    assert run["units_total"] == 3 * 2  # 3 domains × 1 snippet × 2 methods × 1 length
    at.run()
    table1 = [df.value for df in at.dataframe if "n" in df.value.columns]
    assert table1 and set(table1[0]["method"]) <= {"P-S-Inst", "Ours (interactive)"}
    assert any(b.proto.label == "Table 1 CSV" for b in at.get("download_button"))


def test_audit_resumes_an_interrupted_run() -> None:
    import os

    from memprobe_core.attacks.options import AttackOptions
    from memprobe_core.audit import ModelNames, start_audit
    from memprobe_core.snippets.corpus import demo_corpus

    store = Store(os.environ["MEMPROBE_STORE"])
    run_id = start_audit(
        store,
        demo_corpus(limit_per_domain=1)[:2],
        ["ps_inst"],
        [50],
        AttackOptions(),
        ModelNames(victim="fake", base="fake", attacker="fake"),
    )
    store.set_run_status(run_id, "interrupted")
    at = open_page("pages/3_Audit.py")
    assert at.selectbox(key="audit_resume_pick").value == run_id
    at.button(key="audit_resume").click()
    run_until(at, lambda a: "state: finished" in texts(a), timeout=60)
    assert store.get_run(run_id)["units_done"] == 2


def test_a_local_models_dtype_is_picked_per_role_and_shown(monkeypatch) -> None:
    from memprobe_core.models import dtypes
    from ui_common import models as ui_models

    monkeypatch.delenv("MEMPROBE_UI_FAKE")  # embedded models (nothing is loaded: no run)
    monkeypatch.setattr(dtypes, "cpu_has_bf16", lambda: True)
    at = open_page("pages/1_Probe.py")
    assert not at.exception, at.exception
    picker = at.sidebar.selectbox(key="model_attacker_dtype")
    assert picker.value == "auto" and list(picker.options) == list(dtypes.CHOICES)
    captions = " ".join(c.value for c in at.sidebar.caption).replace("\\", "")  # md-escaped
    on_cpu = dtypes.resolve("attacker", "auto") == "bfloat16"
    if on_cpu:  # the dashboard's own device: a CPU here, a GPU makes every role bfloat16
        assert "gemma-3-270m · float32" in captions
        assert "smollm2-135m-instruct · bfloat16" in captions
    at.sidebar.selectbox(key="model_victim_dtype").set_value("bfloat16").run()
    captions = " ".join(c.value for c in at.sidebar.caption).replace("\\", "")
    assert "gemma-3-270m · bfloat16" in captions
    chosen = {
        r: ui_models.ModelChoice("embedded", "m", dtype=d)
        for r, d in (("victim", "bfloat16"), ("attacker", "auto"))
    }
    chosen["base"] = ui_models.ModelChoice("openai", "gpt", "http://127.0.0.1:1/v1")
    assert ui_models.asked_dtypes(chosen) == {"victim": "bfloat16", "attacker": "auto"}
