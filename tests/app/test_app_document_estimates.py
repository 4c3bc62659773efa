"""The Document page before Run (issue 52): an estimate of the run on this machine, from this
victim's earlier runs in the store once it has some; a continuation that starts from budgets a
CPU gets through (Quick) unless a GPU is found, the paper's one click away; and a turn's answer
shown beside the document's words it should reproduce."""

from __future__ import annotations

import os
import re

from memprobe_core.documents import continuation_run
from memprobe_core.documents.continuation import ContinuationOptions
from memprobe_core.models import load
from memprobe_core.store import Store
from tests.app.conftest import open_page, texts
from ui_common import models
from ui_common.document_view import CONTINUATION_SIZES


def _estimate(at) -> str:
    (line,) = [c.value for c in at.caption if c.value.startswith("Estimate for")]
    return re.sub(r"\\(.)", r"\1", line)


def test_a_continuation_starts_from_the_quick_size_on_a_cpu_and_says_how_long(
    monkeypatch,
) -> None:
    monkeypatch.setattr(models, "_LOADED", set())  # no model loaded yet in this process
    at = open_page("pages/6_Document.py")
    at.radio(key="doc_mode").set_value("continue").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.radio(key="doc_cont_size").value == "quick"  # no GPU here
    boxes = {k: at.number_input(key=f"doc_{k}").value for k in CONTINUATION_SIZES["quick"]}
    assert boxes == {"max_turns": 3, "turn_tokens": 256, "max_tokens": 2_000}
    line = _estimate(at)
    assert line.startswith("Estimate for at most 1,024 tokens: at most about ")
    assert "loading the model included" in line and "rough: no earlier run" in line
    # The paper's budgets are one click away, and the estimate follows them.
    at.radio(key="doc_cont_size").set_value("paper").run()
    boxes = {k: at.number_input(key=f"doc_{k}").value for k in CONTINUATION_SIZES["paper"]}
    assert boxes == {"max_turns": 50, "turn_tokens": 512, "max_tokens": 200_000}
    assert _estimate(at).startswith(f"Estimate for at most {51 * 512:,} tokens")


def test_a_maps_estimate_says_its_windows_and_is_measured_once_the_victim_has_mapped() -> None:
    at = open_page("pages/6_Document.py")
    assert not at.exception
    line = _estimate(at)
    # The built-in licence: 1,590 words, about 2,306 tokens at the rough 1.45 tokens a word.
    assert line.startswith("Estimate for about 45 windows: about ")
    assert "the first 16 windows (one batch) show after about" in line
    assert "rough: no earlier run of this victim in this store" in line
    assert "maps in about 30 s" not in texts(at)


def test_an_estimate_after_one_turn_is_measured_from_it() -> None:
    store = Store(os.environ["MEMPROBE_STORE"])
    victim = load("fake")
    text = " ".join(f"w{i}" for i in range(60))
    options = ContinuationOptions(opening_words=5, heldback_words=10, max_turns=1, turn_tokens=8)
    at = open_page("pages/6_Document.py")
    run_id = continuation_run.start_continuation(
        store, text, victim, name="d", victim_name=_victim_label(at), options=options
    )
    continuation_run.run_continuation_stored(store, run_id, victim)
    at.radio(key="doc_mode").set_value("continue").run()
    assert not at.exception
    assert f"measured from {_victim_label(at)}'s 1 earlier turn in this store" in _estimate(at)


def _victim_label(at) -> str:
    lines = [re.sub(r"\\(.)", r"\1", c.value) for c in at.sidebar.caption]
    (line,) = [x for x in lines if x.startswith("using: ")]
    return line.removeprefix("using: ").split(" · ")[0]


def test_a_continuations_turn_is_shown_beside_the_held_back_words() -> None:
    store = Store(os.environ["MEMPROBE_STORE"])
    victim = load("fake")
    text = " ".join(f"w{i}" for i in range(60)) + " <img src=x onerror=alert(1)>"
    options = ContinuationOptions(opening_words=5, heldback_words=10, max_turns=1, turn_tokens=8)
    run_id = continuation_run.start_continuation(
        store, text, victim, name="d", victim_name="fake", options=options
    )
    continuation_run.run_continuation_stored(store, run_id, victim)
    at = open_page("pages/6_Document.py")
    assert not at.exception
    assert "held-back words 6–15 of the document" in texts(at)
    bodies = [h.proto.body for h in at.get("html")]
    (held,) = [b for b in bodies if "held-back words 6–15" in b]
    assert "w5 w6 w7" in held  # the held-back words themselves, beside the answer
    assert any("<b>answer" in b for b in bodies)


def test_a_map_job_says_which_batch_it_scores_before_its_windows_land() -> None:
    from memprobe_core.documents.windows import Window
    from ui_common.document_view import _announcing_scorer
    from ui_common.job_runner import Progress

    progress = Progress()
    seen: list[str] = []

    def inner(batches):
        for batch in batches:
            seen.append(progress.snapshot().message)  # what the page shows while it is scored
            yield batch, [], 1.0

    batches = [[Window(i, 0, 2, 2) for i in range(first, first + 2)] for first in (4, 6)]
    scorer = _announcing_scorer(inner, progress, done=4, total=8)
    assert [len(b) for b, _, _ in scorer(batches)] == [2, 2]
    assert seen[0].startswith("scoring windows 5–6 of 8 (batch 1 of 2, begun ")
    assert seen[0].endswith("the first batch also warms the model up")
    assert seen[1].startswith("scoring windows 7–8 of 8 (batch 2 of 2, begun ")
