"""Text being written, published while it is written (memprobe_core.models.live)."""

from __future__ import annotations

import threading
import time

import pytest

from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.victim import answer_victim, running_scores
from memprobe_core.metrics import lcs_p, mem
from memprobe_core.models import live
from memprobe_core.models.fake import FakeGenerator
from memprobe_core.models.live import LiveTap, open_batch, watching, writing
from tests.helpers.tiny_models import tiny_hf_generator

PROMPTS = ["Licensed under the Apache License", "We the People", "def add(a, b):"]


class Recorder:
    """Every batch the tap publishes, as a watcher polling without pause would see it."""

    def __init__(self, tap: LiveTap) -> None:
        self.tap, self.seen = tap, []
        original = tap.publish

        def publish(batch):
            stored = original(batch)
            self.seen.append(stored)
            return stored

        tap.publish = publish  # type: ignore[method-assign]


def test_nothing_is_opened_without_a_tap():
    assert open_batch(3, 1, 10, lambda ids: "") is None


def test_publishing_is_throttled_between_steps(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    tap = LiveTap()
    recorder = Recorder(tap)
    with watching(tap), writing("victim", ["p0", "p1"]):
        watch = open_batch(2, 1, 50, lambda ids: " ".join(map(str, ids)))
    assert watch is not None
    step = watch.chunk([1, 0])  # the batch holds the call's rows in another order
    out: list[list[int]] = [[], []]
    for token in range(10):  # ten steps within one publishing interval: none published
        out[0].append(token)
        clock[0] += live.PUBLISH_EVERY_S / 20
        step(out)
    assert len(recorder.seen) == 1  # the empty batch, when it opened
    clock[0] += live.PUBLISH_EVERY_S
    out[1].append(7)
    step(out)
    latest = recorder.seen[-1]
    assert len(recorder.seen) == 2
    assert [r.label for r in latest.rows] == ["p0", "p1"]
    # chunk row 0 is the call's row 1
    assert latest.rows[1].tokens == 10 and latest.rows[1].text.startswith("0 1 2")
    assert latest.rows[0].tokens == 1 and latest.rows[0].text == "7"
    assert not latest.closed
    watch.close([(0, "final zero", 3), (1, "final one", 11)])
    final = tap.snapshot()
    assert final.closed and [r.text for r in final.rows] == ["final zero", "final one"]
    assert all(r.done for r in final.rows) and final.seq > latest.seq


def test_a_row_ending_on_a_stop_id_is_done_and_the_stop_is_not_text(monkeypatch):
    tap = LiveTap()
    with watching(tap):
        watch = open_batch(1, 2, 50, lambda ids: ",".join(map(str, ids)))
    monkeypatch.setattr(live, "PUBLISH_EVERY_S", 0.0)
    step = watch.chunk([0, 1], stop_ids=[99])
    step([[5, 6, 99], [5]])
    rows = tap.snapshot().rows
    assert rows[0].done and rows[0].text == "5,6" and rows[0].tokens == 3
    assert not rows[1].done and rows[1].label == ""  # samples of one request: no label


def test_the_fake_model_writes_word_by_word_when_watched():
    tap = LiveTap()
    recorder = Recorder(tap)
    model = FakeGenerator("victim", latency_s=0.5)
    with watching(tap), writing("victim", PROMPTS):
        out = model.generate(PROMPTS, max_new_tokens=12)
    counts = [b.tokens for b in recorder.seen]
    assert len(recorder.seen) >= 3 and counts == sorted(counts) and counts[0] == 0
    assert [r.text for r in tap.snapshot().rows] == [row[0].text for row in out]


def test_hf_rows_grow_and_end_as_returned_in_both_loops(monkeypatch):
    monkeypatch.setattr(live, "PUBLISH_EVERY_S", 0.0)  # every step: the whole growth is seen
    gen = tiny_hf_generator()
    for kwargs in (
        {"max_new_tokens": 12},  # greedy, own loop
        {"max_new_tokens": 12, "references": ["under the", "of the", "return a"]},  # drafted
        {"max_new_tokens": 8, "n": 3, "temperature": 1.0, "seed": 3},  # sampled rows
    ):
        tap = LiveTap()
        recorder = Recorder(tap)
        with watching(tap):
            out = gen.generate(PROMPTS, **kwargs)
        n_rows = len(PROMPTS) * (kwargs.get("n", 1) if kwargs.get("temperature") else 1)
        final = tap.snapshot()
        assert final.closed and len(final.rows) == n_rows
        flat = [c for row in out for c in (row if kwargs.get("temperature") else row[:1])]
        assert [r.text for r in final.rows] == [c.text for c in flat]
        assert [r.tokens for r in final.rows] == [c.num_tokens for c in flat]
        for row in range(n_rows):  # each row only grows, one step at a time or a few (drafted)
            tokens = [b.rows[row].tokens for b in recorder.seen]
            assert tokens == sorted(tokens), (kwargs, tokens)
        # ... and is seen between its first token and its end, while the loop runs
        growing = {b.tokens for b in recorder.seen if not b.closed and b.tokens > n_rows}
        assert len(growing) >= 3, (kwargs, growing)


def test_a_reader_in_another_thread_sees_partial_rows():
    tap = LiveTap()
    model = FakeGenerator("victim", latency_s=0.6)
    partial: list[int] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            batch = tap.snapshot()
            if batch is not None and not batch.closed:
                partial.append(batch.tokens)
            time.sleep(0.02)

    reader = threading.Thread(target=read)
    reader.start()
    with watching(tap):
        model.generate(PROMPTS, max_new_tokens=12)
    stop.set()
    reader.join()
    assert any(0 < n < tap.snapshot().tokens for n in partial)


def test_victim_rows_carry_prompts_and_running_scores():
    from memprobe_core.snippets.corpus import demo_corpus
    from memprobe_core.snippets.split import split

    snippet = demo_corpus()[0]
    options = AttackOptions()
    model = FakeGenerator("victim", latency_s=0.2)
    piece = split(snippet, model.tokenizer, 40)
    tap = LiveTap()
    with watching(tap):
        answers = answer_victim(CostMeter(), model, PROMPTS, piece, options, as_chat=False)
    batch = tap.snapshot()
    assert batch.role == "victim" and [r.label for r in batch.rows] == PROMPTS
    for i, answer in enumerate(answers):
        scores = batch.scores(i)
        assert scores["Mem"] == pytest.approx(mem(answer.text, piece.suffix, options.scoring))
        assert scores["LCS_P"] == pytest.approx(lcs_p(PROMPTS[i], piece.suffix, options.scoring))
    # the scorer of a prompt the call did not have scores its text and no prompt
    assert running_scores(piece, options, [])(5, piece.suffix)["Mem"] == pytest.approx(1.0)


def test_the_attacker_loop_publishes_its_prompts_growing_with_their_lcs_p(monkeypatch):
    """The browser test cannot always catch the attacker's short prompts between two polls; here
    the reader sees every step of the attacker loop's own calls (init and refine)."""
    from memprobe_core.attacks import ModelSet, run_interactive
    from memprobe_core.attacks.options import InteractiveOptions
    from tests.helpers.scripted_models import make_split

    monkeypatch.setattr(live, "PUBLISH_EVERY_S", 0.0)
    tap = LiveTap()
    recorder = Recorder(tap)
    attacker = FakeGenerator("attacker", latency_s=0.05)
    options = AttackOptions(seed=3, interactive=InteractiveOptions(rounds=1, n_candidates=3))
    models = ModelSet(victim=FakeGenerator("victim"), attacker=attacker)
    with watching(tap):
        run_interactive(make_split(), models, options)
    attacker_batches = [b for b in recorder.seen if b.role == "attacker"]
    growing = {b.tokens for b in attacker_batches if not b.closed}
    assert len(growing) >= 2, growing  # seen at two or more token counts while being written
    written = next(b for b in reversed(attacker_batches) if b.tokens)
    assert all("LCS_P" in written.scores(i) for i in range(len(written.rows)))
