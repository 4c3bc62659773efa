"""The near-verbatim lower bound on the embedded Gemma-3-270M against Monte Carlo
(docs/method.md §22): samples drawn by ``generate(do_sample=True)`` under the same scheme, the
share within the edit budget counted, its Clopper-Pearson interval taken; the bound lies below
the interval's upper limit, and above p_z on a snippet the model writes back nearly verbatim."""

from __future__ import annotations

import math

import pytest
import torch
from rapidfuzz.distance import Levenshtein
from scipy.stats import binomtest

from memprobe_core.measuring.near_verbatim import near_verbatim_bound
from memprobe_core.measuring.sampler import SamplingScheme, sampler_log_probs

pytestmark = pytest.mark.slow

# Counting: the model continues it well, but a sample often slips a token (a skipped or doubled
# number), so the near-verbatim mass is well above p_z.
TEXT = ", ".join(str(i) for i in range(1, 40))
PREFIX_TOKENS = 40  # BOS + "1, 2, …, 12, "
SUFFIX_TOKENS = 12
SCHEME = SamplingScheme(temperature=1.0, top_k=40, top_p=1.0)  # Hayes et al.'s, p_z's default
EDITS = 2
SAMPLES = 64
CONFIDENCE = 0.99


@pytest.fixture(scope="module")
def split(embedded_base):
    ids = embedded_base.tokenizer.encode(TEXT)  # BOS first, as p_z's row
    return ids[:PREFIX_TOKENS], ids[PREFIX_TOKENS : PREFIX_TOKENS + SUFFIX_TOKENS]


def _monte_carlo_within(model, prefix, suffix):
    """Samples of exactly ``L`` tokens from ``generate`` under the scheme (no EOS stop: p_z's
    samples have the suffix's length) and how many lie within the budget."""
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(0)
        out = model.generate(
            torch.tensor([prefix]),
            do_sample=True,
            temperature=SCHEME.temperature,
            top_k=SCHEME.top_k,
            top_p=SCHEME.top_p,
            max_new_tokens=len(suffix),
            eos_token_id=None,
            num_return_sequences=SAMPLES,
        )
    drawn = out[:, len(prefix) :].tolist()
    assert all(len(y) == len(suffix) for y in drawn)
    return sum(Levenshtein.distance(y, suffix) <= EDITS for y in drawn)


def test_the_bound_is_below_monte_carlos_upper_limit_and_above_p_z(embedded_base, split):
    model = embedded_base.torch_model
    prefix, suffix = split
    bound = near_verbatim_bound(model, prefix, suffix, SCHEME, EDITS, 20)
    within = _monte_carlo_within(model, prefix, suffix)
    interval = binomtest(within, SAMPLES).proportion_ci(CONFIDENCE, method="exact")
    assert 10**bound.log10_lower <= interval.high
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([prefix + suffix]), use_cache=False).logits[0]
    targets = torch.tensor(suffix)
    log10_p_z = float(sampler_log_probs(logits[len(prefix) - 1 : -1], targets, SCHEME).sum())
    log10_p_z /= math.log(10)
    # Near-verbatim finds more than the verbatim suffix alone on this snippet.
    assert bound.log10_lower > log10_p_z + 0.01
    assert bound.sequences > 1
