"""The document canary's parts: the generated document (deterministic, long enough, new), its
training rows (every token covered, the end included), its settings' refusals, and the recipe
on a tiny model: after fine-tuning on the rows, the map of the document is full where the
untrained model's is empty."""

from __future__ import annotations

import re

import pytest

from memprobe_core.documents import canary
from memprobe_core.documents import extraction_map as xm
from memprobe_core.documents.windows import MapOptions, cut_windows
from memprobe_core.errors import OptionError
from memprobe_core.measuring.sampler import SamplingScheme
from memprobe_core.membership import canaries
from memprobe_core.membership.canaries import _rate_factor, fine_tune
from memprobe_core.snippets import nonmembers
from tests.helpers.tiny_models import tiny_causal_lm


def test_the_document_is_deterministic_long_enough_and_not_a_snippet_canary():
    settings = canary.DocumentCanarySettings()
    text = canary.canary_document(settings, 1234)
    assert text == canary.canary_document(settings, 1234)
    assert text != canary.canary_document(settings, 1235)
    assert len(text.split()) >= 3000
    pool = nonmembers.generate_text(settings.domain, 1234, 100_000)  # the snippet canaries'
    assert pool not in text


@pytest.mark.parametrize("unique_words", [12, 6])
def test_no_run_of_unique_words_words_appears_twice(unique_words):
    # The generator's templates share whole clauses; a window whose prefix is one has two true
    # continuations. The document leaves out paragraphs that would repeat such a run.
    settings = canary.DocumentCanarySettings(unique_words=unique_words)
    words = canary.canary_document(settings, 1234).split()
    runs = [tuple(words[i : i + unique_words]) for i in range(len(words) - unique_words + 1)]
    assert len(set(runs)) == len(runs)
    assert len(words) >= settings.words


@pytest.mark.parametrize("numbers_alike", [True, False])
def test_runs_differing_only_in_numbers_repeat_only_when_numbers_are_told_apart(numbers_alike):
    # "6. governing law (a) ..." and "8. governing law (a) ...": a copy that knew the document
    # wrote one for the other and carried on in the wrong agreement.
    settings = canary.DocumentCanarySettings(numbers_alike=numbers_alike)
    words = [re.sub(r"\d+", "0", w) for w in canary.canary_document(settings, 1234).split()]
    runs = [tuple(words[i : i + 12]) for i in range(len(words) - 11)]
    assert (len(set(runs)) == len(runs)) is numbers_alike


def test_training_rows_cover_every_token_and_the_end():
    _, tok = tiny_causal_lm()
    settings = canary.DocumentCanarySettings(max_tokens=32, stride=32)
    text = " ".join(f"word{i}" for i in range(300))
    rows = canary.training_rows(text, tok, settings)
    ids = tok.encode(text, add_special_tokens=False)
    joined = [t for row in rows for t in tok.encode(row, add_special_tokens=False)]
    assert set(ids) <= set(joined)
    assert rows[-1].endswith("word299")


@pytest.mark.parametrize(
    ("field", "value"),
    [("words", 10), ("epochs", 0), ("stride", 0), ("domain", "poetry"), ("learning_rate", 2.0)],
)
def test_settings_out_of_range_are_refused(field, value):
    with pytest.raises(OptionError, match=field):
        canary.DocumentCanarySettings(**{field: value})


def test_the_recipe_turns_an_empty_map_into_a_full_one_on_a_tiny_model():
    model, tok = tiny_causal_lm(seed=2, adds_bos=True)
    settings = canary.DocumentCanarySettings(
        words=100, epochs=40, learning_rate=3e-3, batch_size=4, max_tokens=48, stride=24
    )
    text = " ".join(nonmembers.generate_text("legal", 7, 300_000).split()[:60])
    ids = tok.encode(text, add_special_tokens=False)
    # A prefix of about seven words: two words recur in the generated text with different
    # continuations, which no model can tell apart (measured: 8-token prefixes plateau at 40 %).
    options = MapOptions(32, 8, 8, batch_windows=8)

    def share():
        windows = cut_windows(len(ids), options)
        front = xm.front_ids(tok, text)
        scores = []
        for first in range(0, len(windows), 8):
            scores += xm.score_windows(
                model,
                ids,
                windows[first : first + 8],
                front=front,
                scheme=SamplingScheme(),
                discover_p=0.5,
            )
        return xm.summarise(scores, len(ids)).extractable_share

    assert share() == 0.0
    fine_tune(model, tok, canary.training_rows(text, tok, settings), settings)
    assert share() >= 0.8  # measured 0.90


def test_the_rate_rises_over_the_warm_up_holds_then_falls_to_zero():
    factor = _rate_factor(warmup=4, decay_from=8, total=12)
    assert [factor(s) for s in range(12)] == [0.25, 0.5, 0.75, 1, 1, 1, 1, 1, 1, 0.75, 0.5, 0.25]
    assert factor(12) == 0.0  # the scheduler asks once more after the last step
    no_warmup_no_decay = _rate_factor(warmup=0, decay_from=5, total=5)
    assert {no_warmup_no_decay(s) for s in range(6)} == {1.0}


def test_the_fall_starts_decay_epochs_before_the_end(monkeypatch):
    seen = []

    def record(warmup, decay_from, total):
        seen.append((warmup, decay_from, total))
        return lambda step: 1.0

    monkeypatch.setattr(canaries, "_rate_factor", record)
    model, tok = tiny_causal_lm(seed=2, adds_bos=True)
    rows = ["one two three", "four five six", "seven eight nine"]
    for decay_epochs, decay_from in ((1, 6), (3, 0), (9, 0), (0, 9)):
        settings = canary.DocumentCanarySettings(
            words=100, epochs=3, decay_epochs=decay_epochs, warmup_steps=2, max_tokens=16
        )
        fine_tune(model, tok, rows, settings)
        assert seen[-1] == (2, decay_from, 9)
