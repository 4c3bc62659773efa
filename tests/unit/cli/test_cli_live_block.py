"""`memprobe probe` on a terminal: the answers being written, under the round table."""

from __future__ import annotations

import io

from memprobe_core.attacks.events import RoundStarted
from memprobe_core.cli.output import LiveTable, writing_lines
from memprobe_core.models.fake import FakeGenerator
from memprobe_core.models.live import LiveBatch, LiveRow, LiveTap, watching, writing

ERASE = "\x1b[J"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _publish(tap: LiveTap, texts: list[str], *, closed: bool = False) -> None:
    rows = tuple(LiveRow("", t, len(t.split()), closed) for t in texts)
    tap.publish(LiveBatch("victim", rows, 40, 0.0, 1.0, 0, closed=closed))


def test_the_block_shows_each_row_and_is_erased_before_a_scored_row():
    out, tap = Terminal(), LiveTap()
    table = LiveTable(out, tap)
    _publish(tap, ["The quick brown", "Lorem ipsum"])
    table.draw()
    shown = out.getvalue()
    assert "victim writing 2 row(s)" in shown and "The quick brown" in shown
    table(RoundStarted(round=1, n=2))  # a row of the table: the block goes first
    after = out.getvalue()[len(shown) :]
    assert after.startswith("\x1b[3F" + ERASE) and "round 1" in after
    table.draw()  # the same batch again: drawn again under the new row
    assert out.getvalue().count("The quick brown") == 2


def test_an_unchanged_batch_is_not_redrawn_and_a_closed_one_is_erased():
    out, tap = Terminal(), LiveTap()
    table = LiveTable(out, tap)
    _publish(tap, ["one two"])
    table.draw()
    drawn = out.getvalue()
    table.draw()
    assert out.getvalue() == drawn
    _publish(tap, ["one two three"], closed=True)
    table.draw()
    assert out.getvalue() == drawn + "\x1b[2F" + ERASE


def test_not_on_a_terminal_only_the_rows_are_printed():
    out, tap = io.StringIO(), LiveTap()
    model = FakeGenerator("victim", latency_s=1.2)
    with watching(tap), LiveTable(out, tap, refresh_s=0.05) as table:
        with writing("victim", ["p"]):
            model.generate(["Once upon a time"], max_new_tokens=20)
        table(RoundStarted(round=0, n=1))
    assert "\x1b" not in out.getvalue() and out.getvalue().startswith("round 0")


def test_on_a_terminal_the_refresher_draws_while_the_model_writes_and_leaves_no_block():
    out, tap = Terminal(), LiveTap()
    model = FakeGenerator("victim", latency_s=1.2)
    with watching(tap), LiveTable(out, tap, refresh_s=0.05), writing("victim", ["p"]):
        (answer,) = model.generate(["Once upon a time"], max_new_tokens=20)
    text = out.getvalue()
    words = answer[0].text.split()
    assert "victim writing 1 row(s)" in text
    assert text.count(ERASE) >= 2  # redrawn as it grew, and erased at the end
    assert any(" ".join(words[:k]) in text for k in range(1, len(words)))
    assert text.endswith(ERASE)


def test_lines_are_terminal_safe_and_fit_the_width():
    rows = (LiveRow("", "\x1b]0;pwned\x07 " + "word " * 50, 30, False),) * 5
    batch = LiveBatch("victim", rows, 40, 0.0, 1.0, 1, scorer=lambda i, t: {"Mem": 0.5})
    lines = writing_lines(batch, width=60, height=4)
    assert all(len(line) <= 60 for line in lines)
    assert all("\x1b" not in line for line in lines)
    assert lines[-1] == "  … and 3 more row(s)" and "Mem 0.500" in lines[1]


def test_memprobe_probe_on_a_terminal_shows_the_answers_being_written(tmp_path, monkeypatch):
    import sys

    from memprobe_core import models as models_pkg
    from memprobe_core.cli import main

    monkeypatch.setattr(
        models_pkg,
        "load",
        lambda name, **kw: FakeGenerator("victim", latency_s=1.5, model_id=name),
        raising=False,
    )
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    words = " ".join(f"w{i}" for i in range(60))
    argv = ["--store", str(tmp_path / "runs.sqlite"), "probe", words, "--method", "ps_inst"]
    assert main([*argv, "--length", "30", "--victim", "test-v", "--base", "test-b"]) == 0
    shown = terminal.getvalue()
    assert "victim writing 1 row(s)" in shown and ERASE in shown
    assert "Mem 0." in shown  # the result follows, with the block erased before it
