"""The bfloat16-screened vocabulary projection chooses exactly what the float32 one chooses.

The screen runs on any CPU (torch emulates bfloat16 where it is not native), so the tests force
``cpu_has_bf16`` on and check the choices, not the speed.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from transformers import Gemma3ForCausalLM

from memprobe_core.models import hf_greedy_head
from memprobe_core.models.hf_decode import BatchDecoding, decode
from memprobe_core.models.hf_greedy_head import ScreenedHead, screened_head, screening_applies
from memprobe_core.models.hf_speculative import decode_drafted, greedy_agreement
from tests.helpers.tiny_models import tiny_gemma3_config

VOCAB = 20_000  # above MIN_VOCABULARY, so the tiny model is screened


@pytest.fixture
def native_bf16(monkeypatch):
    monkeypatch.setattr(hf_greedy_head, "cpu_has_bf16", lambda: True)


def _near_duplicate_rows(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A random head in which 200 rows have a near copy (closer than bfloat16 resolves), and
    hidden states pointing at those rows: bfloat16 often ranks the copy first where float32
    does not, and the other rows are far below (the screen keeps a handful)."""
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(VOCAB, 64, generator=gen)
    originals, copies = torch.arange(200), torch.arange(10_000, 10_200)
    weight[copies] = weight[originals] + 3e-3 * torch.randn(200, 64, generator=gen)
    hidden = weight[originals] + 0.3 * torch.randn(200, 64, generator=gen)
    return weight, hidden


def test_the_float32_winner_is_chosen_where_bfloat16_ranks_another_first() -> None:
    weight, hidden = _near_duplicate_rows(0)
    want = torch.argmax(F.linear(hidden, weight), dim=-1)
    bf16 = torch.argmax(F.linear(hidden.bfloat16(), weight.bfloat16()).float(), dim=-1)
    assert (bf16 != want).sum() > 50  # the case the margin exists for
    head = ScreenedHead(weight)
    assert torch.equal(head.argmax(hidden), want)
    # Decided among the screened candidates (two a row), not by falling back to full rows.
    assert head.stats.candidates <= 3 * 200 and head.stats.full_rows < 20


def test_without_its_rounding_margin_the_screen_would_choose_wrongly(monkeypatch) -> None:
    """The margin is what makes the choice exact (this test fails if it is not needed)."""
    weight, hidden = _near_duplicate_rows(0)
    want = torch.argmax(F.linear(hidden, weight), dim=-1)
    monkeypatch.setattr(hf_greedy_head, "SCREEN_EPS", 0.0)
    monkeypatch.setattr(hf_greedy_head, "FLOAT32_UNIT", 0.0)
    assert not torch.equal(ScreenedHead(weight).argmax(hidden), want)


def test_an_exact_tie_goes_to_the_lower_index_as_torch_argmax() -> None:
    gen = torch.Generator().manual_seed(1)
    weight = torch.randn(VOCAB, 32, generator=gen)
    hidden = torch.randn(8, 32, generator=gen)
    winners = torch.argmax(F.linear(hidden, weight), dim=-1)
    weight[VOCAB - 1] = weight[winners[0]]  # a later copy of row 0's winner: equal logits
    head = ScreenedHead(weight)
    choices = head.argmax(hidden)
    assert torch.equal(choices, torch.argmax(F.linear(hidden, weight), dim=-1))
    assert int(choices[0]) == int(winners[0]) < VOCAB - 1
    assert head.stats.full_rows >= 1  # the near tie was decided by the full float32 row


def test_random_heads_and_states_agree_with_float32(native_bf16) -> None:
    for seed in range(5):
        gen = torch.Generator().manual_seed(seed)
        weight = torch.randn(VOCAB, 48, generator=gen) * (1 + torch.rand(VOCAB, 1, generator=gen))
        hidden = torch.randn(3, 70, 48, generator=gen) * 4  # several chunks of CHUNK_ROWS
        want = torch.argmax(F.linear(hidden, weight), dim=-1)
        assert torch.equal(ScreenedHead(weight).argmax(hidden), want)


def test_non_finite_states_are_decided_by_the_full_row() -> None:
    gen = torch.Generator().manual_seed(2)
    weight = torch.randn(VOCAB, 16, generator=gen)
    hidden = torch.randn(4, 16, generator=gen)
    hidden[2, 3] = float("nan")
    want = torch.argmax(F.linear(hidden, weight), dim=-1)
    assert torch.equal(ScreenedHead(weight).argmax(hidden), want)


@pytest.fixture
def gemma(native_bf16):
    with torch.random.fork_rng():
        torch.manual_seed(3)
        return Gemma3ForCausalLM(tiny_gemma3_config(VOCAB, sliding_window=20)).eval()


def test_greedy_decoding_is_the_same_screened_or_not(gemma) -> None:
    """Plain steps and drafted verification alike (``spec.screened_head``)."""
    rng = random.Random(0)
    prompts = [[rng.randrange(10, VOCAB) for _ in range(rng.randint(2, 12))] for _ in range(5)]
    spec = BatchDecoding(max_new_tokens=30, temperature=0.0, top_p=1.0, stop_ids=(), pad_id=0)
    with torch.inference_mode():
        plain = decode(gemma, prompts, replace(spec, screened_head=False))
        assert screened_head(gemma) is None or screened_head(gemma).stats.positions == 0
        assert decode(gemma, prompts, spec) == plain
        steps = screened_head(gemma).stats.positions
        assert steps >= 5 * 29  # every row's steps after the prefill went through the screen
        # Half the rows draft their own greedy output, half a changed one.
        refs = [list(r.ids) if i % 2 else list(r.ids[:5]) + [7] * 20 for i, r in enumerate(plain)]
        screened = decode_drafted(gemma, prompts, refs, replace(spec, screened_head=True))
        unscreened = decode_drafted(gemma, prompts, refs, replace(spec, screened_head=False))
    assert screened == unscreened == plain
    assert screened_head(gemma).stats.positions > steps


def test_teacher_forced_agreement_is_the_same_screened_or_not(gemma) -> None:
    rng = random.Random(1)
    prompts = [[rng.randrange(10, VOCAB) for _ in range(6)] for _ in range(4)]
    spec = BatchDecoding(max_new_tokens=24, temperature=0.0, top_p=1.0, stop_ids=(), pad_id=0)
    with torch.inference_mode():
        conts = [list(r.ids) for r in decode(gemma, prompts, spec)]
        conts[1][10] = (conts[1][10] + 1) % VOCAB  # agrees for 10 tokens only
        screened = greedy_agreement(gemma, prompts, conts, 0, screen=True)
        unscreened = greedy_agreement(gemma, prompts, conts, 0, screen=False)
    assert screened == unscreened
    assert screened[1] == 10 and screened[0] == 24


def test_only_plain_float32_projections_are_screened(native_bf16, monkeypatch) -> None:
    config = tiny_gemma3_config(VOCAB, sliding_window=20)
    assert screening_applies(Gemma3ForCausalLM(config))
    capped = tiny_gemma3_config(VOCAB, sliding_window=20, final_logit_softcapping=30.0)
    assert not screening_applies(Gemma3ForCausalLM(capped))
    assert not screening_applies(Gemma3ForCausalLM(config).to(torch.bfloat16))
    assert not screening_applies(Gemma3ForCausalLM(tiny_gemma3_config(512, sliding_window=20)))
    monkeypatch.setattr(hf_greedy_head, "cpu_has_bf16", lambda: False)
    assert not screening_applies(Gemma3ForCausalLM(config))


class _ScaledLogits(Gemma3ForCausalLM):
    """A model whose forward changes its logits after the projection (its argmax flips)."""

    def forward(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = super().forward(*args, **kwargs)
        out.logits = -out.logits
        return out


def test_a_model_whose_logits_are_not_its_projection_is_not_screened(native_bf16) -> None:
    model = _ScaledLogits(tiny_gemma3_config(VOCAB, sliding_window=20)).eval()
    assert screening_applies(model)  # by its parts it could be…
    assert screened_head(model) is None  # …but the check on its own logits refuses it


def test_the_backend_option_turns_screening_off_and_the_manifest_says_so(gemma) -> None:
    from memprobe_core.models.hf import HFGenerator
    from tests.helpers.tiny_models import tiny_causal_lm

    _, tokenizer = tiny_causal_lm()
    on = HFGenerator(gemma, tokenizer, model_id="tiny-gemma")
    off = on.variant(screened_head=False)
    assert on.manifest()["screened_head"] is True
    assert off.manifest()["screened_head"] is False
    prompt = ["a b c d"]
    answer = on.generate(prompt, max_new_tokens=8, references=["e f g"])
    head = screened_head(gemma)
    assert head is not None
    seen = head.stats.positions
    assert seen > 0
    assert off.generate(prompt, max_new_tokens=8, references=["e f g"]) == answer
    assert head.stats.positions == seen  # the unscreened run never used the head


def test_a_decoder_refusing_the_call_falls_back_to_the_plain_pass(gemma, monkeypatch) -> None:
    prompts, refs = [[5, 6, 7, 8]], [[9, 10, 11]]
    spec = BatchDecoding(max_new_tokens=6, temperature=0.0, top_p=1.0, stop_ids=(), pad_id=0)
    with torch.inference_mode():
        want = decode_drafted(gemma, prompts, refs, replace(spec, screened_head=False))
        assert screened_head(gemma) is not None  # the check passes: no cache in it

        def refuse(**kwargs):  # type: ignore[no-untyped-def]
            raise TypeError("unexpected keyword argument 'cache'")

        monkeypatch.setattr(gemma, "get_decoder", lambda: refuse)
        assert decode_drafted(gemma, prompts, refs, replace(spec, screened_head=True)) == want
    assert screened_head(gemma) is None  # not tried again


def test_weights_changed_in_place_are_copied_again(gemma) -> None:
    prompts, refs = [[5, 6, 7, 8], [9, 3, 4]], [[9, 10, 11], []]
    spec = BatchDecoding(max_new_tokens=6, temperature=0.0, top_p=1.0, stop_ids=(), pad_id=0)
    with torch.inference_mode():
        decode_drafted(gemma, prompts, refs, replace(spec, screened_head=True))
    first = screened_head(gemma)
    with torch.no_grad():  # as an optimizer step would
        gemma.get_output_embeddings().weight.mul_(-1.0)
    with torch.inference_mode():
        want = decode(gemma, prompts, replace(spec, screened_head=False))
        assert decode_drafted(gemma, prompts, refs, replace(spec, screened_head=True)) == want
    assert screened_head(gemma) is not first
