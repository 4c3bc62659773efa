"""The vllm backend's engine options, checked against a stand-in ``vllm`` module (no GPU here).

What matters for speed: the attacker's n candidates are one engine call with ``SamplingParams(n)``
and prefix caching is on by default; both are what this checks, on the arguments the engine gets.
"""

from __future__ import annotations

import sys
import types

import pytest

from memprobe_core.models.base import LoadOptions, ModelError
from memprobe_core.models.vllm_backend import load_vllm


class _Output:
    def __init__(self, texts):
        self.outputs = [
            types.SimpleNamespace(text=t, token_ids=[1, 2], finish_reason="stop") for t in texts
        ]


@pytest.fixture
def fake_vllm(monkeypatch):
    made: dict = {"engines": [], "calls": []}

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class LLM:
        def __init__(self, **kwargs):
            made["engines"].append(kwargs)

        def get_tokenizer(self):
            return types.SimpleNamespace(chat_template="{{ messages }}")

        def generate(self, prompts, params, use_tqdm=False):
            made["calls"].append((list(prompts), params.kwargs))
            return [_Output([f"c{i}" for i in range(params.kwargs["n"])]) for _ in prompts]

        def chat(self, chats, params, use_tqdm=False):
            made["calls"].append((list(chats), params.kwargs))
            return [_Output([f"c{i}" for i in range(params.kwargs["n"])]) for _ in chats]

    monkeypatch.setitem(
        sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams)
    )
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    return made


def test_prefix_caching_is_on_by_default_and_recorded(fake_vllm):
    gen = load_vllm("vllm:some/model", LoadOptions())
    assert fake_vllm["engines"][0]["enable_prefix_caching"] is True
    assert gen.manifest()["prefix_caching"] is True
    load_vllm("vllm:some/model", LoadOptions(extra={"enable_prefix_caching": False}))
    assert fake_vllm["engines"][1]["enable_prefix_caching"] is False


def test_n_sampled_candidates_are_one_engine_call(fake_vllm):
    gen = load_vllm("vllm:some/model", LoadOptions())
    rows = gen.generate(["refine this"], n=24, max_new_tokens=8, temperature=1.0, seed=3)
    assert len(rows[0]) == 24
    assert len(fake_vllm["calls"]) == 1 and fake_vllm["calls"][0][1]["n"] == 24


def test_an_unknown_engine_option_is_refused(fake_vllm):
    with pytest.raises(ModelError, match="does not know option"):
        load_vllm("vllm:some/model", LoadOptions(extra={"prefix_cache": True}))
