"""Probabilistic extraction on the embedded victim (Gemma-3-270M, 262k vocabulary): a P-S-Base
unit carries log10 p_z, equal to the product of the sampler's probabilities token by token, and
a text the model reproduces greedily has p_z = 1 under greedy decoding."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from memprobe_core.attacks import AttackOptions, ModelSet
from memprobe_core.measuring.sampler import SamplingScheme, sampler_log_probs
from memprobe_core.membership import extraction_probability as xp
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.runs.unit import run_unit
from memprobe_core.snippets.split import Snippet, split
from memprobe_core.store import Store, UnitKey

pytestmark = pytest.mark.slow

MIT = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this "
    'software and associated documentation files (the "Software"), to deal in the Software '
    "without restriction, including without limitation the rights to use, copy, modify, merge"
)


@pytest.fixture(scope="module")
def victim(embedded_base):
    """The session's embedded Gemma-3-270M (tests/e2e/conftest.py)."""
    return embedded_base


def test_a_ps_unit_carries_log10_p_z_equal_to_the_stepwise_product(victim, tmp_path):
    import torch

    store = Store(tmp_path / "runs.sqlite")
    snippet = Snippet("mit", MIT, "legal")
    unit = UnitKey("mit", "ps_base", 40)
    run_id = store.create_run("probe", snippets=[snippet], units=[unit])
    options = AttackOptions(measure=MeasureOptions(signals=False))
    outcome = run_unit(store, run_id, unit, snippet, ModelSet(victim=victim, base=victim), options)
    assert outcome.status == "done", outcome.error
    stored = store.result(run_id, unit)
    assert stored is not None
    verbatim = stored.verbatim
    assert stored.manifest["extraction_probability"]["top_k"] == 40
    assert verbatim["pz_scheme"] == "temperature 1, top-k 40" and verbatim["pz_tokens"] > 0
    # The same p_z, one position at a time (a forward pass per suffix token).
    piece = split(snippet, victim.tokenizer, 40)
    ids = [victim.tokenizer.bos_token_id, *piece.prefix_ids]
    total = 0.0
    for token in piece.suffix_ids:
        with torch.inference_mode():
            logits = victim.torch_model(input_ids=torch.tensor([ids])).logits[0, -1:]
        total += float(sampler_log_probs(logits, torch.tensor([token]), SamplingScheme())[0])
        ids.append(token)
    if total == -math.inf:
        assert verbatim["log10_p_z"] is None and verbatim["pz_outside_support"] > 0
    else:
        assert verbatim["log10_p_z"] == pytest.approx(total / math.log(10), rel=1e-4, abs=1e-3)
        assert verbatim["n_at_p"] is None or verbatim["n_at_p"] >= 1


def test_its_own_greedy_answer_has_p_z_one_under_greedy_decoding(victim):
    piece = split(Snippet("mit", MIT, "legal"), victim.tokenizer, 40)
    answer = victim.generate([piece.prefix], max_new_tokens=piece.suffix_tokens)[0][0]
    own = replace(piece, suffix=answer.text, suffix_ids=tuple(answer.token_ids))
    xp.clear_cache()
    greedy = xp.measure_extraction_probability(victim, own, SamplingScheme(0.0, 0, 1.0), 0.5)
    assert greedy["log10_p_z"] == 0.0 and greedy["n_at_p"] == 1.0
    sampled = xp.measure_extraction_probability(victim, own, SamplingScheme(), 0.5)
    assert sampled["log10_p_z"] is not None and sampled["log10_p_z"] < 0
