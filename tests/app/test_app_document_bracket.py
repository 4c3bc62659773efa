"""The Document page's headline gives the document's bracket (docs/method.md §22) in the probe's
words: the near-verbatim lower bound of its least protected window, that window's p_z and the
document's b, as plain text above the map's summary; a map stored before the bound shows its
cost without it."""

from __future__ import annotations

import os

from memprobe_core.documents import map_run
from memprobe_core.documents.map_near_verbatim import BOUNDS_KEY, SETTING_KEY, MapBoundOptions
from memprobe_core.documents.map_report import bracket_line, describe_map
from memprobe_core.documents.windows import MapOptions
from memprobe_core.store import Store
from tests.app.conftest import open_page
from tests.app.test_app_document import DOCUMENT
from tests.helpers.tiny_models import tiny_hf_generator


def bounded_map() -> int:
    victim = tiny_hf_generator(seed=7, adds_bos=True)
    store = Store(os.environ["MEMPROBE_STORE"])
    run_id = map_run.start_map(
        store,
        DOCUMENT,
        victim,
        name="<b>book</b>.md",
        victim_name="tiny <i>victim</i>",
        options=MapOptions(8, 8, 8, 8),
        pz=map_run.PzSetting(top_k=0),
        bound=MapBoundOptions(windows=1, edits=1),
    )
    map_run.run_map(store, run_id, victim)
    return run_id


def _texts(at) -> list[str]:
    return [t.value for t in at.text]


def test_the_headline_gives_the_bracket_of_the_least_protected_window() -> None:
    run_id = bounded_map()
    at = open_page("pages/6_Document.py")
    assert not at.exception and not at.error, [e.value for e in at.error]
    stored = map_run.read_map(Store(os.environ["MEMPROBE_STORE"]), run_id)
    line = bracket_line(stored)
    assert line is not None and line.startswith("Extraction risk (temperature 1): at least ")
    (window,) = stored.near_verbatim
    assert f"window {window['window']} (suffix tokens" in line
    shown = _texts(at)
    assert line in shown
    # Above the summary, which repeats it among the map's lines.
    summary = describe_map(stored)
    assert shown.index(line) < shown.index(summary) and line in summary


def test_a_map_stored_before_the_bound_shows_its_cost_without_a_bracket() -> None:
    run_id = bounded_map()
    store = Store(os.environ["MEMPROBE_STORE"])
    config = store.get_run(run_id)["config"]
    del config[SETTING_KEY], config[BOUNDS_KEY]
    store.update_run(run_id, config=config)
    at = open_page("pages/6_Document.py")
    assert not at.exception and not at.error
    assert not any(t.startswith("Extraction risk") for t in _texts(at))
    assert {m.label: m.value for m in at.metric}["Extraction cost b"].endswith(" bits")
