"""The document's near-verbatim lower bound (docs/method.md §19, §22): measured on the map's N
windows with the highest p_z once every window is scored, never below those windows' p_z, kept
with the run so a resume redoes none and a reread gets it, and a map stored before it still
shown with its rank cost alone; on a tiny random model."""

from __future__ import annotations

import pytest

from memprobe_core.documents import map_near_verbatim as mnv
from memprobe_core.documents import map_run
from memprobe_core.documents.map_report import describe_map, map_html, map_json
from memprobe_core.errors import OptionError
from memprobe_core.store import Store
from tests.helpers.tiny_models import tiny_hf_generator
from tests.unit.documents.test_extraction_map import SMALL, looping_document

# No top-k: every token has a probability above 0 under the scheme, so every window's p_z does.
PLAIN = map_run.PzSetting(top_k=0)


@pytest.fixture(scope="module")
def victim():
    return tiny_hf_generator(seed=5, adds_bos=True)


@pytest.fixture(scope="module")
def text(victim):
    return looping_document(victim)


def mapped(victim, text, tmp_path, bound, pz=PLAIN):
    store = Store(tmp_path / "runs.sqlite")
    run_id = map_run.start_map(
        store, text, victim, name="doc.txt", victim_name="tiny", options=SMALL, pz=pz, bound=bound
    )
    return store, run_id


def top_by_p_z(scores, n):
    """The n windows with the highest p_z, ties to the earliest, worked out apart."""
    ranked = sorted(scores, key=lambda s: (-s.pz["log10_p_z"], s.index))
    return [s.index for s in ranked[:n]]


def test_the_top_n_windows_by_p_z_are_measured_and_each_bound_is_at_least_its_p_z(
    victim, text, tmp_path
):
    store, run_id = mapped(victim, text, tmp_path, mnv.MapBoundOptions(windows=3, edits=2))
    done = map_run.run_map(store, run_id, victim)
    assert done.status == "finished"
    measured = [r["window"] for r in done.near_verbatim]
    assert sorted(measured) == sorted(top_by_p_z(done.scores, 3))
    p_z = {s.index: s.pz["log10_p_z"] for s in done.scores}
    for record in done.near_verbatim:
        assert record["log10_p_z"] == p_z[record["window"]]
        assert record["near_verbatim_edits"] == 2 and record["near_verbatim_beam_width"] == 20
        # Within 2 edits more sequences count than the suffix alone: strictly above p_z.
        assert record["near_verbatim_log10_lower"] > record["log10_p_z"]
    # The document's bound: the highest of the three, and the window it is from.
    shown = map_json(done)
    highest = max(done.near_verbatim, key=lambda r: r["near_verbatim_log10_lower"])
    assert shown["near_verbatim_log10_lower"] == highest["near_verbatim_log10_lower"]
    assert shown["near_verbatim_window"] == highest["window"]
    assert len(shown["near_verbatim_windows"]) == 3


def test_with_no_edits_the_bound_is_the_windows_p_z(victim, text, tmp_path):
    store, run_id = mapped(victim, text, tmp_path, mnv.MapBoundOptions(windows=2, edits=0))
    done = map_run.run_map(store, run_id, victim)
    for record in done.near_verbatim:
        assert record["near_verbatim_log10_lower"] >= record["log10_p_z"] - 1e-6
        assert record["near_verbatim_log10_lower"] == pytest.approx(record["log10_p_z"], abs=1e-4)


def test_a_killed_bound_resumes_without_redoing_a_finished_window(
    victim, text, tmp_path, monkeypatch
):
    store, run_id = mapped(victim, text, tmp_path, mnv.MapBoundOptions(windows=3, edits=1))
    real = mnv.near_verbatim_bound
    calls = []
    kill = [True]

    def killed_on_the_second(*args, **kwargs):
        calls.append(1)
        if kill[0] and len(calls) == 2:
            kill[0] = False
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(mnv, "near_verbatim_bound", killed_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        map_run.run_map(store, run_id, victim)
    kept = map_run.read_map(store, run_id)
    assert len(kept.near_verbatim) == 1 and kept.status == "interrupted"
    calls.clear()
    done = map_run.run_map(store, run_id, victim)
    assert len(calls) == 2  # the two windows left, not the one kept
    assert done.status == "finished" and len(done.near_verbatim) == 3
    assert kept.near_verbatim[0] in done.near_verbatim
    calls.clear()
    map_run.run_map(store, run_id, victim)
    assert calls == []  # every bound is stored: nothing is measured again


def test_a_cancelled_bound_leaves_the_run_interrupted_and_a_resume_finishes_it(
    victim, text, tmp_path
):
    import threading

    store, run_id = mapped(victim, text, tmp_path, mnv.MapBoundOptions(windows=1))
    cancel = threading.Event()

    def cancel_once_scored(progress):
        if progress.done == progress.total:  # Stop pressed after the last batch
            cancel.set()

    first = map_run.run_map(store, run_id, victim, on_progress=cancel_once_scored, cancel=cancel)
    assert first.status == "interrupted" and first.near_verbatim == ()
    assert len(first.scores) == first.windows_total  # the windows were all scored
    done = map_run.run_map(store, run_id, victim)
    assert done.status == "finished" and len(done.near_verbatim) == 1


def test_zero_windows_measures_none_and_the_text_shows_no_bracket(
    victim, text, tmp_path, monkeypatch
):
    calls = []
    monkeypatch.setattr(mnv, "near_verbatim_bound", lambda *a, **k: calls.append(1))
    store, run_id = mapped(victim, text, tmp_path, mnv.MapBoundOptions(windows=0))
    done = map_run.run_map(store, run_id, victim)
    assert calls == [] and done.near_verbatim == ()
    assert map_json(done)["near_verbatim_log10_lower"] is None
    assert "Extraction risk" not in describe_map(done)


def test_the_text_and_html_show_the_documents_bracket(victim, text, tmp_path):
    store, run_id = mapped(victim, text, tmp_path, mnv.MapBoundOptions(windows=1, edits=1))
    done = map_run.run_map(store, run_id, victim)
    (record,) = done.near_verbatim
    assert record["window"] == top_by_p_z(done.scores, 1)[0]
    line = next(x for x in describe_map(done).splitlines() if x.startswith("Extraction risk"))
    assert "(temperature 1)" in line and "within 1 edit;" in line
    assert "writes it verbatim" in line and "no decoding needs fewer than 2^" in line
    assert f"window {record['window']} (suffix tokens" in line
    assert line in map_html(done)


def test_a_map_stored_before_the_bound_reads_and_shows_its_cost_alone(victim, text, tmp_path):
    store, run_id = mapped(victim, text, tmp_path, mnv.MapBoundOptions(windows=1))
    map_run.run_map(store, run_id, victim)
    config = store.get_run(run_id)["config"]
    del config[mnv.SETTING_KEY], config[mnv.BOUNDS_KEY]  # the shape of an older run
    store.update_run(run_id, config=config)
    old = map_run.read_map(store, run_id)
    assert old.near_verbatim == () and old.rank_cost
    text_out = describe_map(old)
    assert "rank-based extraction cost" in text_out and "Extraction risk" not in text_out
    shown = map_json(old)
    assert shown["near_verbatim_log10_lower"] is None and shown["near_verbatim_window"] is None
    assert shown["extraction_bits"] == old.rank_cost["extraction_bits"]
    assert "rank-based extraction cost" in map_html(old)


def test_the_document_bound_is_the_highest_measured_window_and_a_zero_bound_counts():
    records = [
        {"window": 4, "near_verbatim_log10_lower": None, "near_verbatim_edits": 1},
        {"window": 7, "near_verbatim_log10_lower": -3.5, "near_verbatim_edits": 1},
        {"window": 9, "near_verbatim_log10_lower": -3.5, "near_verbatim_edits": 1},
        {"window": 2, "near_verbatim_log10_lower": None, "near_verbatim_not_measured": "OOM"},
    ]
    found = mnv.document_bound(records)
    assert found is not None and found.log10_lower == -3.5 and found.window["window"] == 7
    assert found.measured == 3
    only_zero = mnv.document_bound(records[:1])
    assert only_zero is not None and only_zero.log10_lower is None
    assert mnv.document_bound(records[3:]) is None and mnv.document_bound([]) is None


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"windows": -1}, "windows=-1"),
        ({"windows": mnv.MAX_BOUND_WINDOWS + 1}, "windows="),
        ({"edits": 1.5}, "near_verbatim_edits"),
        ({"beams": 0}, "near_verbatim_beams"),
    ],
)
def test_bad_settings_are_refused(given, says):
    with pytest.raises(OptionError, match=says):
        mnv.MapBoundOptions(**given)


def test_windows_of_p_z_zero_come_last():
    from tests.unit.documents.test_extraction_map import hand_score

    scores = [hand_score(0, 0, None), hand_score(1, 0, -5.0), hand_score(2, 0, -2.0)]
    scores.append(hand_score(3, 0, -2.0))
    assert [s.index for s in mnv.least_protected(scores, 4)] == [2, 3, 1, 0]
    assert mnv.least_protected(scores, 0) == []
