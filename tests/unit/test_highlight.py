"""The overlap view highlights exactly the tokens Mem counts, and escapes every text."""

from __future__ import annotations

import random

import pytest
from rapidfuzz.distance import LCSseq

from memprobe_core.config import ScoringConfig
from memprobe_core.highlight import Segment, overlap, segments_to_html, word_spans
from memprobe_core.metrics import mem, rouge_tokens


def _joined(segments: list[Segment]) -> str:
    return "".join(s.text for s in segments)


@pytest.mark.parametrize("tokenizer", ["rouge", "unicode"])
@pytest.mark.parametrize(
    "text",
    [
        "The quick brown fox, jumping over lazy dogs!",
        "Café 東京 naïve résumé — İstanbul KELVIN Kelvin-sign x_y 3.14",
        "  leading and trailing\nnew lines\t\ttabs  ",
        "",
        "<img src=x onerror=alert(1)>",
    ],
)
def test_word_spans_give_the_scoring_tokens(text: str, tokenizer: str) -> None:
    spans = word_spans(text, stemmer=True, tokenizer=tokenizer)
    flat = [t for _, _, toks in spans for t in toks]
    assert flat == rouge_tokens(text, stemmer=True, tokenizer=tokenizer)
    for start, end, _ in spans:
        assert 0 <= start < end <= len(text)


def test_highlight_counts_equal_mem_recall_on_random_texts() -> None:
    rng = random.Random(7)
    words = [
        "the",
        "a",
        "of",
        "running",
        "runs",
        "ran",
        "data",
        "model",
        "42",
        "memory",
        "Memories;",
        "copied,",
        "text.",
    ]
    config = ScoringConfig()
    for _ in range(200):
        suffix = " ".join(rng.choice(words) for _ in range(rng.randint(0, 30)))
        output = " ".join(rng.choice(words) for _ in range(rng.randint(0, 30)))
        ov = overlap(output, suffix, config)
        assert _joined(ov.output_segments) == output
        assert _joined(ov.suffix_segments) == suffix
        assert ov.recall == pytest.approx(mem(output, suffix, config))
        # Highlighted tokens on each side are the LCS length, and they read the same in order.
        marked_out = [t for s in ov.output_segments if s.in_lcs for t in rouge_tokens(s.text)]
        marked_suf = [t for s in ov.suffix_segments if s.in_lcs for t in rouge_tokens(s.text)]
        assert marked_out == marked_suf
        assert (
            len(marked_out)
            == ov.lcs_tokens
            == LCSseq.similarity(rouge_tokens(output), rouge_tokens(suffix))
        )


def test_known_overlap_marks_the_copied_words_only() -> None:
    ov = overlap("We the People of Mars", "We the People of the United States", ScoringConfig())
    assert ov.lcs_tokens == 4
    assert [s for s in ov.output_segments if s.in_lcs] == [Segment("We the People of", True)]
    assert ov.output_segments[-1] == Segment(" Mars", False)


def test_output_window_keeps_the_unscored_rest_apart() -> None:
    config = ScoringConfig(output_window="first")
    ov = overlap("one two three four five", "one two three", config, suffix_tokens=3)
    assert _joined(ov.output_segments) == "one two three"
    assert ov.output_rest.split() == ["four", "five"]
    assert ov.lcs_tokens == 3


def test_segments_to_html_escapes_markup() -> None:
    payload = '<img src=x onerror=alert(1)> "quoted" & more'
    html_out = segments_to_html([Segment(payload, True), Segment("<script>x</script>", False)])
    assert "<img" not in html_out and "<script" not in html_out
    assert "&lt;img src=x onerror=alert(1)&gt;" in html_out
    assert "&quot;quoted&quot; &amp; more" in html_out
    assert html_out.startswith("<mark ")


def test_markdown_escape_leaves_nothing_to_interpret() -> None:
    from memprobe_core.highlight import markdown_escape

    text = "**bold** <img src=x> $x$ :red[y] [l](u) `c` # h"
    escaped = markdown_escape(text)
    assert escaped.replace("\\", "") == text.replace("\\", "")
    for char in "*<>$:[]()`#":
        assert char not in escaped.replace("\\" + char, "")
