"""The document by extraction cost (docs/method.md §21): each token's minimum b from the stored
rank-cost record, cut into spans that tile the text, in the HTML report with every character
escaped and a legend in words; the headline's b rounded down."""

from __future__ import annotations

import dataclasses
import math
import re

from memprobe_core.documents import map_run
from memprobe_core.documents.map_report import (
    COST_BANDS,
    CostSpan,
    cost_headline,
    cost_spans,
    cost_view_legend,
    map_html,
)
from memprobe_core.documents.rank_cost import stored_factors
from memprobe_core.documents.windows import MapOptions
from memprobe_core.measuring.inextractability import token_min_bits

HOSTILE = '<img src=x onerror=alert(1)>"&'


def stored(text: str, factors: list[float], *, first: int = 0, l: int = 2):  # noqa: E741
    starts = tuple(m.start() for m in re.finditer(r"\S+", text))
    record = {
        "extraction_bits": -max(
            sum(factors[i : i + l]) for i in range(len(factors) - min(l, len(factors)) + 1)
        ),
        "extraction_windows": len(factors) - l + 1,
        "extraction_window_tokens": l,
        "extraction_worst_window": [0, l],
        "greedy_extractable_rate": 0.0,
        "rank_cap": 20,
        "window_tokens": l,
        "first_ranked_token": first,
        "token_log2_bounds": stored_factors(factors),
    }
    return dataclasses.replace(
        map_run.StoredMap(
            run_id=1,
            status="finished",
            name=HOSTILE,
            victim=HOSTILE,
            text=text,
            document_tokens=len(starts),
            options=MapOptions(2, 2, 2),
            pz=map_run.PzSetting(),
            scores=[],
            texts={},
            windows_total=0,
            errors=0,
        ),
        token_starts=starts,
        rank_cost=record,
    )


def test_the_spans_tile_the_text_and_carry_each_tokens_cheapest_window():
    text = "one two three four five"
    factors = [0.0, -1.0, -30.0, -30.0, 0.0]
    spans = cost_spans(stored(text, factors))
    assert spans is not None
    assert "".join(s.text for s in spans) == text
    # Windows of 2: b = 1, 31, 60, 30; a token's minimum over the (one or two) holding it.
    expected = token_min_bits(factors, 2)
    assert expected == [1.0, 1.0, 31.0, 30.0, 30.0]
    assert [(s.text, s.bits) for s in spans] == [
        ("one two ", 1.0),
        ("three ", 31.0),
        ("four five", 30.0),
    ]


def test_a_token_nothing_ranks_is_its_own_span_and_says_so():
    spans = cost_spans(stored("a b c", [0.0, 0.0], first=1))
    assert spans is not None and spans[0] == CostSpan("a ", math.inf)
    assert spans[0].band is None and spans[1].band == 0


def test_each_band_is_named_in_words_in_the_legend():
    legend = str(cost_view_legend(50))
    assert "windows of 50 tokens" in legend
    for _, words in COST_BANDS:
        assert words in legend


def test_the_html_report_colours_the_document_by_cost_with_every_character_escaped():
    text = " ".join([HOSTILE] * 4)
    report = map_html(stored(text, [-0.5, -3.0, -12.0, -50.0]))
    assert "The document by extraction cost" in report
    assert "<img" not in report and "&lt;img src=x onerror=alert(1)&gt;" in report
    assert "b = 3.5 bits: the cheapest window" in report  # -(-0.5 - 3.0)
    assert "no decoding needs fewer than 2^10 (about a thousand) tries" in report


def test_a_run_without_the_per_token_record_has_no_cost_view():
    plain = stored("a b c", [0.0, 0.0, 0.0])
    old = dataclasses.replace(
        plain, rank_cost={k: v for k, v in plain.rank_cost.items() if k != "token_log2_bounds"}
    )
    assert cost_spans(old) is None
    assert "The document by extraction cost" not in map_html(old)


def test_the_headline_rounds_b_down_and_says_what_is_missing():
    assert cost_headline({"extraction_bits": 12.39, "extraction_windows": 3}) == (
        "12.3 bits",
        "no decoding needs fewer than 2^12.3 tries",
    )
    assert cost_headline(None)[0] == "–"
    assert cost_headline({"extraction_bits": None, "extraction_windows": 3})[0] == "∞"
