"""End to end: train the embedded NER model (small settings), then audit it like a real model.

The model is fine-tuned from the packaged MiniLM encoder on a generated corpus whose person names
are known, so M-MEM must be clearly above chance. Threshold: with 100 pairs and no memorisation,
each pair is a fair coin at best (P(C_in > C_out) ≤ ½), and P(Binomial(100, ½) ≥ 61) ≈ 0.018, so a
prompt scoring above 60 % is beyond chance at p < 0.05. We require the *mean* over 50 prompts to
exceed 60 % (measured: ~99 % with these settings, ~90 % with the defaults).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from memprobe_core.ner.attention import NAME_LABEL, compare_attention
from memprobe_core.ner.embedded import (
    MARKER,
    EmbeddedNerSettings,
    embedded_name_lists,
    ensure_embedded_ner,
)
from memprobe_core.ner.model import NerModel
from memprobe_core.ner.names import build_pairs, read_name_list
from memprobe_core.ner.prompts import template_prompts
from memprobe_core.ner.scoring import score_prompts

pytestmark = pytest.mark.slow

# ~360 sentences, 24 optimiser steps: about 20-40 s on 2 CPU cores.
SMALL = EmbeddedNerSettings(
    n_in_names=100, n_out_names=100, repeats=3, other_sentences=60, epochs=2
)
CHANCE_MARGIN = 0.60


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    home = tmp_path_factory.mktemp("memprobe-home")
    previous = os.environ.get("MEMPROBE_HOME")
    os.environ["MEMPROBE_HOME"] = str(home)
    progress: list[tuple[int, int, str]] = []
    try:
        folder = ensure_embedded_ner(lambda *a: progress.append(a), SMALL)
        yield folder, progress
    finally:
        if previous is None:
            os.environ.pop("MEMPROBE_HOME", None)
        else:
            os.environ["MEMPROBE_HOME"] = previous


@pytest.fixture(scope="module")
def model(built) -> NerModel:
    # sdpa for scoring (faster); attention calls use an eager copy made on demand.
    return NerModel.load(built[0], device="cpu")


def test_build_is_complete_cached_and_reported(built) -> None:
    folder, progress = built
    assert (folder / MARKER).is_file() and (folder / "manifest.json").is_file()
    assert progress and progress[-1][0] == progress[-1][1] == 24
    in_names, out_names = embedded_name_lists(SMALL)
    assert read_name_list(folder / "names_in.txt") == in_names
    assert read_name_list(folder / "names_out.txt") == out_names
    again: list[tuple] = []
    assert ensure_embedded_ner(lambda *a: again.append(a), SMALL) == folder and not again


def test_m_mem_is_clearly_above_chance(model: NerModel) -> None:
    in_names, out_names = embedded_name_lists(SMALL)
    pairs = build_pairs(in_names, out_names, seed=0, max_pairs=100)
    prompts = template_prompts(50, seed=0)
    assert len(pairs) == 100 and len(prompts) == 50
    scores = score_prompts(model, prompts, pairs, batch_size=128)
    assert scores.conf_in.shape == (50, 100)
    assert scores.m_mem.mean() > CHANCE_MARGIN, scores.summary()
    assert scores.with_metric("all_pairs").m_mem.mean() > CHANCE_MARGIN
    # In-train names are recognised as persons more confidently on average, per prompt.
    assert (scores.conf_in.mean(1) > scores.conf_out.mean(1)).mean() > 0.9


def test_attention_tensor_and_name_heatmap(model: NerModel) -> None:
    weights, tokens = model.attentions("Later that day Anna Lee met the press .")
    assert weights.shape == (6, 12, len(tokens), len(tokens)) and weights.size > 0
    assert np.isfinite(weights).all()
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-4)
    in_names, out_names = embedded_name_lists(SMALL)
    pairs = build_pairs(in_names, out_names, seed=0, max_pairs=10)
    comparison = compare_attention(model, "Did {name} visit the museum yesterday?", pairs)
    assert NAME_LABEL in comparison.labels
    assert comparison.heatmap()["z"].shape == (2, len(comparison.labels))
    np.testing.assert_allclose(comparison.in_train.sum(), 1.0, atol=1e-4)
