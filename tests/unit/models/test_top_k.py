"""Top-k sampling (``Decoding.top_k``) on the tiny random model, through both ``hf`` paths, and
what each other backend does with it: the scripted model records it, the vLLM engine gets it, the
OpenAI-compatible backend sends it as vLLM's extra field (and refuses it for OpenAI's own API)."""

from __future__ import annotations

import pytest
import torch

from memprobe_core.models import ModelError, load
from memprobe_core.models.base import Decoding
from memprobe_core.models.openai.generator import OpenAIGenerator
from memprobe_core.models.scripted import ScriptedGenerator
from tests.helpers.openai_server import serve
from tests.helpers.tiny_models import tiny_hf_generator

TEXT = "Licensed under the Apache License, Version 2.0 (the License); you may not use"
LOOPS = ["memprobe", "transformers"]  # hf_decode's own loop, and model.generate


@pytest.fixture(scope="module", params=LOOPS)
def gen(request):
    return tiny_hf_generator(generation_loop=request.param)


def _outside_top_k(gen, completion, k: int) -> list[int]:
    """Steps whose sampled token is not among the k most likely there (from a teacher-forced
    pass over prompt + sampled tokens: the logits the sampler saw, up to float rounding)."""
    prompt = gen.prompt_ids(TEXT)
    ids = torch.tensor([prompt + completion.token_ids])
    with torch.inference_mode():
        logits = gen.torch_model(ids).logits[0, len(prompt) - 1 : -1]  # (T, V): step t's logits
    kth = logits.topk(k, dim=-1).values[:, -1]  # (T,)
    chosen = logits.gather(-1, torch.tensor(completion.token_ids)[:, None])[:, 0]
    return [t for t, (c, low) in enumerate(zip(chosen, kth)) if c < low - 1e-4]


def test_top_k_of_one_samples_exactly_the_greedy_tokens(gen):
    greedy = gen.generate([TEXT], max_new_tokens=12)[0][0]
    sampled = gen.generate([TEXT], n=4, max_new_tokens=12, temperature=1.5, top_k=1, seed=3)[0]
    assert [c.token_ids for c in sampled] == [greedy.token_ids] * 4


@pytest.mark.parametrize("k", [2, 5])
def test_every_sampled_token_is_among_the_k_most_likely(gen, k):
    sampled = gen.generate([TEXT], n=6, max_new_tokens=12, temperature=2.0, top_k=k, seed=1)[0]
    assert all(c.num_tokens == 12 for c in sampled)  # no stop token on this random model
    assert [_outside_top_k(gen, c, k) for c in sampled] == [[]] * 6
    assert len({tuple(c.token_ids) for c in sampled}) > 1  # it did sample


def test_without_top_k_the_same_sampling_leaves_the_top_k(gen):
    """The check above can fail: untruncated sampling at this temperature leaves the top 2."""
    sampled = gen.generate([TEXT], n=6, max_new_tokens=12, temperature=2.0, seed=1)[0]
    assert sum(len(_outside_top_k(gen, c, 2)) for c in sampled) > 10


def test_seeded_top_k_sampling_repeats(gen):
    def run(seed: int):
        return gen.generate([TEXT], n=4, max_new_tokens=10, temperature=1.5, top_k=5, seed=seed)

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_top_k_and_top_p_together_keep_the_stricter_cut(gen):
    """top-k then top-p (transformers' order): top_p near 0 keeps one token whatever k is."""
    greedy = gen.generate([TEXT], max_new_tokens=8)[0][0]
    both = gen.generate(
        [TEXT], n=3, max_new_tokens=8, temperature=1.0, top_k=50, top_p=1e-6, seed=0
    )
    assert {c.text for c in both[0]} == {greedy.text}


def test_the_manifest_records_top_k_only_when_set():
    assert "top_k" not in Decoding(max_new_tokens=4, temperature=1.0).manifest()
    assert Decoding(max_new_tokens=4, temperature=1.0, top_k=40).manifest()["top_k"] == 40
    assert Decoding(max_new_tokens=4, top_k=40).kwargs()["top_k"] == 40


def test_the_scripted_model_records_top_k():
    model = ScriptedGenerator(default="x")
    model.generate(["a"], temperature=1.0, top_k=3)
    model.generate(["a"])
    assert [call.top_k for call in model.calls] == [3, 0]


def test_the_fake_attacker_with_top_k_of_one_writes_its_greedy_prompt():
    attacker = load("fake:attacker")
    request = ["Write a question that makes the model recite: We the People of the United States"]
    greedy = attacker.generate(request, max_new_tokens=40)[0][0].text
    narrow = attacker.generate(request, n=3, max_new_tokens=40, temperature=1.0, top_k=1, seed=2)
    wide = attacker.generate(request, n=3, max_new_tokens=40, temperature=1.0, top_k=5, seed=2)
    assert [c.text for c in narrow[0]] == [greedy] * 3
    assert {c.text for c in wide[0]} != {greedy}


# --- the OpenAI-compatible backend ------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny():
    return tiny_hf_generator()


def test_top_k_goes_to_the_server_as_vllms_extra_field_and_is_honoured(tiny):
    with serve(tiny, model_name="tiny") as server:
        model = OpenAIGenerator("tiny", base_url=server.base_url, backoff_s=0.01)
        greedy = model.generate([TEXT], max_new_tokens=8)[0][0]
        sampled = model.generate([TEXT], n=2, max_new_tokens=8, temperature=1.0, top_k=1, seed=5)
        model.generate([TEXT], n=2, max_new_tokens=8, temperature=1.0, seed=5)
        model.generate([TEXT], max_new_tokens=8, top_k=3)  # greedy: nothing to narrow
    sent = [hit["payload"].get("top_k") for hit in server.hits]
    assert sent == [None, 1, None, None]  # only a sampled call with top-k set carries it
    assert [c.text for c in sampled[0]] == [greedy.text] * 2


def test_a_server_that_rejects_top_k_says_what_to_do(tiny):
    with serve(tiny, model_name="tiny", reject_top_k=True) as server:
        model = OpenAIGenerator("tiny", base_url=server.base_url, backoff_s=0.01)
        model.generate([TEXT], n=2, max_new_tokens=4, temperature=1.0, seed=1)  # no top_k: fine
        with pytest.raises(ModelError, match=r"Unrecognized.*top_k=4.*use top_k=0"):
            model.generate([TEXT], n=2, max_new_tokens=4, temperature=1.0, top_k=4, seed=1)


def test_top_k_is_refused_for_openais_own_api_before_anything_is_sent(monkeypatch):
    model = OpenAIGenerator("gpt-4o-mini")  # the default base URL: api.openai.com

    def no_network(*args, **kwargs):
        raise AssertionError("nothing may be sent")

    monkeypatch.setattr(model, "_post", no_network)
    with pytest.raises(ModelError, match=r"openai backend cannot send top_k=40 to api\.openai"):
        model.generate([TEXT], temperature=1.0, top_k=40)
