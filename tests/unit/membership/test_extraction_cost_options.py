"""l and m of a snippet's rank-based extraction cost (docs/method.md §21) reach p_z's pass: a
non-default pair changes b as the formula says, and the record names them."""

from __future__ import annotations

import pytest

from memprobe_core.measuring.inextractability import InextractabilityOptions
from memprobe_core.measuring.sampler import SamplingScheme
from memprobe_core.membership import extraction_probability as xp
from memprobe_core.snippets.split import Snippet, split
from tests.helpers.tiny_models import tiny_hf_generator
from tests.unit.membership.test_extraction_bits import stepwise_bits
from tests.unit.membership.test_extraction_probability import TEXT, context_and_suffix


@pytest.fixture(scope="module")
def victim():
    return tiny_hf_generator(seed=3, adds_bos=True)


@pytest.fixture(autouse=True)
def fresh_cache():
    xp.clear_cache()
    yield
    xp.clear_cache()


def test_a_non_default_l_and_m_change_a_snippets_bits_as_the_formula_says(victim):
    piece = split(Snippet("s", TEXT, "legal"), victim.tokenizer, 24)
    context, suffix = context_and_suffix(victim, piece)
    default = xp.measure_extraction_probability(victim, piece, SamplingScheme(), 0.5)
    narrow = InextractabilityOptions(window_tokens=4, rank_cap=2)
    found = xp.measure_extraction_probability(victim, piece, SamplingScheme(), 0.5, narrow)
    bits, rate, window = stepwise_bits(victim, context, suffix, l=4, m=2)
    assert found["extraction_bits"] == pytest.approx(bits, rel=1e-5, abs=1e-5)
    assert found["greedy_extractable_rate"] == pytest.approx(rate)
    assert (
        (found["extraction_window_tokens"], found["extraction_rank_cap"]) == (window, 2) == (4, 2)
    )
    assert found["extraction_bits"] != pytest.approx(default["extraction_bits"])
    assert default["extraction_rank_cap"] == 20
