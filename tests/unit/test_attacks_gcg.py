"""GCG toward the true suffix on tiny in-process models (Llama- and Gemma-3-shaped)."""

from __future__ import annotations

import threading

import pytest
import torch

from memprobe_core.attacks import AttackOptions, MissingModelError, ModelSet, gcg_search, run_gcg
from memprobe_core.attacks.gcg import round_trips
from memprobe_core.data import Snippet, split
from memprobe_core.models.base import Generator

N_WORDS = 200


def tiny_tokenizer():
    """A word-level HF tokenizer: w0..w199, plus 'a b' (a token that cannot round-trip)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<eos>"] + [f"w{i}" for i in range(N_WORDS)] + ["a b"]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>")
    tok.name_or_path = "tiny-words"
    return tok


def tiny_llama(vocab: int, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                      pad_token_id=0, eos_token_id=1, bos_token_id=None)
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).eval()


def TinyHF(model, tokenizer, model_id="tiny"):
    """The real hf backend (greedy victim, white box) around an in-process model."""
    from memprobe_core.models.hf import HFGenerator

    return HFGenerator(model, tokenizer, model_id=model_id)


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return tiny_llama(len(tok))


def target_loss(model, lead, prompt, target):
    ids = torch.tensor([lead + prompt + target])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(lead + prompt) - 1 : -1]
    return float(torch.nn.functional.cross_entropy(logits, torch.tensor(target)))


def test_loss_never_increases_and_drops_on_a_tiny_model(model, tok):
    prompt, target = list(range(2, 12)), list(range(50, 70))
    steps = []
    res = gcg_search(model, tok, prompt, target, steps=8, top_k=16, search_width=32, seed=0,
                     not_allowed=tok.all_special_ids, on_step=lambda *a: steps.append(a))
    assert len(res.losses) == 8 and [s[0] for s in steps] == list(range(1, 9))
    assert all(b <= a for a, b in zip(res.losses, res.losses[1:]))
    assert res.losses[0] <= res.initial_loss
    assert res.best_loss < res.initial_loss - 0.02  # it found better prompts
    assert res.best_loss == pytest.approx(target_loss(model, [], res.best_ids, target), abs=1e-4)
    assert res.initial_loss == pytest.approx(target_loss(model, [], prompt, target), abs=1e-4)
    assert sum(a != b for a, b in zip(res.best_ids, prompt)) >= 1
    assert not set(res.best_ids) & set(tok.all_special_ids)


def test_search_is_deterministic_and_leaves_the_model_untouched(model, tok):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    a = gcg_search(model, tok, [2, 3, 4, 5], [60, 61, 62], steps=3, top_k=8, search_width=16, seed=1)
    b = gcg_search(model, tok, [2, 3, 4, 5], [60, 61, 62], steps=3, top_k=8, search_width=16,
                   seed=1, batch_size=3)
    assert a.best_ids == b.best_ids and a.losses == pytest.approx(b.losses, abs=1e-5)
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


def test_candidates_that_do_not_round_trip_are_dropped(model, tok):
    ab = tok.convert_tokens_to_ids("a b")
    assert round_trips(tok, [2, 3]) and not round_trips(tok, [2, ab])
    # top_k = whole vocabulary with everything but 'a b' blocked: every candidate uses 'a b'.
    blocked = [i for i in range(len(tok)) if i != ab]
    res = gcg_search(model, tok, [2, 3, 4], [60, 61], steps=2, top_k=len(tok), search_width=8,
                     seed=0, not_allowed=blocked)
    assert res.evaluated == 0 and res.dropped > 0
    assert res.best_ids == [2, 3, 4] and res.losses == [res.initial_loss] * 2


def test_scaled_embeddings_give_the_same_loss_on_both_paths():
    # Gemma-3 multiplies embeddings by sqrt(hidden) inside the embedding layer: the one-hot
    # gradient path must apply it too, or its loss differs from the input_ids path.
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    tok = tiny_tokenizer()
    cfg = Gemma3TextConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                           head_dim=16, max_position_embeddings=256, sliding_window=16,
                           pad_token_id=0, eos_token_id=1, bos_token_id=None)
    torch.manual_seed(0)
    gemma = Gemma3ForCausalLM(cfg).eval()
    prompt, target = [5, 6, 7, 8], [40, 41, 42, 43, 44]
    res = gcg_search(gemma, tok, prompt, target, steps=1, top_k=8, search_width=8, seed=0)
    assert res.initial_loss == pytest.approx(target_loss(gemma, [], prompt, target), abs=1e-4)


def test_cancel_stops_between_steps(model, tok):
    cancel = threading.Event()

    def on_step(step, *_):
        if step == 2:
            cancel.set()

    res = gcg_search(model, tok, [2, 3, 4], [60, 61], steps=10, top_k=8, search_width=8, seed=0,
                     on_step=on_step, cancel=cancel)
    assert res.cancelled and len(res.losses) == 2


def words_split(n_prefix=6, n_suffix=12, domain="cc"):
    text = " ".join(f"w{i}" for i in range(100, 100 + n_prefix + n_suffix))
    return split(Snippet("g", text, domain=domain), tiny_tokenizer(), n_prefix + n_suffix,
                 prefix_ratio=n_prefix / (n_prefix + n_suffix))


def test_run_gcg_scores_the_victim_on_the_decoded_best_prompt(model, tok):
    base = TinyHF(model, tok, "tiny-base")
    victim = TinyHF(tiny_llama(len(tok), seed=1), tok, "tiny-victim")
    events = []
    sp = words_split()
    res = run_gcg(sp, ModelSet(victim=victim, base=base),
                  AttackOptions(gcg_steps=3, gcg_top_k=16, gcg_search_width=16, seed=0),
                  on_event=events.append)
    kinds = [(e.kind, getattr(e, "round", getattr(e, "step", None))) for e in events]
    assert kinds == [("search_step", 1), ("search_step", 2), ("search_step", 3),
                     ("round_started", 1), ("candidate_scored", 1), ("round_finished", 1),
                     ("finished", None)]
    step_losses = [e.loss for e in events if e.kind == "search_step"]
    assert step_losses == res.trace[0].extra["losses"]
    assert all(b <= a for a, b in zip(step_losses, step_losses[1:]))
    assert res.prompt == events[2].best_prompt
    (cand,) = res.trace
    assert cand.output == victim.generate([res.prompt], max_new_tokens=12)[0][0].text
    assert res.costs.victim_queries == 1 and res.costs.search_seconds > 0
    assert res.dis is not None and 0 < res.dis <= 1
    assert res.manifest["gcg"]["steps_done"] == 3


def test_gcg_needs_a_white_box_base(tok):
    class BlackBox(Generator):
        backend, model_id = "openai", "remote"

        def _generate(self, *a, **k):
            raise AssertionError("not called")

    sp = words_split()
    with pytest.raises(MissingModelError, match="white-box"):
        run_gcg(sp, ModelSet(victim=BlackBox(), base=BlackBox()), AttackOptions())
    with pytest.raises(MissingModelError, match="ModelSet.base"):
        run_gcg(sp, ModelSet(victim=BlackBox()), AttackOptions())
