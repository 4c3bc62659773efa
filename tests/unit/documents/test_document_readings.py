"""How a document run reads (issue 52): a map's windows written back whole and in part counted in
the grid's words, a p_z "median" over one window printed as the one value it is, a turn's answer
set beside the document's words it should reproduce, and the estimate before a run."""

from __future__ import annotations

import dataclasses
import html

import pytest

from memprobe_core.documents import estimate as est
from memprobe_core.documents import extraction_map as xm
from memprobe_core.documents import map_run
from memprobe_core.documents.continuation import ContinuationOptions, Turn
from memprobe_core.documents.continuation_report import PASSAGE_MIN_WORDS, expected_text
from memprobe_core.documents.continuation_run import StoredContinuation
from memprobe_core.documents.map_report import (
    NONE_WORDS,
    PART_WORDS,
    WHOLE_WORDS,
    describe_map,
    pz_line,
    text_view_legend,
    written_back,
    written_back_legend,
)
from memprobe_core.documents.nv_recall import NvRecall
from memprobe_core.documents.windows import MapOptions


def window(index: int, matched: int, suffix_start: int, n: int = 4, log10_pz=None):
    return xm.WindowScore(
        index=index,
        start=suffix_start - n,
        suffix_start=suffix_start,
        suffix_tokens=n,
        match_tokens=matched,
        extractable=matched == n,
        greedy_ids=(),
        pz={} if log10_pz is None else {"log10_p_z": log10_pz},
    )


def stored_map(scores, tokens: int = 40) -> map_run.StoredMap:
    return map_run.StoredMap(
        run_id=1,
        status="finished",
        name="d",
        victim="v",
        text="x",
        document_tokens=tokens,
        options=MapOptions(4, 4, 4),
        pz=map_run.PzSetting(),
        scores=scores,
        texts={},
        windows_total=len(scores),
        errors=0,
    )


# --- the map's headline -----------------------------------------------------------------------


def test_windows_written_back_whole_and_in_part_are_counted_apart_worked_by_hand():
    # Suffixes at tokens 4-7, 8-11, 12-15, 16-19: all, the first 3, the first 1, none written back.
    scores = [window(0, 4, 4), window(1, 3, 8), window(2, 1, 12), window(3, 0, 16)]
    w = written_back(stored_map(scores, tokens=40))
    assert (w.windows, w.whole, w.part, w.none) == (4, 1, 2, 1)
    assert (w.whole_tokens, w.part_tokens, w.suffix_tokens) == (4, 4, 4)
    assert w.share(w.part_tokens) == pytest.approx(0.1)
    # A token inside a whole window's suffix is not counted again as written in part.
    overlapping = [window(0, 4, 4), window(1, 2, 6)]  # the second's suffix starts inside the first
    assert written_back(stored_map(overlapping)).part_tokens == 0


def test_the_summary_names_partly_written_windows_in_the_grids_words():
    # The auditor's case: no window whole, most coloured on the grid.
    scores = [window(i, 2 if i % 2 else 0, 4 + 4 * i) for i in range(6)]
    text = describe_map(stored_map(scores))
    assert f"0 {WHOLE_WORDS}" in text
    assert f"3 {PART_WORDS}" in text
    assert f"3 {NONE_WORDS}" in text
    assert "(4 suffix tokens each)" in text  # what "whole" means
    # The same words as the text view's legend (one source).
    for words in (WHOLE_WORDS, PART_WORDS, NONE_WORDS):
        assert words in html.unescape(str(text_view_legend()))
    legend = str(written_back_legend(written_back(stored_map(scores))))
    assert f"3 {PART_WORDS}" in html.unescape(legend)


def test_the_html_reports_legend_uses_the_same_words(tmp_path):
    from memprobe_core.documents.map_report import map_html

    scores = [window(i, 2 if i % 2 else 0, 4 + 4 * i) for i in range(4)]
    report = html.unescape(map_html(stored_map(scores)))
    for words in (WHOLE_WORDS, PART_WORDS, NONE_WORDS):
        assert words in report
    assert f"2 {PART_WORDS}" in report  # the summary's count


def test_a_p_z_over_one_window_is_printed_as_that_windows_value_not_a_range():
    one = stored_map([window(0, 0, 4, log10_pz=-8.36), window(1, 0, 8)])
    line = pz_line(one)
    assert "-8.36" in line and "percentile" not in line and "median" not in line
    assert "the one window with p_z > 0" in line and "1 of 2 windows have p_z = 0" in line
    assert "percentile" not in describe_map(one)
    several = stored_map([window(i, 0, 4 + 4 * i, log10_pz=-float(i + 1)) for i in range(3)])
    line = pz_line(several)
    assert "over the 3 windows with p_z > 0: median -2.00 (10th–90th percentile" in line


# --- a turn beside the words it should reproduce ----------------------------------------------

DOCUMENT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the "
    "season of Light, it was the season of Darkness"
)


def stored_continuation(turns) -> StoredContinuation:
    return StoredContinuation(
        run_id=1,
        status="finished",
        name="d",
        victim="v",
        text=DOCUMENT,
        options=ContinuationOptions(opening_words=6, heldback_words=8),
        turns=turns,
        stop_reason=None,
        generated_text="",
        score=NvRecall(0.0, 0, 0, 0, ()),
    )


def turn(phase, output):
    return Turn(
        index=0, phase=phase, attempt=0 if phase == 1 else 1, request_text="", output=output
    )


def test_a_phase_1_answer_is_read_against_the_held_back_words():
    t = turn(1, "it was the worst of times, it was")
    expected = expected_text(stored_continuation([t]), t)
    assert expected is not None
    assert expected.text == "it was the worst of times, it was"  # words 7-14
    assert "held-back words 7–14" in expected.label


def test_a_phase_2_answer_is_read_against_the_passage_it_reproduces():
    t = turn(2, "blah it was the EPOCH of belief, it was the epoch of doubt")
    expected = expected_text(stored_continuation([t]), t)
    assert expected is not None
    # Its longest run starts at its 2nd word, at the document's 25th ("it was the epoch…"):
    # the passage starts one word before, as long as the answer (13 words).
    assert expected.text.split()[1:4] == ["it", "was", "the"]
    assert len(expected.text.split()) == 13
    assert expected.text.startswith("foolishness, it was the epoch of belief")
    assert "document words 24–36" in expected.label
    # An answer with no run of PASSAGE_MIN_WORDS document words has no passage.
    stray = turn(2, "completely unrelated words about something " * 2)
    assert expected_text(stored_continuation([stray]), stray) is None
    assert PASSAGE_MIN_WORDS == 5


# --- the estimate before a run ----------------------------------------------------------------


def test_a_maps_estimate_comes_from_the_earlier_windows_and_includes_loading_and_the_load():
    options = MapOptions(50, 50, 50, 16)
    timings = [(1.0, 100), (2.0, 100), (3.0, 200)]  # 0.01, 0.02, 0.015 s per token
    e = est.estimate_map(timings, windows=45, options=options, model_loaded=True, cores=2, free=2.0)
    assert e.seconds == pytest.approx(45 * 1.5) and e.load_factor == 1
    assert e.first_s == pytest.approx(16 * 1.5)  # the first batch lands whole
    assert e.measured_from == 3
    # Not loaded yet, and both cores busy with other work: loading counted, all doubled.
    busy = est.estimate_map(
        timings, windows=45, options=options, model_loaded=False, cores=2, free=0.0
    )
    assert busy.seconds == pytest.approx(2 * (est.ROUGH_LOAD_S + 45 * 1.5))
    assert busy.first_s == pytest.approx(2 * (est.ROUGH_LOAD_S + 16 * 1.5))
    # No earlier map: the rough rate, and the words say it is rough.
    rough = est.estimate_map([], windows=45, options=options, model_loaded=True, cores=2, free=2)
    assert rough.seconds == pytest.approx(45 * 100 * est.ROUGH_WINDOW_TOKEN_S)
    words = est.describe_estimate(
        rough, what="45 windows", first="the first 16 windows show", source="x", cores=2, free=2
    )
    assert "rough: no earlier run of this victim" in words
    words = est.describe_estimate(
        busy, what="45 windows", first="the first 16 windows show", source="v's 3", cores=2, free=0
    )
    assert "measured from v's 3" in words and "×2.0 for the load now (2.0 of 2 cores busy" in words
    assert "loading the model included" in words


def test_the_load_factor_shares_the_cpu_out():
    assert est.load_factor(2, None) == 1
    assert est.load_factor(2, 2.5) == 1
    assert est.load_factor(2, 1.0) == 1.5
    assert est.load_factor(2, 0.0) == 2
    assert est.load_factor(2, -1.0) == 2


def test_a_continuations_estimate_is_an_upper_bound_from_its_budgets():
    paper = ContinuationOptions()
    assert est.most_tokens(paper) == 51 * 512  # 50 turns and the opening, under 200,000
    quick = ContinuationOptions(max_turns=3, turn_tokens=256, max_tokens=2_000)
    assert est.most_tokens(quick) == 1024
    e = est.estimate_continuation(
        [(10.0, 100), (30.0, 100)], options=quick, model_loaded=True, cores=2, free=2.0
    )
    assert e.most and e.seconds == pytest.approx(1024 * 0.2)
    assert e.first_s == pytest.approx(256 * 0.2)
    assert "at most about 3 min 25 s" in est.describe_estimate(
        e, what="at most 1,024 tokens", first="the opening shows", source="s", cores=2, free=2
    )


def test_window_count_and_token_count_read_earlier_maps():
    options = MapOptions(50, 50, 50)
    assert est.window_count(2339, options) == 45  # the built-in licence on Gemma
    assert est.window_count(99, options) == 0
    import hashlib

    text = "a b c d"
    same = {"document": {"sha256": hashlib.sha256(text.encode()).hexdigest(), "tokens": 9}}
    other = {"document": {"sha256": "x", "tokens": 30, "words": 10}}
    assert est.document_tokens([other, same], text) == (9, True)
    assert est.document_tokens([other], text) == (12, False)  # 4 words × 3 tokens a word
    assert est.document_tokens([], text) == (round(4 * est.ROUGH_TOKENS_PER_WORD), False)


def test_the_timings_are_read_from_stored_units():
    runs = [
        {
            "units": [
                {"status": "done", "length": 100, "costs": {"wall_seconds": 1.5}},
                {"status": "pending", "length": 100, "costs": {}},
            ]
        }
    ]
    assert est.map_window_seconds(runs) == [(1.5, 100)]
    turns = [{"units": [{"status": "done", "verbatim": {"turn": {"seconds": 4.0, "tokens": 20}}}]}]
    assert est.continuation_token_seconds(turns) == [(4.0, 20)]


def test_durations_read_as_a_reader_plans():
    assert est.duration(42.4) == "42 s"
    assert est.duration(200) == "3 min 20 s"
    assert est.duration(1500) == "25 min"
    assert est.duration(7500) == "2 h 5 min"


def test_estimates_are_frozen():
    e = est.RunEstimate(1.0, 1.0, 0.0, 0, 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.seconds = 2.0  # type: ignore[misc]
