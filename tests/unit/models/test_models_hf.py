"""The hf backend on a tiny random Llama: padding, batching, EOS, seeding, chat, OOM halving."""

from __future__ import annotations

import pytest
import torch

from memprobe_core.models import ModelError, chat_as_text
from memprobe_core.models.devices import pick_device
from memprobe_core.models.hf import HFGenerator, pick_dtype
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
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=8,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    new = out[0, len(ids) :].tolist()
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

    def flaky(prompts, config, drafts=None, step=None):
        sizes.append(len(prompts))
        if len(prompts) > 2:
            raise torch.OutOfMemoryError("simulated CUDA OOM")
        return real(prompts, config, drafts, step)

    monkeypatch.setattr(small, "_run_batch", flaky)
    out = small.generate([SHORT, LONG], n=4, max_new_tokens=3, temperature=1.0, seed=0)
    assert [len(row) for row in out] == [4, 4]
    assert sizes[:3] == [8, 4, 2] and all(s <= 2 for s in sizes[2:])
    assert sum(s for s in sizes if s <= 2) == 8


def test_oom_on_one_sequence_is_a_model_error(monkeypatch):
    small = tiny_hf_generator(max_batch_size=1)

    def always(prompts, config, drafts=None, step=None):
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


# --- memprobe's decoding loop (hf_decode) -------------------------------------------------------

REQUESTS = [SHORT, LONG, "We the People of the United States", "def add(a, b):"]


def _reference(gen: HFGenerator) -> HFGenerator:
    """The same model and tokenizer behind model.generate (the reference path)."""
    return gen.variant(generation_loop="transformers")


class _Calls:
    """Records the (batch, width) of every forward call of a model."""

    def __init__(self, model):
        self.shapes: list[tuple[int, int]] = []
        self._handle = model.register_forward_pre_hook(self._record, with_kwargs=True)

    def _record(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.shapes.append(tuple(ids.shape))

    def close(self):
        self._handle.remove()


def _first_fresh_token(gen: HFGenerator, text: str, after: int) -> tuple[int, int]:
    """(step, token) of the first greedy token at step >= after not generated before it."""
    ids = list(gen.generate([text], max_new_tokens=10)[0][0].token_ids)
    step = next(k for k in range(after, len(ids)) if ids[k] not in ids[:k])
    return step, ids[step]


def test_own_loop_greedy_matches_model_generate_bit_for_bit(gen):
    ours = gen.generate(REQUESTS, max_new_tokens=12)
    theirs = _reference(gen).generate(REQUESTS, max_new_tokens=12)
    assert gen.manifest()["generation_loop"] == "memprobe"
    assert _reference(gen).manifest()["generation_loop"] == "transformers"
    assert [r[0].token_ids for r in ours] == [r[0].token_ids for r in theirs]
    assert ours == theirs


def test_own_loop_matches_generate_when_rows_stop_early(gen):
    step, token = _first_fresh_token(gen, LONG, 2)
    stopping = gen.variant(stop_token_ids=[token])
    ours = stopping.generate(REQUESTS, max_new_tokens=10)
    theirs = _reference(stopping).generate(REQUESTS, max_new_tokens=10)
    assert ours == theirs
    assert ours[1][0].finish_reason == "stop" and ours[1][0].num_tokens == step + 1


def test_finished_rows_leave_the_batch(gen):
    short_ids = gen.generate([SHORT], max_new_tokens=8)[0][0].token_ids
    long_ids = gen.generate([LONG], max_new_tokens=8)[0][0].token_ids
    # a stop token that ends the LONG row early and never occurs in the SHORT row
    step = next(
        k for k in range(1, 6) if long_ids[k] not in long_ids[:k] and long_ids[k] not in short_ids
    )
    stopping = gen.variant(stop_token_ids=[long_ids[step]])
    calls = _Calls(gen.torch_model)
    try:
        out = stopping.generate([SHORT, LONG], max_new_tokens=8)
    finally:
        calls.close()
    assert out[0][0].finish_reason == "length" and out[1][0].finish_reason == "stop"
    # token k comes from call k (call 0 is the prefill); after the LONG row's stop token only
    # the SHORT row is computed
    assert [b for b, _ in calls.shapes] == [2] * (step + 1) + [1] * (7 - step)


def test_one_prefill_shared_by_the_n_samples(gen):
    prompt_len = len(gen.prompt_ids(LONG))
    calls = _Calls(gen.torch_model)
    try:
        out = gen.generate([LONG], n=5, max_new_tokens=4, temperature=1.0, seed=3)
    finally:
        calls.close()
    assert calls.shapes[0] == (1, prompt_len)  # the prompt went through the model once
    assert all(shape == (5, 1) for shape in calls.shapes[1:])
    assert len(calls.shapes) == 4  # prefill + one call per further token
    assert len({c.text for c in out[0]}) > 1  # five rows, not five copies of one sample


def test_two_requests_with_the_same_prompt_share_a_prefill(gen):
    calls = _Calls(gen.torch_model)
    try:
        gen.generate([LONG, SHORT, LONG], n=2, max_new_tokens=3, temperature=1.0, seed=0)
    finally:
        calls.close()
    assert calls.shapes[0][0] == 2  # two distinct prompts prefilled, six rows decoded
    assert calls.shapes[1] == (6, 1)


def test_sampling_is_seeded_in_both_loops(gen):
    kwargs = dict(n=3, max_new_tokens=6, temperature=1.3, top_p=0.9, seed=11)
    for g in (gen, _reference(gen)):
        first = g.generate([LONG], **kwargs)
        assert g.generate([LONG], **kwargs) == first
        assert g.generate([LONG], **dict(kwargs, seed=12)) != first
    # The own loop draws by inverse CDF (hf_decode.draw), generate by torch.multinomial: the
    # same distribution (tests/unit/models/test_hf_sampling.py), not the same random stream.


def test_completion_carries_the_token_ids_of_its_text(gen):
    step, token = _first_fresh_token(gen, LONG, 2)
    free = gen.generate([LONG], max_new_tokens=10)[0][0]
    stopped = gen.variant(stop_token_ids=[token]).generate([LONG], max_new_tokens=10)[0][0]
    assert len(free.token_ids) == free.num_tokens == 10
    assert gen.tokenizer.decode(list(free.token_ids), skip_special_tokens=True) == free.text
    assert stopped.token_ids == free.token_ids[:step]  # the stop token is counted, not kept
    assert stopped.num_tokens == step + 1


@pytest.mark.parametrize("window", [6, 44])
def test_sliding_window_model_gives_generate_outputs(window):
    """Gemma-3 (the embedded victim's family) mixes sliding-window and full attention layers.

    Window 6: every batch's prompts are longer than the window. Window 44: the padded prompts
    (38 tokens) fit and the sequence crosses the window while decoding 12 tokens, so the
    preallocated cache hands its sliding layer over to transformers mid-run.
    """
    from transformers import Gemma3ForCausalLM

    from tests.helpers.tiny_models import tiny_gemma3_config, tiny_tokenizer

    tokenizer = tiny_tokenizer()
    config = tiny_gemma3_config(
        len(tokenizer),
        sliding_window=window,
        num_key_value_heads=2,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Gemma3ForCausalLM(config).eval()
    gemma = HFGenerator(model, tokenizer, model_id="tiny-gemma3")
    step, token = _first_fresh_token(gemma, REQUESTS[3], 1)
    for g in (gemma, gemma.variant(stop_token_ids=[token])):
        assert g.generate(REQUESTS, max_new_tokens=12) == _reference(g).generate(
            REQUESTS, max_new_tokens=12
        )


def test_unknown_generation_loop_is_refused():
    model, tokenizer = tiny_causal_lm()
    with pytest.raises(ValueError, match="generation_loop 'fast'"):
        HFGenerator(model, tokenizer, model_id="x", generation_loop="fast")


def test_models_the_loop_cannot_drive_fall_back_to_generate(monkeypatch):
    import memprobe_core.models.hf as hf

    monkeypatch.setattr(hf, "supports_own_loop", lambda model: False)
    model, tokenizer = tiny_causal_lm()
    fallback = HFGenerator(model, tokenizer, model_id="x")
    assert fallback.manifest()["generation_loop"] == "transformers"
    assert fallback.generate([LONG], max_new_tokens=5)[0][0].num_tokens == 5


def test_load_hf_options_reach_the_generator(tmp_path):
    from memprobe_core.models.base import LoadOptions
    from memprobe_core.models.hf import load_hf

    model, tokenizer = tiny_causal_lm()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    default = load_hf(str(tmp_path), LoadOptions(device="cpu"))
    assert (
        default.manifest()["attn_implementation"] == "sdpa"
    )  # transformers' default where supported
    assert default.manifest()["generation_loop"] == "memprobe" and default.compile is False
    chosen = load_hf(
        str(tmp_path),
        LoadOptions(
            device="cpu", extra={"attn_implementation": "eager", "generation_loop": "transformers"}
        ),
    )
    assert chosen.manifest()["attn_implementation"] == "eager"
    assert chosen.manifest()["generation_loop"] == "transformers"
    assert chosen.generate([LONG], max_new_tokens=6) == default.generate([LONG], max_new_tokens=6)
    with pytest.raises(ModelError, match="does not know option.*'colour'.*generation_loop"):
        load_hf(str(tmp_path), LoadOptions(device="cpu", extra={"colour": "blue"}))
    for switch in ("compile", "speculative", "prefill_buckets", "screened_head"):
        # A string "false" would be true: refused before anything loads.
        with pytest.raises(ModelError, match=f"{switch}='false' is not an on/off value"):
            load_hf(str(tmp_path), LoadOptions(device="cpu", extra={switch: "false"}))
    off = load_hf(str(tmp_path), LoadOptions(device="cpu", extra={"screened_head": False}))
    assert off.screened_head is False and off.speculative is True


def test_compile_option_asks_generate_for_a_static_cache(gen):
    from memprobe_core.models.hf_decode import BatchDecoding, generation_config

    compiled = gen.variant(compile=True)
    assert (
        compiled.manifest()["generation_loop"] == "transformers" and compiled.manifest()["compile"]
    )
    spec = BatchDecoding(max_new_tokens=8, temperature=0.0, top_p=1.0, stop_ids=(2,), pad_id=0)
    config = generation_config(gen.torch_model, spec, compile_=True)
    assert config.cache_implementation == "static" and config.compile_config is not None
    assert generation_config(gen.torch_model, spec).cache_implementation is None
