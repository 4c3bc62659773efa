"""NER page (tiny random BERT models registered by the test): run, numbers, charts, τ, CSV, escaping."""

from __future__ import annotations

import pytest

from memprobe_core.highlight import markdown_escape
from memprobe_core.ner.audit import NerAuditConfig, run_ner_audit
from memprobe_core.ner.registry import EMBEDDED
from tests.app.conftest import open_page, run_until, texts
from tests.helpers.ner_models import registered_tiny_models

PAGE = "pages/4_NER.py"
# A model name a user could type in "More models" or register: Markdown, HTML and a link.
MARKUP = "**bold** <b>x</b> [link](http://evil.example) :red[red] $x$"


def _run(
    at, models: list[str], *, pairs: int = 20, templates: int = 8, steps: int = 2, timeout=180
):
    at.multiselect(key="ner_models").set_value(models)
    at.number_input(key="ner_pairs").set_value(pairs)
    at.number_input(key="ner_templates").set_value(templates)
    at.number_input(key="ner_importance_steps").set_value(steps)
    at.button(key="ner_run").click()
    return run_until(at, lambda a: "state: finished" in texts(a), timeout=timeout)


def test_ner_widgets_and_defaults(monkeypatch) -> None:
    from ui_common import ner_view

    monkeypatch.setattr(ner_view, "_TIMINGS", [])  # no audit has run in this process
    at = open_page(PAGE)
    assert at.multiselect(key="ner_models").value == [EMBEDDED]
    assert at.radio(key="ner_size").value == "quick"  # the quick size first: CPUs come first
    assert at.number_input(key="ner_pairs").value == 30
    assert at.number_input(key="ner_templates").value == 10
    assert at.number_input(key="ner_importance_steps").value == 1
    assert at.button(key="ner_run").label == "Run NER audit"
    assert "Pick models" in texts(at)
    assert "No NER audit has run in this dashboard yet, so no time is measured" in texts(at)
    at.radio(key="ner_size").set_value("full").run()
    assert at.number_input(key="ner_pairs").value == NerAuditConfig.max_pairs == 100
    assert at.number_input(key="ner_templates").value == NerAuditConfig.templates
    assert at.number_input(key="ner_importance_steps").value == 4


def test_ner_run_shows_the_core_numbers_heatmaps_tau_and_exports(monkeypatch) -> None:
    from ui_common import ner_view

    monkeypatch.setattr(ner_view, "_TIMINGS", [])
    with registered_tiny_models("tiny-a", "tiny-b") as names:
        at = _run(open_page(PAGE), names)
        # The next audit's time, from this one: 2 models × 8 prompts × 20 pairs × 2 names.
        at.run()
        assert "(the last NER audit here took " in texts(at)
        assert "for 640 filled prompts; this one scores 640;" in texts(at)
        # The same audit run directly: the page must show the core's numbers, not its own.
        expected = run_ner_audit(
            NerAuditConfig(
                models=tuple(names),
                max_pairs=20,
                templates=8,
                importance_steps=0,
                attention_pairs=0,
            )
        )
    summary = at.dataframe[0].value
    assert list(summary["model"]) == names
    assert list(summary["prompts"]) == [8, 8] and list(summary["pairs"]) == [20, 20]
    want = expected.summary_table().round(1)
    assert list(summary["mean M-MEM %"]) == pytest.approx(list(want["mean M-MEM %"]), abs=0.06)
    assert list(summary["spread (points)"]) == pytest.approx(
        list(want["spread (points)"]), abs=0.06
    )
    shown = at.metric[0].value
    assert shown == f"{100 * expected.reports['tiny-a'].scores.m_mem.mean():.1f} %"
    titles = " ".join(str(c.proto.spec) for c in at.get("plotly_chart"))
    for title in (
        "Prompts ranked by M-MEM",
        "M-MEM by prompt type",
        "Best prompt",
        "Worst prompt",
        "Kendall",
    ):
        assert title in titles, title
    labels = {b.proto.label for b in at.get("download_button")}
    assert labels == {"Prompt scores CSV", "Per-name confidences CSV"}


def test_a_model_name_with_markup_is_escaped_in_headings() -> None:
    with registered_tiny_models(MARKUP) as names:
        at = _run(open_page(PAGE), names, pairs=6, templates=3, steps=1)
    headings = [h.value for h in at.subheader]
    assert f"Token importance ({markdown_escape(MARKUP)})" in headings
    assert f"Attention of the name position ({markdown_escape(MARKUP)})" in headings
    # No heading or text carries the name unescaped (it would render bold, a link, red, maths).
    raw = [h for h in headings + [m.value for m in at.markdown] if MARKUP in h]
    assert raw == []


def test_ner_bad_prompt_is_an_error_not_a_crash() -> None:
    at = open_page(PAGE)
    at.radio(key="ner_psource").set_value("My prompts").run()
    at.text_area(key="ner_own").set_value("no slot here\n<img src=x onerror=alert(1)> {name}").run()
    at.button(key="ner_run").click().run()
    assert not at.exception
    assert at.error and "{name}" in at.error[0].value.replace("\\", "")


def test_missing_uploads_are_an_error_naming_them() -> None:
    at = open_page(PAGE)
    at.radio(key="ner_names_source").set_value("Upload two lists").run()
    at.button(key="ner_run").click().run()
    assert not at.exception
    assert "upload the in-train names and out-of-train names lists" in at.error[0].value.replace(
        "\\", ""
    )


@pytest.mark.slow
def test_ner_page_on_the_embedded_ner_model_finds_memorization(monkeypatch) -> None:
    """The embedded MiniLM model (trained once into ~/.cache/memprobe): mean M-MEM above 50 %."""
    monkeypatch.delenv("MEMPROBE_HOME")  # the shared cache: train once, not once per test
    at = _run(open_page(PAGE), [EMBEDDED], pairs=40, templates=12, steps=1, timeout=900)
    summary = at.dataframe[0].value
    assert list(summary["model"]) == [EMBEDDED] and list(summary["pairs"]) == [40]
    # With 40 pairs a prompt at chance exceeds 60 % with p ≈ 0.08; the mean over 12 prompts far
    # less often. Measured: ~99 %.
    assert summary["mean M-MEM %"].iloc[0] > 60, summary
    assert summary["worst %"].iloc[0] > 50, summary
