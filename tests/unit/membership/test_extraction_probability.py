"""Probabilistic extraction (docs/method.md §14): p_z from one teacher-forced pass equals the
product of the sampler's own probabilities computed step by step and independently (numpy, not
transformers' warpers), matches what ``model.generate`` draws, and the (n, p) arithmetic holds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memprobe_core.measuring import sampler
from memprobe_core.measuring.sampler import SamplingScheme
from memprobe_core.membership import MeasureOptions
from memprobe_core.membership import extraction_probability as xp
from memprobe_core.models.measure_cache import tokenizer_name
from memprobe_core.snippets.split import Snippet, SplitSnippet, split
from tests.helpers.tiny_models import tiny_hf_generator

TEXT = (
    "Licensed under the Apache License, Version 2.0; you may not use this file except in "
    "compliance with the License. Unless required by applicable law or agreed to in writing"
)
SCHEMES = [
    SamplingScheme(1.0, 0, 1.0),
    SamplingScheme(1.0, 40, 1.0),
    SamplingScheme(0.7, 0, 0.9),
    SamplingScheme(1.3, 25, 0.95),
    SamplingScheme(0.5, 3, 1.0),
]


@pytest.fixture(scope="module", params=[False, True], ids=["bos-never-added", "bos-added"])
def victim(request):
    return tiny_hf_generator(seed=3, adds_bos=request.param)


@pytest.fixture(autouse=True)
def fresh_cache():
    xp.clear_cache()
    yield
    xp.clear_cache()


def numpy_sampler(logits: np.ndarray, scheme: SamplingScheme) -> np.ndarray:
    """The sampler's distribution over one position's logits, written from the definitions:
    divide by T; keep the k largest; keep the smallest set of most likely tokens whose mass
    reaches top_p (at least one); renormalise."""
    z = logits.astype(np.float64) / scheme.temperature
    keep = np.ones_like(z, dtype=bool)
    if scheme.top_k:
        kth = np.sort(z)[-scheme.top_k]
        keep &= z >= kth
    z = np.where(keep, z, -np.inf)
    probs = np.exp(z - z.max())
    probs /= probs.sum()
    if scheme.top_p < 1:
        order = np.argsort(-probs, kind="stable")
        mass_before = np.cumsum(probs[order]) - probs[order]
        nucleus = order[mass_before < scheme.top_p]
        kept = np.zeros_like(keep)
        kept[nucleus] = True
        probs = np.where(kept, probs, 0.0)
        probs /= probs.sum()
    return probs


def stepwise_log_p(victim, context: list[int], suffix: list[int], scheme) -> float:
    """Σ log q(z_t | context, z_<t): one forward pass per token, no cache, numpy sampler."""
    import torch

    total, ids = 0.0, list(context)
    for token in suffix:
        with torch.inference_mode():
            logits = victim.torch_model(input_ids=torch.tensor([ids])).logits[0, -1]
        q = numpy_sampler(logits.double().numpy(), scheme)
        total += math.log(q[token]) if q[token] > 0 else -math.inf
        ids.append(token)
    return total


def context_and_suffix(victim, piece) -> tuple[list[int], list[int]]:
    """What the model sees before the suffix: the tokenizer's own BOS (if it adds one), then
    the prefix's ids."""
    tok = victim.tokenizer
    bos = len(tok.encode(piece.text)) - len(tok.encode(piece.text, add_special_tokens=False))
    return [*tok.encode(piece.text)[:bos], *piece.prefix_ids], list(piece.suffix_ids)


def piece_of_ids(
    tok, prefix_ids: list[int], suffix_ids: list[int], name: str = "g"
) -> SplitSnippet:
    """A split of exactly these ids (a random model's tokens need not round-trip through text;
    the victim's tokenizer cut it, so its ids are used as they are)."""
    text = tok.decode([*prefix_ids, *suffix_ids])
    return SplitSnippet(
        snippet=Snippet(name, text, "x"),
        length=len(prefix_ids) + len(suffix_ids),
        prefix=tok.decode(prefix_ids),
        suffix=tok.decode(suffix_ids),
        prefix_ids=tuple(prefix_ids),
        suffix_ids=tuple(suffix_ids),
        tokenizer_name=tokenizer_name(tok),
        text=text,
    )


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.label())
def test_p_z_from_one_pass_is_the_product_of_the_samplers_probabilities(victim, scheme):
    piece = split(Snippet("s", TEXT, "legal"), victim.tokenizer, 24)
    record = xp.measure_extraction_probability(victim, piece, scheme, 0.5)
    context, suffix = context_and_suffix(victim, piece)
    expected = stepwise_log_p(victim, context, suffix, scheme)
    assert record["pz_tokens"] == len(suffix)
    assert record["pz_scheme"] == scheme.label()
    if expected == -math.inf:
        assert record["log10_p_z"] is None and record["pz_outside_support"] > 0
    else:
        assert record["log10_p_z"] == pytest.approx(expected / math.log(10), rel=1e-6, abs=1e-6)
        assert record["pz_outside_support"] == 0


def test_a_token_outside_the_top_k_makes_p_z_zero_and_n_unbounded(victim):
    piece = split(Snippet("s", TEXT, "legal"), victim.tokenizer, 24)
    record = xp.measure_extraction_probability(victim, piece, SamplingScheme(1.0, 1, 1.0), 0.5)
    # top-k 1 is greedy sampling: a random tiny model does not write the licence greedily
    assert record["log10_p_z"] is None
    assert record["n_at_p"] is None and record["log10_n_at_p"] is None
    assert record["pz_outside_support"] >= 1


def test_greedy_is_the_degenerate_case_and_agrees_with_greedy_decoding(victim):
    """Temperature 0: p_z = 1 exactly when greedy decoding writes the suffix. The suffix here
    is the model's own greedy continuation, so p_z = 1; one changed token makes it 0."""
    import torch

    tok = victim.tokenizer
    prompt = tok.encode("Licensed under the Apache License", add_special_tokens=False)
    context = tok.encode("Licensed under the Apache License")
    with torch.inference_mode():
        out = victim.torch_model.generate(
            torch.tensor([context]), max_new_tokens=8, do_sample=False, min_new_tokens=8
        )[0, len(context) :].tolist()
    greedy = SamplingScheme(0.0, 0, 1.0)
    record = xp.measure_extraction_probability(victim, piece_of_ids(tok, prompt, out), greedy, 0.5)
    assert record["log10_p_z"] == 0.0 and record["n_at_p"] == 1.0
    assert record["pz_scheme"] == "greedy" and record["pz_tokens"] == 8
    changed = [*out[:-1], out[-1] + 1 if out[-1] + 1 < len(tok) else out[-1] - 1]
    record = xp.measure_extraction_probability(
        victim, piece_of_ids(tok, prompt, changed), greedy, 0.5
    )
    assert record["log10_p_z"] is None and record["pz_outside_support"] == 1


def test_p_z_matches_what_model_generate_draws():
    """Monte Carlo check against transformers' own sampler: the suffix is the two most likely
    tokens, so p_z (≈ 0.04) is large enough to estimate from 20,000 draws of ``model.generate``; the
    frequency must lie within 4.5 standard errors of p_z."""
    import torch

    victim = tiny_hf_generator(seed=11, adds_bos=True)
    tok = victim.tokenizer
    context = tok.encode("We the People of the United")
    prompt = tok.encode("We the People of the United", add_special_tokens=False)
    scheme = SamplingScheme(0.8, 5, 0.9)
    with torch.inference_mode():
        first = int(victim.torch_model(input_ids=torch.tensor([context])).logits[0, -1].argmax())
        second = victim.torch_model(input_ids=torch.tensor([[*context, first]])).logits[0, -1]
    suffix = [first, int(second.argmax())]
    record = xp.measure_extraction_probability(
        victim, piece_of_ids(tok, prompt, suffix), scheme, 0.5
    )
    p_z = 10 ** record["log10_p_z"]
    draws = 20_000
    torch.manual_seed(0)
    with torch.inference_mode():
        out = victim.torch_model.generate(
            torch.tensor([context]).repeat(draws, 1),
            do_sample=True,
            temperature=scheme.temperature,
            top_k=scheme.top_k,
            top_p=scheme.top_p,
            max_new_tokens=2,
            min_new_tokens=2,
        )[:, len(context) :]
    hits = int((out == torch.tensor(suffix)).all(dim=1).sum())
    se = math.sqrt(p_z * (1 - p_z) / draws)
    assert 0.01 < p_z < 0.99  # large enough to estimate, not certain
    assert abs(hits / draws - p_z) < 4.5 * se


@pytest.mark.parametrize("log10_p_z", [-0.01, -0.3, -1, -2.5, -6, -12])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.99])
def test_n_at_p_is_the_least_n_whose_chance_reaches_p(log10_p_z, p):
    n, log10_n = sampler.samples_needed(log10_p_z, p)
    assert n is not None and n >= 1 and log10_n == pytest.approx(math.log10(n))
    p_z = 10**log10_p_z

    def chance(k: float) -> float:  # 1 − (1 − p_z)^k without losing p_z ≪ 1 to rounding
        return -math.expm1(k * math.log1p(-p_z))

    assert chance(n) >= p
    if n > 1:
        assert chance(n - 1) < p
    assert sampler.extraction_chance(log10_p_z, n) == pytest.approx(chance(n))


def test_tiny_p_z_uses_the_first_order_form_and_stays_finite():
    n, log10_n = sampler.samples_needed(-120.0, 0.5)
    assert log10_n == pytest.approx(120 + math.log10(math.log(2)))
    assert n == pytest.approx(math.log(2) * 1e120, rel=1e-6)
    n, log10_n = sampler.samples_needed(-400.0, 0.5)
    assert n is None and log10_n == pytest.approx(400 + math.log10(math.log(2)))
    # the crossover between the exact and the first-order form is continuous
    a = sampler.samples_needed(-14.999, 0.5)[1]
    b = sampler.samples_needed(-15.001, 0.5)[1]
    assert abs(a - b) < 0.01
    assert sampler.samples_needed(None, 0.5) == (None, None)
    assert sampler.extraction_chance(None, 10**9) == 0.0
    assert sampler.extraction_chance(0.0, 1) == 1.0


def test_options_are_checked_and_named():
    with pytest.raises(Exception, match="discover_p"):
        MeasureOptions(discover_p=0)
    with pytest.raises(Exception, match="pz_top_p"):
        MeasureOptions(pz_top_p=1.5)
    with pytest.raises(Exception, match="pz_temperature"):
        MeasureOptions(pz_temperature=-1)
    assert MeasureOptions().pz_scheme == SamplingScheme(1.0, 40, 1.0)
    assert MeasureOptions.from_dict({"pz_top_k": 0}).pz_scheme.label() == "temperature 1"


def test_measured_once_per_snippet_and_length(victim, monkeypatch):
    piece = split(Snippet("s", TEXT, "legal"), victim.tokenizer, 24)
    calls = []
    real = xp._white_box_log_probs
    monkeypatch.setattr(xp, "_white_box_log_probs", lambda *a: calls.append(1) or real(*a))
    first = xp.measure_extraction_probability(victim, piece, SamplingScheme(), 0.5)
    again = xp.measure_extraction_probability(victim, piece, SamplingScheme(), 0.5)
    assert first == again and len(calls) == 1
    xp.measure_extraction_probability(victim, piece, SamplingScheme(top_k=0), 0.5)
    assert len(calls) == 2


def test_a_black_box_victim_gives_p_z_under_plain_sampling_from_its_servers_log_probs(victim):
    """A server that returns a prompt's log-probs (``echo``) gives p_z of the plain scheme as the
    weights do (whitespace cut: the suffix's tokens are those at or past the prefix's end); a
    scheme that needs the whole distribution is not measured, and says what to do."""
    from memprobe_core.models.openai import OpenAIGenerator
    from tests.helpers.openai_server import serve

    plain = SamplingScheme(1.0, 0, 1.0)
    piece = split(Snippet("s", TEXT, "legal"), "whitespace", 18)
    white = xp.measure_extraction_probability(victim, piece, plain, 0.9)
    with serve(victim, "m") as srv:
        client = OpenAIGenerator("m", base_url=srv.base_url, backoff_s=0.01, max_retries=0)
        black = xp.measure_extraction_probability(client, piece, plain, 0.9)
        top_k = xp.measure_extraction_probability(client, piece, SamplingScheme(), 0.9)
    assert black["log10_p_z"] == pytest.approx(white["log10_p_z"], rel=1e-5)
    assert black["n_at_p"] == pytest.approx(white["n_at_p"], rel=1e-4)
    assert black["pz_tokens"] == white["pz_tokens"] > 0
    assert "log10_p_z" not in top_k and "--pz-top-k 0" in top_k["pz_not_measured"]


def test_every_result_gets_p_z_beside_its_verbatim_metrics(victim):
    from memprobe_core.attacks.model_set import ModelSet
    from memprobe_core.attacks.result import AttackResult
    from memprobe_core.membership.measure import measure_result

    piece = split(Snippet("s", TEXT, "legal"), victim.tokenizer, 24)

    def result() -> AttackResult:
        return AttackResult("ps_base", "s", "legal", 24, piece.prefix, "the output", 0, 0, 0, 0.5)

    measured = measure_result(
        result(), piece, ModelSet(victim=victim), MeasureOptions(discover_p=0.9)
    )
    verbatim = measured.verbatim
    assert {"extractable", "span_tokens", "log10_p_z", "n_at_p", "pz_scheme"} <= set(verbatim)
    assert verbatim["discover_p"] == 0.9 and verbatim["pz_scheme"] == "temperature 1, top-k 40"
    off = measure_result(result(), piece, ModelSet(victim=victim), MeasureOptions(pz=False))
    assert "log10_p_z" not in off.verbatim and "extractable" in off.verbatim
    assert measured.manifest["extraction_probability"]["top_k"] == 40
    assert "extraction_probability" not in off.manifest


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.label())
def test_p_z_rides_in_the_signals_pass_with_the_value_of_its_own(victim, scheme):
    """With the membership signals on, p_z's log-probs come from the signals' forward pass (the
    same row): no pass of its own, and the value a pass of its own gives."""
    from memprobe_core.attacks.model_set import ModelSet
    from memprobe_core.attacks.result import AttackResult
    from memprobe_core.membership import signals
    from memprobe_core.membership.measure import measure_result

    piece = split(Snippet("s", TEXT, "legal"), victim.tokenizer, 24)
    alone = xp.measure_extraction_probability(victim, piece, scheme, 0.5)
    xp.clear_cache()
    signals.clear_cache()
    options = MeasureOptions(
        pz_temperature=scheme.temperature,
        pz_top_k=scheme.top_k,
        pz_top_p=scheme.top_p,
        near_verbatim=False,  # its beam search makes passes of its own (§22)
    )
    calls: list[int] = []
    original = victim.torch_model.forward

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    victim.torch_model.forward = counting
    try:
        result = AttackResult("ps_base", "s", "legal", 24, piece.prefix, "out", 0, 0, 0, 0.5)
        measured = measure_result(result, piece, ModelSet(victim=victim), options).verbatim
    finally:
        del victim.torch_model.forward
        signals.clear_cache()
    assert len(calls) == 1  # the signals' pass (x and lower(x) together); p_z made none
    assert measured["pz_tokens"] == alone["pz_tokens"] > 0
    assert measured["pz_outside_support"] == alone["pz_outside_support"]
    if alone["log10_p_z"] is None:
        assert measured["log10_p_z"] is None
    else:
        assert measured["log10_p_z"] == pytest.approx(alone["log10_p_z"], rel=1e-5, abs=1e-6)
