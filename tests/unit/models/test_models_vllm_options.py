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


class _CharTokenizer:
    """One id per character (its code point), BOS = 1, as a vLLM tokenizer stand-in."""

    chat_template = "{{ messages }}"
    bos_token_id = 1

    def encode(self, text, add_special_tokens=False):
        return ([1] if add_special_tokens else []) + [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i != 1)


def _scored(prompt: str):
    """What vLLM returns for prompt_logprobs=0: BOS (None), then each character's log-prob,
    here −0.1 × its position, keyed by the prompt token (the engine also adds top tokens)."""
    ids = [1, *(ord(c) for c in prompt)]
    entries = [None] + [
        {tok: types.SimpleNamespace(logprob=-0.1 * i), 7: types.SimpleNamespace(logprob=-9.0)}
        for i, tok in enumerate(ids[1:], start=1)
    ]
    return types.SimpleNamespace(prompt_token_ids=ids, prompt_logprobs=entries, outputs=[])


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
            return _CharTokenizer()

        def generate(self, prompts, params, use_tqdm=False):
            made["calls"].append((list(prompts), params.kwargs))
            if "prompt_logprobs" in params.kwargs:
                return [_scored(p) for p in prompts]
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


def test_top_k_reaches_the_engine_only_when_sampling_with_it(fake_vllm):
    gen = load_vllm("vllm:some/model", LoadOptions())
    gen.generate(["p"], n=2, temperature=1.0, top_k=40, seed=0)
    gen.generate(["p"], n=2, temperature=1.0, seed=0)
    gen.generate(["p"], top_k=40)  # greedy: nothing to narrow
    # Left out otherwise: vLLM's own "off" is -1 or 0 depending on its version.
    assert [kwargs.get("top_k") for _, kwargs in fake_vllm["calls"]] == [40, None, None]


def test_ngram_speculative_decoding_is_off_unless_asked(fake_vllm):
    load_vllm("vllm:some/model", LoadOptions())
    assert "speculative_config" not in fake_vllm["engines"][0]
    load_vllm("vllm:some/model", LoadOptions(extra={"speculative_ngram_tokens": 8}))
    assert fake_vllm["engines"][1]["speculative_config"] == {
        "method": "ngram",
        "num_speculative_tokens": 8,
        "prompt_lookup_max": 3,
        "prompt_lookup_min": 2,
    }
    with pytest.raises(ModelError, match="speculative_ngram_tokens"):
        load_vllm("vllm:some/model", LoadOptions(extra={"speculative_ngram_tokens": 0}))


def test_an_unknown_engine_option_is_refused(fake_vllm):
    with pytest.raises(ModelError, match="does not know option"):
        load_vllm("vllm:some/model", LoadOptions(extra={"prefix_cache": True}))


def test_prompt_log_probs_are_one_engine_call_and_give_the_signals(fake_vllm):
    from memprobe_core.membership import MeasureOptions
    from memprobe_core.membership import signals as sig
    from memprobe_core.snippets.split import Snippet, split

    gen = load_vllm("vllm:some/model", LoadOptions())
    assert gen.scores_text
    scored = gen.text_logprobs(["ab cd", "xy"])
    prompts, params = fake_vllm["calls"][-1]
    assert prompts == ["ab cd", "xy"] and len(fake_vllm["calls"]) == 1
    assert params["prompt_logprobs"] == 0 and params["max_tokens"] == 1
    assert scored[0].log_probs == pytest.approx((-0.1, -0.2, -0.3, -0.4, -0.5))
    assert scored[0].offsets == (0, 1, 2, 3, 4)  # BOS is not text: the first char starts at 0
    sig.clear_cache()
    piece = split(Snippet("s", "ab cd ef"), gen.tokenizer, 8)  # prefix "ab " (round(8·0.33) = 3)
    out = sig.compute_signals(gen, piece, MeasureOptions(min_k_percent=50))
    assert out["scored_by"] == "server" and out["tokens"] == 8
    assert out["loss"] == pytest.approx(0.45)  # mean of 0.1 … 0.8
    # The suffix "cd ef" is the tokens starting at char 3 or later: log-probs −0.4 … −0.8.
    assert out["suffix_loss"] == pytest.approx(0.6)
    assert out["min_k"] == pytest.approx(-0.65)  # the lowest 4 of 8: −0.8, −0.7, −0.6, −0.5
    assert out["min_k_pp"] is None
