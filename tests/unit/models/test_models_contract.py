"""One contract test run over every backend that can run here: hf (tiny model), fake, openai.

The openai backend talks to a real HTTP server on 127.0.0.1 that serves the tiny HF model. vLLM
joins when it is installed and a GPU is visible.
"""

from __future__ import annotations

import importlib.util

import pytest

from memprobe_core.models import Completion, Generator, LogprobsUnavailable, clear_cache, load
from tests.helpers.openai_server import serve
from tests.helpers.tiny_models import tiny_hf_generator

CHAT = [{"role": "user", "content": "Continue: Licensed under the Apache License"}]
TEXT = "Licensed under the Apache License, Version 2.0"


@pytest.fixture(scope="module")
def tiny():
    return tiny_hf_generator()


@pytest.fixture(scope="module")
def server(tiny):
    with serve(tiny, model_name="tiny") as srv:
        yield srv


def _vllm_ready() -> bool:
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


BACKENDS = [
    "hf",
    "fake",
    "openai",
    pytest.param(
        "vllm",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not _vllm_ready(), reason="needs vllm and a CUDA GPU"),
        ],
    ),
]


@pytest.fixture(params=BACKENDS)
def model(request, tiny, server) -> Generator:
    clear_cache()
    name = request.param
    if name == "hf":
        return tiny
    if name == "fake":
        return load("fake:attacker")
    if name == "openai":
        return load("openai:tiny", base_url=server.base_url, timeout_s=30, backoff_s=0.01)
    return load("vllm:HuggingFaceTB/SmolLM2-135M-Instruct", gpu_memory_utilization=0.3)


def test_shapes_and_types(model):
    out = model.generate([TEXT, CHAT], n=3, max_new_tokens=6, temperature=1.0, seed=0)
    assert len(out) == 2
    assert all(len(row) == 3 for row in out)
    assert all(isinstance(c, Completion) and isinstance(c.text, str) for row in out for c in row)
    assert all(c.finish_reason in ("stop", "length") for row in out for c in row)


def test_greedy_is_deterministic_and_n_copies(model):
    first = model.generate([TEXT], n=3, max_new_tokens=8, temperature=0.0)
    again = model.generate([TEXT], n=3, max_new_tokens=8, temperature=0.0)
    assert first == again
    assert len({c.text for c in first[0]}) == 1


def test_seeded_sampling_reproducible_and_seed_sensitive(model):
    a = model.generate([TEXT], n=4, max_new_tokens=8, temperature=1.0, seed=123)
    b = model.generate([TEXT], n=4, max_new_tokens=8, temperature=1.0, seed=123)
    c = model.generate([TEXT], n=4, max_new_tokens=8, temperature=1.0, seed=7)
    assert a == b
    assert a != c
    assert len({x.text for x in a[0]}) > 1, "n samples of one request should differ"


def test_top_k_of_one_samples_the_greedy_answer(model):
    """Every backend honours top_k: keeping only the most likely token leaves nothing to draw."""
    greedy = model.generate([TEXT, CHAT], max_new_tokens=8)
    sampled = model.generate([TEXT, CHAT], n=3, max_new_tokens=8, temperature=1.0, top_k=1, seed=4)
    assert [[c.text for c in row] for row in sampled] == [[row[0].text] * 3 for row in greedy]


def test_max_new_tokens_respected(model):
    out = model.generate([TEXT, CHAT], n=2, max_new_tokens=5, temperature=1.0, seed=1)
    for row in out:
        for c in row:
            assert 0 <= c.num_tokens <= 5
            if c.finish_reason == "length":
                assert c.num_tokens == 5


def test_stats_counted(model):
    before = model.stats.snapshot()
    out = model.generate([TEXT, TEXT, CHAT], n=2, max_new_tokens=4, temperature=1.0, seed=3)
    delta = model.stats.since(before)
    assert (delta.calls, delta.requests, delta.sequences) == (1, 3, 6)
    assert delta.generated_tokens == sum(c.num_tokens for row in out for c in row) > 0
    assert delta.seconds > 0


def test_empty_request_list(model):
    assert model.generate([], n=2) == []


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"n": 0}, ValueError),
        ({"max_new_tokens": 0}, ValueError),
        ({"temperature": -0.5}, ValueError),
        ({"top_p": 0.0}, ValueError),
        ({"top_p": 1.5}, ValueError),
        ({"top_k": -1}, ValueError),
        ({"top_k": 2.5}, ValueError),
        ({"top_k": True}, ValueError),
    ],
)
def test_bad_arguments(model, kwargs, error):
    with pytest.raises(error):
        model.generate([TEXT], **kwargs)


def test_bad_requests(model):
    with pytest.raises(TypeError, match="single request"):
        model.generate(TEXT)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="role"):
        model.generate([[{"content": "no role"}]])
    with pytest.raises(TypeError, match="non-empty"):
        model.generate([[]])


def test_manifest_names_model_and_backend(model):
    manifest = model.manifest()
    assert manifest["model_id"] == model.model_id
    assert manifest["backend"] == model.backend


def test_text_logprobs_where_the_backend_scores_text(model):
    """Black-box backends that can score a given text (openai with echo, vllm's prompt
    log-probs) return one entry per text; the others say they cannot."""
    if not model.scores_text:
        with pytest.raises(LogprobsUnavailable):
            model.text_logprobs([TEXT])
        return
    first, second = model.text_logprobs([TEXT, TEXT.lower()])
    for scored in (first, second):
        assert 0 < len(scored.log_probs) == len(scored.offsets)
        assert all(lp <= 1e-6 for lp in scored.log_probs)
        assert list(scored.offsets) == sorted(scored.offsets)
        assert scored.offsets[0] >= 0 and scored.offsets[-1] < len(TEXT)
    assert first.log_probs != second.log_probs  # two texts, two answers, in order
