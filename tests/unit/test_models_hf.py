"""The hf backend on a tiny random Llama: padding, batching, EOS, seeding, chat, OOM halving."""

from __future__ import annotations

import pytest
import torch

from memprobe_core.models import ModelError, chat_as_text
from memprobe_core.models.hf import HFGenerator, pick_device, pick_dtype
from tests.helpers.tiny_models import tiny_causal_lm, tiny_hf_generator

SHORT = "Licensed"
LONG = "Licensed under the Apache License, Version 2.0 (the License); you may not use this file"


@pytest.fixture(scope="module")
def gen() -> HFGenerator:
    return tiny_hf_generator()


def test_left_padding_gives_same_greedy_output_as_alone(gen):
    together = gen.generate([SHORT, LONG], max_new_tokens=10)
    alone_short = gen.generate([SHORT], max_new_tokens=10)
    alone_long = gen.generate([LONG], max_new_tokens=10)
    assert together[0] == alone_short[0]
    assert together[1] == alone_long[0]
    assert gen.tokenizer.padding_side == "left"


def test_max_batch_size_splits_but_keeps_results(gen):
    small = tiny_hf_generator(max_batch_size=1)
    requests = [SHORT, LONG, "We the People"]
    assert small.generate(requests, max_new_tokens=6) == gen.generate(requests, max_new_tokens=6)
    sampled = small.generate(requests, n=3, max_new_tokens=6, temperature=1.0, seed=5)
    assert [len(row) for row in sampled] == [3, 3, 3]


def test_stops_at_stop_token_and_counts_it(gen):
    free = gen.generate([LONG], max_new_tokens=8)[0][0]
    assert free.finish_reason == "length" and free.num_tokens == 8
    ids = gen.tokenizer(LONG)["input_ids"]
    model, tokenizer = gen.torch_model, gen.tokenizer
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
    new = out[0, len(ids):].tolist()
    stop_at = next(k for k in range(2, 8) if new[k] not in new[:k])  # first fresh token after 2
    stopping = HFGenerator(model, tokenizer, model_id="tiny-stop", stop_token_ids=[new[stop_at]])
    got = stopping.generate([LONG], max_new_tokens=8)[0][0]
    assert got.finish_reason == "stop"
    assert got.num_tokens == stop_at + 1
    assert got.text == tokenizer.decode(new[:stop_at], skip_special_tokens=True)


def test_prompt_is_trimmed(gen):
    out = gen.generate([LONG], max_new_tokens=4)[0][0]
    assert not out.text.startswith(LONG)
    assert len(gen.tokenizer(out.text, add_special_tokens=False)["input_ids"]) <= 6


def test_seeded_sampling_leaves_global_rng_alone(gen):
    torch.manual_seed(99)
    expected = torch.rand(3)
    torch.manual_seed(99)
    gen.generate([LONG], n=4, max_new_tokens=5, temperature=1.0, seed=1)
    assert torch.equal(torch.rand(3), expected)


def test_sampling_temperature_and_top_p_take_effect(gen):
    wide = gen.generate([LONG], n=6, max_new_tokens=6, temperature=1.5, seed=0)[0]
    narrow = gen.generate([LONG], n=6, max_new_tokens=6, temperature=1.0, top_p=1e-6, seed=0)[0]
    greedy = gen.generate([LONG], max_new_tokens=6)[0][0]
    assert len({c.text for c in wide}) > 1
    # top_p near 0 keeps only the most likely token: sampling collapses to greedy
    assert {c.text for c in narrow} == {greedy.text}


def test_chat_uses_template_when_present_else_text(gen):
    chat = [{"role": "user", "content": "hi there"}]
    assert gen.has_chat_template
    assert gen.prompt_text(chat).endswith("<|assistant|>")
    plain = tiny_hf_generator(chat_template=False)
    assert not plain.has_chat_template
    assert plain.prompt_text(chat) == chat_as_text(chat)
    assert len(plain.generate([chat], max_new_tokens=3)[0]) == 1


def test_white_box_exposure_and_manifest(gen):
    assert gen.white_box
    assert gen.torch_model is not None and gen.device.type == "cpu"
    manifest = gen.manifest()
    assert manifest["dtype"] == "float32" and manifest["device"] == "cpu"
    assert manifest["model_type"] == "llama" and manifest["parameters"] > 0


def test_cuda_oom_halves_the_batch(monkeypatch):
    small = tiny_hf_generator()
    real = small._run_batch
    sizes: list[int] = []

    def flaky(prompts, config):
        sizes.append(len(prompts))
        if len(prompts) > 2:
            raise torch.OutOfMemoryError("simulated CUDA OOM")
        return real(prompts, config)

    monkeypatch.setattr(small, "_run_batch", flaky)
    out = small.generate([SHORT, LONG], n=4, max_new_tokens=3, temperature=1.0, seed=0)
    assert [len(row) for row in out] == [4, 4]
    assert sizes[:3] == [8, 4, 2] and all(s <= 2 for s in sizes[2:])
    assert sum(s for s in sizes if s <= 2) == 8


def test_oom_on_one_sequence_is_a_model_error(monkeypatch):
    small = tiny_hf_generator(max_batch_size=1)

    def always(prompts, config):
        raise torch.OutOfMemoryError("simulated")

    monkeypatch.setattr(small, "_run_batch", always)
    with pytest.raises(ModelError, match="out of GPU memory"):
        small.generate([SHORT], max_new_tokens=2)


def test_pad_token_falls_back_to_eos():
    model, tokenizer = tiny_causal_lm()
    tokenizer.pad_token = None
    gen = HFGenerator(model, tokenizer, model_id="nopad")
    assert gen.tokenizer.pad_token == gen.tokenizer.eos_token


def test_device_and_dtype_choice():
    assert pick_device("cpu") == "cpu"
    assert pick_dtype(None, "cpu") == torch.float32
    assert pick_dtype(None, "cuda") == torch.bfloat16
    assert pick_dtype("float16", "cpu") == torch.float16
    with pytest.raises(ModelError, match="dtype"):
        pick_dtype("int3", "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ModelError, match="no CUDA"):
            pick_device("cuda")
