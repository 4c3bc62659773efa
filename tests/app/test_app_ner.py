"""NER page (tiny random BERT models under MEMPROBE_UI_FAKE=1): run, charts, τ matrix, CSV."""

from __future__ import annotations

from tests.app.conftest import open_page, run_until, texts

PAGE = "pages/4_NER.py"


def test_ner_widgets_and_defaults() -> None:
    at = open_page(PAGE)
    assert len(at.multiselect(key="ner_models").value) == 2
    assert at.number_input(key="ner_pairs").value == 100
    assert at.button(key="ner_run").label == "Run NER audit"
    assert "Pick models" in texts(at)


def test_ner_run_shows_rankings_heatmaps_tau_and_exports() -> None:
    at = open_page(PAGE)
    at.number_input(key="ner_pairs").set_value(20)
    at.number_input(key="ner_ntemplates").set_value(8)
    at.number_input(key="ner_steps").set_value(2)
    at.button(key="ner_run").click()
    run_until(at, lambda a: "state: finished" in texts(a), timeout=120)
    summary = at.dataframe[0].value
    assert list(summary["prompts"]) == [8, 8] and list(summary["pairs"]) == [20, 20]
    assert summary["mean M-MEM %"].between(0, 100).all()
    titles = " ".join(str(c.proto.spec) for c in at.get("plotly_chart"))
    for title in ("Prompts ranked by M-MEM", "M-MEM by prompt type", "Best prompt", "Worst prompt",
                  "Kendall"):
        assert title in titles, title
    labels = {b.proto.label for b in at.get("download_button")}
    assert labels == {"Prompt scores CSV", "Per-name confidences CSV"}


def test_ner_bad_prompt_is_an_error_not_a_crash() -> None:
    at = open_page(PAGE)
    at.radio(key="ner_psource").set_value("My prompts").run()
    at.text_area(key="ner_own").set_value("no slot here\n<img src=x onerror=alert(1)> {name}").run()
    at.button(key="ner_run").click().run()
    assert not at.exception
    assert at.error and "{name}" in at.error[0].value.replace("\\", "")
