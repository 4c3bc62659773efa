"""The near-verbatim lower bound (docs/method.md §22) against exhaustive enumeration on tiny random
models: every one of the ``V^L`` continuations scored by a teacher-forced pass, the exact
probability of those within the edit budget summed. The bound is below it, above p_z, equal to it
once the beam holds every partial sequence, and equal to p_z at budget 0."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from rapidfuzz.distance import Levenshtein

from memprobe_core.errors import OptionError
from memprobe_core.measuring.near_verbatim import edit_budget, near_verbatim_bound
from memprobe_core.measuring.sampler import SamplingScheme, sampler_log_probs
from tests.helpers.tiny_models import tiny_gemma3_config

VOCAB = 7
PREFIX = [3, 1, 4, 1, 5]
SUFFIX = [2, 6, 5, 3]  # L = 4: 7^4 = 2401 continuations

SCHEMES = {
    "temperature": SamplingScheme(temperature=0.7, top_k=0, top_p=1.0),
    "top-k": SamplingScheme(temperature=1.0, top_k=3, top_p=1.0),
    "top-p": SamplingScheme(temperature=1.0, top_k=0, top_p=0.8),
    "plain": SamplingScheme(temperature=1.0, top_k=0, top_p=1.0),
}


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        initializer_range=0.5,  # peaked next-token distributions, so the schemes differ
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        return LlamaForCausalLM(config).double().eval()


def _gemma():
    """Gemma-3's sliding-window cache (window 4 < prefix + suffix): the beams' cache reorder
    must hold for it too, the embedded victim's family."""
    from transformers import Gemma3ForCausalLM

    config = tiny_gemma3_config(VOCAB, sliding_window=4, initializer_range=0.5)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        return Gemma3ForCausalLM(config).double().eval()


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def model(request):
    return _llama() if request.param == "llama" else _gemma()


@pytest.fixture(scope="module")
def continuation_logits(model):
    """Every continuation of ``len(SUFFIX)`` tokens and the logits predicting its tokens, from
    one teacher-forced pass with no cache (the way p_z measures)."""
    conts = list(itertools.product(range(VOCAB), repeat=len(SUFFIX)))
    rows = torch.tensor([PREFIX + list(c) for c in conts])
    with torch.inference_mode():
        logits = model(input_ids=rows, use_cache=False).logits
    start = len(PREFIX)
    return conts, rows[:, start:], logits[:, start - 1 : -1]  # row t predicts token start + t


@pytest.fixture
def all_log_q(continuation_logits):
    """``scheme -> {continuation: log q}``, exact for every one of the ``V^L``."""

    def under(scheme):
        conts, targets, logits = continuation_logits
        flat = sampler_log_probs(logits.reshape(-1, VOCAB), targets.reshape(-1), scheme)
        return dict(zip(conts, flat.reshape(len(conts), -1).sum(dim=1).tolist()))

    return under


def _exact(scored, budget):
    within = [lq for c, lq in scored.items() if Levenshtein.distance(c, SUFFIX) <= budget]
    return math.fsum(math.exp(v) for v in within)


def _probability(bound):
    return 0.0 if bound.log10_lower is None else 10**bound.log10_lower


@pytest.mark.parametrize("scheme_name", list(SCHEMES))
@pytest.mark.parametrize("edits", [1, 2])
def test_bound_lies_between_p_z_and_the_exact_probability(model, all_log_q, scheme_name, edits):
    scheme = SCHEMES[scheme_name]
    scored = all_log_q(scheme)
    exact = _exact(scored, edits)
    p_z = math.exp(scored[tuple(SUFFIX)])
    for beams in (1, 3):
        bound = near_verbatim_bound(model, PREFIX, SUFFIX, scheme, edits, beams)
        lower = _probability(bound)
        assert lower <= exact * (1 + 1e-9)
        assert lower >= p_z * (1 - 1e-9)
        assert bound.edits == edits and (bound.sequences >= 1) == (lower > 0)


@pytest.mark.parametrize("scheme_name", list(SCHEMES))
@pytest.mark.parametrize("edits", [1, 2, 4])
def test_a_beam_holding_every_partial_sequence_gives_the_exact_probability(
    model, all_log_q, scheme_name, edits
):
    scheme = SCHEMES[scheme_name]
    scored = all_log_q(scheme)
    # The last step counts every continuation of every beam: V^(L-1) beams hold them all.
    bound = near_verbatim_bound(model, PREFIX, SUFFIX, scheme, edits, VOCAB ** (len(SUFFIX) - 1))
    assert _probability(bound) == pytest.approx(_exact(scored, edits), rel=1e-9, abs=1e-300)
    positive = {
        c for c, lq in scored.items() if lq > -math.inf and Levenshtein.distance(c, SUFFIX) <= edits
    }
    assert bound.sequences == len(positive)


@pytest.mark.parametrize("scheme_name", list(SCHEMES))
def test_budget_zero_is_p_z(model, all_log_q, scheme_name):
    scheme = SCHEMES[scheme_name]
    log_q = all_log_q(scheme)[tuple(SUFFIX)]
    bound = near_verbatim_bound(model, PREFIX, SUFFIX, scheme, 0, 5)
    if log_q == -math.inf:
        assert bound.log10_lower is None
    else:
        assert bound.log10_lower == pytest.approx(log_q / math.log(10), rel=1e-9)
        assert bound.sequences == 1


def test_cost_is_the_prefix_once_then_at_most_b_tokens_per_step(model):
    bound = near_verbatim_bound(model, PREFIX, SUFFIX, SCHEMES["plain"], 2, 3)
    assert bound.forward_passes == len(SUFFIX)  # the prefix, then one per token but the last
    assert len(PREFIX) < bound.forward_tokens <= len(PREFIX) + 3 * (len(SUFFIX) - 1)
    record = bound.to_record()
    assert record["near_verbatim_log10_lower"] == bound.log10_lower
    assert record["near_verbatim_edits"] == 2
    assert record["near_verbatim_forward_tokens"] == bound.forward_tokens


def test_greedy_counts_the_greedy_continuation_alone(model):
    greedy = SamplingScheme(temperature=0, top_k=0, top_p=1.0)
    bound = near_verbatim_bound(model, PREFIX, SUFFIX, greedy, len(SUFFIX), 4)
    # Within L edits every sequence counts, and greedy draws exactly one: probability 1.
    assert bound.log10_lower == 0.0 and bound.sequences == 1


@pytest.mark.parametrize(("edits", "length", "budget"), [(0.1, 50, 5), (0.1, 9, 0), (0.5, 7, 3)])
def test_a_share_of_the_suffix_is_rounded_down(edits, length, budget):
    assert edit_budget(edits, length) == budget


def test_a_whole_number_from_one_is_tokens():
    assert edit_budget(3, 50) == 3 and edit_budget(1.0, 50) == 1


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.inf, "5", True])
def test_a_budget_that_is_neither_is_refused_naming_the_option(bad):
    with pytest.raises(OptionError, match="near_verbatim_edits"):
        edit_budget(bad, 10)


def test_a_beam_of_one_never_falls_below_p_z_on_any_suffix(model, all_log_q):
    """The suffix's own path is kept even when a narrow beam would drop it for likelier
    near-misses, which alone may hold less than p_z."""
    scored = all_log_q(SCHEMES["plain"])
    for suffix in list(scored)[::17]:
        bound = near_verbatim_bound(model, PREFIX, list(suffix), SCHEMES["plain"], 1, 1)
        assert bound.log10_lower >= scored[suffix] / math.log(10) - 1e-9
