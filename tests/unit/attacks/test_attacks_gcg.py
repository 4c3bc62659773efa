"""GCG toward the true suffix on tiny in-process models (Llama- and Gemma-3-shaped)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import threading

import pytest
import torch

from memprobe_core.attacks import (
    AttackOptions,
    GcgSearchConfig,
    MissingModelError,
    ModelSet,
    gcg_search,
    run_gcg,
)
from memprobe_core.attacks.gcg import round_trips
from memprobe_core.attacks.options import GCGOptions
from memprobe_core.models.scripted import ScriptedGenerator
from memprobe_core.snippets.split import Snippet, split
from tests.helpers.tiny_models import tiny_gemma3_config

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

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
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
    res = gcg_search(
        model,
        tok,
        prompt,
        target,
        GcgSearchConfig(
            steps=8, top_k=16, search_width=32, seed=0, not_allowed=tok.all_special_ids
        ),
        on_step=lambda *a: steps.append(a),
    )
    assert len(res.losses) == 8 and [s[0] for s in steps] == list(range(1, 9))
    assert all(b <= a for a, b in zip(res.losses, res.losses[1:], strict=False))
    assert res.losses[0] <= res.initial_loss
    assert res.best_loss < res.initial_loss - 0.02  # it found better prompts
    assert res.best_loss == pytest.approx(target_loss(model, [], res.best_ids, target), abs=1e-4)
    assert res.initial_loss == pytest.approx(target_loss(model, [], prompt, target), abs=1e-4)
    assert sum(a != b for a, b in zip(res.best_ids, prompt, strict=False)) >= 1
    assert not set(res.best_ids) & set(tok.all_special_ids)


def test_the_search_config_has_no_sizes_of_its_own_and_is_frozen():
    # GCG's default sizes live in GCGOptions (ACR's in ACROptions): the config repeats none.
    with pytest.raises(TypeError, match="steps"):
        GcgSearchConfig(top_k=8, search_width=8)
    config = GcgSearchConfig(steps=1, top_k=8, search_width=8, not_allowed=[0, 1])
    assert config.not_allowed == (0, 1) and config.batch_size is None and config.prefix_cache
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.steps = 2


def test_search_is_deterministic_and_leaves_the_model_untouched(model, tok):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    config = GcgSearchConfig(steps=3, top_k=8, search_width=16, seed=1)
    a = gcg_search(model, tok, [2, 3, 4, 5], [60, 61, 62], config)
    b = gcg_search(
        model, tok, [2, 3, 4, 5], [60, 61, 62], dataclasses.replace(config, batch_size=3)
    )
    assert a.best_ids == b.best_ids and a.losses == pytest.approx(b.losses, abs=1e-5)
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


def test_candidates_that_do_not_round_trip_are_dropped(model, tok):
    ab = tok.convert_tokens_to_ids("a b")
    assert round_trips(tok, [2, 3]) and not round_trips(tok, [2, ab])
    # top_k = whole vocabulary with everything but 'a b' blocked: every candidate uses 'a b'.
    blocked = [i for i in range(len(tok)) if i != ab]
    res = gcg_search(
        model,
        tok,
        [2, 3, 4],
        [60, 61],
        GcgSearchConfig(steps=2, top_k=len(tok), search_width=8, seed=0, not_allowed=blocked),
    )
    assert res.evaluated == 0 and res.dropped > 0
    assert res.best_ids == [2, 3, 4] and res.losses == [res.initial_loss] * 2


def test_scaled_embeddings_give_the_same_loss_on_both_paths():
    # Gemma-3 multiplies embeddings by sqrt(hidden) inside the embedding layer: the one-hot
    # gradient path must apply it too, or its loss differs from the input_ids path.
    from transformers import Gemma3ForCausalLM

    tok = tiny_tokenizer()
    cfg = tiny_gemma3_config(len(tok), sliding_window=16, layer_types=None)
    torch.manual_seed(0)
    gemma = Gemma3ForCausalLM(cfg).eval()
    prompt, target = [5, 6, 7, 8], [40, 41, 42, 43, 44]
    res = gcg_search(
        gemma, tok, prompt, target, GcgSearchConfig(steps=1, top_k=8, search_width=8, seed=0)
    )
    assert res.initial_loss == pytest.approx(target_loss(gemma, [], prompt, target), abs=1e-4)


def test_cancel_stops_between_steps(model, tok):
    cancel = threading.Event()

    def on_step(step, *_):
        if step == 2:
            cancel.set()

    res = gcg_search(
        model,
        tok,
        [2, 3, 4],
        [60, 61],
        GcgSearchConfig(steps=10, top_k=8, search_width=8, seed=0),
        on_step=on_step,
        cancel=cancel,
    )
    assert res.cancelled and len(res.losses) == 2


def words_split(n_prefix=6, n_suffix=12, domain="cc"):
    text = " ".join(f"w{i}" for i in range(100, 100 + n_prefix + n_suffix))
    return split(
        Snippet("g", text, domain=domain),
        tiny_tokenizer(),
        n_prefix + n_suffix,
        prefix_ratio=n_prefix / (n_prefix + n_suffix),
    )


def test_run_gcg_scores_the_base_answer_to_the_decoded_best_prompt(model, tok):
    base = TinyHF(model, tok, "tiny-base")
    victim = TinyHF(tiny_llama(len(tok), seed=1), tok, "tiny-victim")
    events = []
    sp = words_split()
    res = run_gcg(
        sp,
        ModelSet(victim=victim, base=base),
        AttackOptions(seed=0, gcg=GCGOptions(steps=3, top_k=16, search_width=16)),
        on_event=events.append,
    )
    kinds = [(e.kind, getattr(e, "round", getattr(e, "step", None))) for e in events]
    assert kinds == [
        ("search_step", 1),
        ("search_step", 2),
        ("search_step", 3),
        ("round_started", 1),
        ("candidate_scored", 1),
        ("round_finished", 1),
        ("finished", None),
    ]
    step_losses = [e.loss for e in events if e.kind == "search_step"]
    assert step_losses == res.trace[0].extra["losses"]
    assert all(b <= a for a, b in itertools.pairwise(step_losses))
    assert res.prompt == events[2].best_prompt
    (cand,) = res.trace
    # The paper evaluates "P-S-Base & GCG" on the base model: the base answers by default.
    assert cand.output == base.generate([res.prompt], max_new_tokens=12)[0][0].text
    assert cand.output != victim.generate([res.prompt], max_new_tokens=12)[0][0].text
    assert res.manifest["answer_model"] == {"role": "base", "model_id": "tiny-base"}
    assert res.costs.victim_queries == 1 and res.costs.search_seconds > 0
    assert res.dis is not None and 0 < res.dis <= 1
    assert res.manifest["gcg"]["steps_done"] == 3


def test_victim_answers_when_asked(model, tok):
    base = TinyHF(model, tok, "tiny-base")
    victim = TinyHF(tiny_llama(len(tok), seed=1), tok, "tiny-victim")
    res = run_gcg(
        words_split(),
        ModelSet(victim=victim, base=base),
        AttackOptions(
            seed=0, gcg=GCGOptions(steps=2, top_k=8, search_width=8, answer_model="victim")
        ),
    )
    assert res.output == victim.generate([res.prompt], max_new_tokens=12)[0][0].text
    assert res.output != base.generate([res.prompt], max_new_tokens=12)[0][0].text
    assert res.manifest["answer_model"] == {"role": "victim", "model_id": "tiny-victim"}
    assert res.manifest["options"]["gcg"]["answer_model"] == "victim"


def test_answer_model_option_is_validated_and_old_configs_load():
    with pytest.raises(ValueError, match="gcg_answer_model='attacker': use one of base, victim"):
        AttackOptions(gcg=GCGOptions(answer_model="attacker"))
    stored = AttackOptions().to_dict()
    assert stored["gcg"]["answer_model"] == "base"
    # A config stored before the method options were nested, and before this option existed.
    legacy = {k: v for k, v in stored.items() if k not in ("interactive", "gcg", "reverse", "ps")}
    assert AttackOptions.from_dict(legacy).gcg.answer_model == "base"
    assert (
        AttackOptions.from_dict(dict(legacy, gcg_answer_model="victim")).gcg.answer_model
        == "victim"
    )


def test_cli_flag_sets_the_answer_model():
    import argparse

    from memprobe_core.cli.common import add_method_options, attack_options

    parser = argparse.ArgumentParser()
    add_method_options(parser)
    assert attack_options(parser.parse_args([])).gcg.answer_model == "base"
    assert (
        attack_options(parser.parse_args(["--gcg-answer-model", "victim"])).gcg.answer_model
        == "victim"
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["--gcg-answer-model", "reverse"])


def test_gcg_needs_a_white_box_base(tok):
    black_box = ScriptedGenerator(model_id="remote", tokenizer=None)  # no weights, no tokenizer
    sp = words_split()
    with pytest.raises(MissingModelError, match="white-box"):
        run_gcg(sp, ModelSet(victim=black_box, base=black_box), AttackOptions())
    with pytest.raises(MissingModelError, match=r"ModelSet\.base"):
        run_gcg(sp, ModelSet(victim=black_box), AttackOptions())
    assert black_box.calls == []  # refused before anything was asked


# ---- prefix cache, fixed tokens after the prompt, pass counts ----

LEAD, AFTER = [20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37], [90, 91, 92]


def test_prefix_cache_gives_the_same_losses_as_recomputing(model, tok):
    config = GcgSearchConfig(steps=3, top_k=16, search_width=16, seed=2)
    ctx = {"lead_ids": LEAD, "after_ids": AFTER}
    cached = gcg_search(model, tok, [2, 3, 4, 5, 6], [60, 61, 62, 63], config, **ctx)
    no_cache = dataclasses.replace(config, prefix_cache=False)
    plain = gcg_search(model, tok, [2, 3, 4, 5, 6], [60, 61, 62, 63], no_cache, **ctx)
    assert cached.best_ids == plain.best_ids
    assert cached.losses == pytest.approx(plain.losses, abs=1e-5)
    assert cached.step_losses == pytest.approx(plain.step_losses, abs=1e-5)
    # …and both are the loss of the full sequence run from scratch.
    ref = target_loss(model, LEAD, [2, 3, 4, 5, 6, *AFTER], [60, 61, 62, 63])
    assert cached.initial_loss == pytest.approx(ref, abs=1e-5)
    ref_best = target_loss(model, LEAD, cached.best_ids + AFTER, [60, 61, 62, 63])
    assert cached.best_loss == pytest.approx(ref_best, abs=1e-5)


def test_prefix_cache_on_sliding_window_layers_longer_than_the_window():
    # Gemma-3 mixes sliding-window (16 here) and full layers; the cached prefix (18 tokens) is
    # longer than the window, so the expanded cache must keep the window's offsets right.
    from transformers import Gemma3ForCausalLM

    tok = tiny_tokenizer()
    cfg = tiny_gemma3_config(len(tok), sliding_window=16)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        gemma = Gemma3ForCausalLM(cfg).eval()
    config = GcgSearchConfig(steps=2, top_k=8, search_width=8, seed=0)
    ctx = {"lead_ids": LEAD, "after_ids": AFTER}
    cached = gcg_search(gemma, tok, [5, 6, 7, 8], [40, 41, 42], config, **ctx)
    no_cache = dataclasses.replace(config, prefix_cache=False)
    plain = gcg_search(gemma, tok, [5, 6, 7, 8], [40, 41, 42], no_cache, **ctx)
    assert cached.losses == pytest.approx(plain.losses, abs=1e-5)
    assert cached.initial_loss == pytest.approx(
        target_loss(gemma, LEAD, [5, 6, 7, 8, *AFTER], [40, 41, 42]), abs=1e-5
    )


def test_fixed_tokens_after_the_prompt_are_context_not_target(model, tok):
    prompt, target = [2, 3, 4, 5], [60, 61, 62]
    gcg = GCGOptions()
    config = GcgSearchConfig(steps=0, top_k=gcg.top_k, search_width=gcg.search_width)
    without = gcg_search(model, tok, prompt, target, config)
    with_after = gcg_search(model, tok, prompt, target, config, after_ids=AFTER)
    assert with_after.initial_loss != pytest.approx(without.initial_loss, abs=1e-3)
    # Loss on the target only: the same as scoring target after prompt + after.
    assert with_after.initial_loss == pytest.approx(
        target_loss(model, [], prompt + AFTER, target), abs=1e-5
    )


def test_search_is_deterministic_under_a_seed(model, tok):
    ctx = {"lead_ids": LEAD[:3], "after_ids": AFTER}

    def seeded(seed):
        return GcgSearchConfig(steps=4, top_k=16, search_width=16, seed=seed)

    a = gcg_search(model, tok, [2, 3, 4, 5], [60, 61, 62], seeded(7), **ctx)
    b = gcg_search(model, tok, [2, 3, 4, 5], [60, 61, 62], seeded(7), **ctx)
    c = gcg_search(model, tok, [2, 3, 4, 5], [60, 61, 62], seeded(8), **ctx)
    assert a.best_ids == b.best_ids and a.losses == b.losses and a.step_losses == b.step_losses
    assert (c.step_losses, c.best_ids) != (a.step_losses, a.best_ids)  # the seed matters


def test_search_counts_every_pass(model, tok):
    prompt, target = [2, 3, 4, 5, 6], [60, 61, 62, 63]
    ctx = {"lead_ids": LEAD, "after_ids": AFTER}
    config = GcgSearchConfig(steps=4, top_k=16, search_width=16, seed=3, batch_size=16)
    res = gcg_search(model, tok, prompt, target, config, **ctx)  # one batch a step
    moves = sum(
        1
        for a, b in zip([res.initial_loss, *res.losses[:-2]], res.losses[:-1], strict=True)
        if b < a
    )
    grads = 1 + moves  # the first gradient, then one per move except after the last step
    scored_steps = sum(
        1 for x in res.step_losses if not math.isnan(x)
    )  # steps with a candidate to score
    length = len(prompt) + len(AFTER) + len(target) - 1  # the last target token is never input
    assert res.counts.backward_passes == grads >= 1
    assert res.counts.forward_passes == 1 + grads + scored_steps  # prefix, gradients, batches
    assert res.counts.sequences == 1 + grads + res.evaluated
    assert res.counts.tokens == len(LEAD) + (grads + res.evaluated) * length
    assert res.counts.seconds > 0
    small = gcg_search(model, tok, prompt, target, dataclasses.replace(config, batch_size=5), **ctx)
    assert small.counts.forward_passes == 1 + grads + sum(
        -(-n // 5) for n in _per_step_evaluated(model, tok, prompt, target, config, ctx)
    )
    no_cache = dataclasses.replace(config, prefix_cache=False)
    plain = gcg_search(model, tok, prompt, target, no_cache, **ctx)
    assert plain.counts.forward_passes == grads + scored_steps  # no prefix pass…
    assert plain.counts.tokens == (grads + res.evaluated) * (
        len(LEAD) + length
    )  # …prefix each time


def _per_step_evaluated(model, tok, prompt, target, config, ctx):
    """Candidates scored at each step of the same search (spied on candidates_loss)."""
    from memprobe_core.attacks import gcg_core

    sizes, real = [], gcg_core.candidates_loss

    def spy(problem, cands, batch_size, cancel):
        sizes.append(cands.shape[0])
        return real(problem, cands, batch_size, cancel)

    gcg_core.candidates_loss = spy
    try:
        gcg_search(model, tok, prompt, target, config, **ctx)
    finally:
        gcg_core.candidates_loss = real
    return sizes


def test_run_gcg_costs_hold_the_search_passes(model, tok):
    base = TinyHF(model, tok, "tiny-base")
    res = run_gcg(
        words_split(),
        ModelSet(victim=base, base=base),
        AttackOptions(seed=0, gcg=GCGOptions(steps=2, top_k=8, search_width=8)),
    )
    solo = gcg_search(
        model,
        tok,
        words_split().prefix_ids,
        words_split().suffix_ids,
        GcgSearchConfig(steps=2, top_k=8, search_width=8, seed=0, not_allowed=tok.all_special_ids),
    )
    c = res.costs
    assert (
        c.search_forward_passes,
        c.search_backward_passes,
        c.search_sequences,
        c.search_tokens,
    ) == (
        solo.counts.forward_passes,
        solo.counts.backward_passes,
        solo.counts.sequences,
        solo.counts.tokens,
    )
    assert c.search_forward_passes > 0 and c.search_tokens > 0


def test_two_concurrent_searches_on_one_model_keep_their_own_counts(model, tok):
    def search(seed):
        c = gcg_search(
            model,
            tok,
            [2, 3, 4, 5, 6],
            [60, 61, 62],
            GcgSearchConfig(steps=3, top_k=16, search_width=16, seed=seed),
            lead_ids=LEAD[:4],
        ).counts
        return c.forward_passes, c.backward_passes, c.sequences, c.tokens  # values, read at once

    solo = {seed: search(seed) for seed in (0, 1)}
    together = {}
    threads = [
        threading.Thread(target=lambda s=s: together.__setitem__(s, search(s))) for s in (0, 1)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert together == solo
