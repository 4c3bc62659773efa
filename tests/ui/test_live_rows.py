"""The live panel's reading of a batch being written (ui_common.live_view)."""

from __future__ import annotations

from memprobe_core.models.live import LiveBatch, LiveRow
from ui_common.live_view import TAIL_CHARS, headline, rows_frame, streaming


def _batch(role: str, rows: list[LiveRow], *, closed: bool = False, scorer=None) -> LiveBatch:
    return LiveBatch(role, tuple(rows), 50, 10.0, 14.4, 3, closed=closed, scorer=scorer)


def test_headline_says_who_writes_how_far_and_how_many_ended() -> None:
    batch = _batch("victim", [LiveRow("p", "a b", 12, False), LiveRow("q", "c", 50, True)])
    assert headline(batch) == (
        "Victim writing 2 answers · 50 of 50 tokens · 1 of 2 ended · 4 s into this batch"
    )
    one = _batch("attacker", [LiveRow("", "What", 3, False)])
    assert headline(one).startswith("Attacker writing 1 prompt · 3 of 50 tokens ·")


def test_rows_show_the_end_of_long_texts_and_the_running_scores() -> None:
    long_text = "word " * 100 + "END"
    scores = {0: {"Mem": 0.12345, "LCS_P": 0.5}}
    batch = _batch(
        "victim",
        [LiveRow("a prompt", long_text, 40, False)],
        scorer=lambda i, text: scores[i] if text == long_text else {},
    )
    frame = rows_frame(batch)
    cell = frame["written so far"][0]
    assert cell.endswith("END") and cell.startswith("…") and len(cell) == TAIL_CHARS
    assert frame["Mem so far"][0] == 0.123 and frame["LCS_P"][0] == 0.5
    assert list(frame.columns) == [
        "#",
        "prompt",
        "written so far",
        "tokens",
        "Mem so far",
        "LCS_P",
        "ended",
    ]


def test_samples_of_one_request_have_no_prompt_column_and_a_closed_batch_is_not_streaming() -> None:
    batch = _batch("attacker", [LiveRow("", "Please recite", 2, False)])
    assert "prompt" not in rows_frame(batch).columns
    assert streaming(batch)
    assert not streaming(_batch("attacker", [], closed=True)) and not streaming(None)


def test_a_state_scores_each_row_once_however_often_it_is_read() -> None:
    calls: list[int] = []

    def scorer(index: int, text: str) -> dict[str, float]:
        calls.append(index)
        return {"Mem": 0.0}

    batch = _batch(
        "victim", [LiveRow("p", "a", 1, False), LiveRow("q", "b", 1, False)], scorer=scorer
    )
    for _ in range(3):
        rows_frame(batch)
    assert calls == [0, 1]
