"""Units of the signals-only method through the audit runner and the report: measured, or
failed naming why; never counted as an extraction."""

from __future__ import annotations

from memprobe_core.attacks import ModelSet
from memprobe_core.audit import run_audit, start_audit
from memprobe_core.models import load
from memprobe_core.report.build import report_for_run
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store
from tests.helpers.tiny_models import tiny_hf_generator

TEXT = "Permission is hereby granted, free of charge, to any person obtaining a copy of this {}"


def _labelled(n: int = 4) -> list[Snippet]:
    return [
        Snippet(f"{label}{i}", TEXT.format(f"{label} {i} ") * 3, "legal", label=label)
        for label in ("member", "nonmember")
        for i in range(n)
    ]


def test_signals_only_units_carry_signals_and_no_extraction_figures(tmp_path):
    tiny = tiny_hf_generator(seed=2)
    with Store(tmp_path / "runs.sqlite") as store:
        run_id = start_audit(store, _labelled(), ["signals", "ps_inst"], [16])
        summary = run_audit(store, run_id, models=ModelSet(victim=tiny, base=tiny))
        assert (summary.done, summary.errors) == (16, 0)
        results = store.results_frame(run_id)
        mine = results[results["method"] == "signals"]
        assert mine["signal_loss"].notna().all() and mine["signal_min_k"].notna().all()
        assert mine["extractable"].isna().all()  # no output, so no verbatim metrics
        # Nor a Mem, LCS_P or PII count: empty, not a made-up 0 (a CSV mean would read it).
        assert mine[["mem", "lcs_p", "objective", "pii_copied"]].isna().all().all()
        assert results.loc[results["method"] == "ps_inst", "mem"].notna().all()
        report = report_for_run(store, run_id)
    assert set(report.table1["method"]) == {"ps_inst"}
    assert set(report.pii["method"]) == {"ps_inst"}
    methods = report.membership[report.membership["kind"] == "method"]
    assert set(methods["score"]) == {"ps_inst"}  # the signals-only method has no Mem to rank
    assert "signals" in set(report.costs["method"])  # its cost is still shown


def test_a_signals_only_unit_that_measures_nothing_fails_naming_why(tmp_path):
    fake = load("fake")  # no weights and no scoring server: nothing to measure
    with Store(tmp_path / "runs.sqlite") as store:
        run_id = start_audit(store, _labelled(2), ["signals"], [16])
        summary = run_audit(store, run_id, models=ModelSet(victim=fake))
        assert summary.errors == 4
        errors = store.errors_frame(run_id)
    assert errors["error"].str.contains("NothingMeasured: no membership signal was measured").all()
    assert errors["error"].str.contains("exposes no weights").all()  # the cause, named


def test_a_failed_samia_sampling_is_named_in_the_stored_unit_error(tmp_path):
    """Issue 51: a SaMIA-only unit (a victim with no log-probs) whose sampling failed stored
    "SaMIA needs neither: add --samia-samples N" — not why it failed, and a remedy already
    applied."""
    from memprobe_core.attacks import AttackOptions
    from memprobe_core.membership import MeasureOptions
    from memprobe_core.models.scripted import ScriptedGenerator

    def broken(ask):
        raise RuntimeError("CUDA out of memory (sampling 4 x 512 tokens)")

    options = AttackOptions(measure=MeasureOptions(samia_samples=2))
    with Store(tmp_path / "runs.sqlite") as store:
        run_id = start_audit(store, _labelled(2), ["signals"], [16], options)
        summary = run_audit(store, run_id, models=ModelSet(victim=ScriptedGenerator(broken)))
        assert summary.errors == 4
        errors = store.errors_frame(run_id)
    assert errors["error"].str.contains("exposes no weights").all()
    assert (
        errors["error"]
        .str.contains(
            "SaMIA, which needs neither, was not measured either: sampling the victim failed: "
            "RuntimeError: CUDA out of memory (sampling 4 x 512 tokens)",
            regex=False,
        )
        .all()
    )
    assert not errors["error"].str.contains("add --samia-samples").any()


def test_signals_only_with_the_signals_turned_off_is_refused_before_it_is_stored(tmp_path):
    import pytest

    from memprobe_core.attacks import AttackOptions
    from memprobe_core.membership import MeasureOptions

    off = AttackOptions(measure=MeasureOptions(signals=False))
    with Store(tmp_path / "runs.sqlite") as store:
        with pytest.raises(ValueError, match="signals-only method measures membership signals"):
            start_audit(store, _labelled(2), ["signals"], [16], off)
        assert store.list_runs() == []
        start_audit(store, _labelled(2), ["signals", "ps_inst"], [16], off)  # extraction: fine
