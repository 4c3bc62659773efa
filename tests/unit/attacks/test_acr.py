"""ACR (adversarial compression ratio) on tiny in-process models: the arithmetic, the schedule,
a prompt found by the search that really makes greedy decoding write the target, "not found",
refusals, cancel, the options and the registry entry."""

from __future__ import annotations

import copy
import re
import threading

import pytest
import torch

from memprobe_core.attacks import AttackOptions, ModelSet, registry, run_method
from memprobe_core.attacks.acr import (
    DEFAULT_MAX_TOKENS_CAP,
    ACROptions,
    acr_record,
    acr_value,
    initial_prompt,
    length_schedule,
    max_prompt_tokens,
)
from memprobe_core.attacks.events import SearchStep
from memprobe_core.attacks.gcg_core import GcgSearchConfig, gcg_search
from memprobe_core.attacks.model_set import MissingModelError
from memprobe_core.cli.common import parse_method_option
from memprobe_core.errors import UsageError
from memprobe_core.membership.measure import measure_result
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.models import load
from memprobe_core.models.scripted import ScriptedGenerator
from memprobe_core.snippets.split import Snippet, split
from tests.unit.attacks.test_attacks_gcg import TinyHF, tiny_llama
from tests.unit.attacks.test_attacks_reverse_lm import word_tokenizer
from tests.unit.attacks.test_methods_contract import GRAMMAR, LETTER

SENTENCE = "alpha bravo charlie delta echo foxtrot golf hotel"
NOISE = " ".join(f"w{i}" for i in range(40))  # words the model never saw (fillers, candidates)


@pytest.fixture(scope="module")
def tok():
    return word_tokenizer([SENTENCE, NOISE])


@pytest.fixture(scope="module")
def memorizer(tok):
    """A tiny Llama trained (seconds) to write SENTENCE: its suffix is memorized."""
    model = tiny_llama(len(tok), seed=0).train()
    ids = torch.tensor([tok.encode(SENTENCE, add_special_tokens=False) + [tok.eos_token_id]])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(30):
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.05, "the tiny model did not learn its sentence"
    return TinyHF(model.eval(), tok, "tiny-memorizer")


@pytest.fixture(scope="module")
def random_victim(tok):
    return TinyHF(tiny_llama(len(tok), seed=1), tok, "tiny-random")


@pytest.fixture(scope="module")
def piece(tok):
    """prefix "alpha bravo" (2 tokens), suffix "charlie … hotel" (6 tokens): the target."""
    return split(Snippet("s", SENTENCE, "legal"), tok, 8, prefix_ratio=0.25)


def acr_options(**acr) -> AttackOptions:
    return AttackOptions(seed=0, method_options={"acr": ACROptions(**acr)})


# From the filler, one token at a time, the whole vocabulary in reach of one step.
FROM_FILLER = dict(
    min_tokens=1,
    step_tokens=1,
    max_tokens=3,
    steps_per_length=5,
    top_k=64,
    search_width=64,
    init="filler",
    filler="w0",
)


def test_acr_is_target_over_prompt_tokens_and_memorized_above_one():
    assert acr_value(10, 4) == 2.5 and acr_value(3, 3) == 1.0
    with pytest.raises(ValueError, match="0 tokens"):
        acr_value(5, 0)
    assert acr_record(10, 4, 4) == {
        "acr": 2.5,
        "acr_prompt_tokens": 4,
        "acr_target_tokens": 10,
        "acr_memorized": True,
        "acr_bound": None,
    }
    assert not acr_record(6, 6, 6)["acr_memorized"]  # as long as the target: no compression
    missed = acr_record(6, None, 8)
    assert missed["acr"] is None and missed["acr_bound"] == 0.75 and not missed["acr_memorized"]
    assert acr_record(6, None, None)["acr_bound"] is None  # nothing searched: no bound


def test_the_schedule_grows_to_the_longest_length_and_ends_on_it():
    assert length_schedule(5, 5, 20) == [5, 10, 15, 20]
    assert length_schedule(5, 5, 12) == [5, 10, 12]
    assert length_schedule(1, 1, 3) == [1, 2, 3]
    assert length_schedule(4, 9, 4) == [4]
    with pytest.raises(ValueError, match="no schedule"):
        length_schedule(6, 1, 5)


def test_the_default_longest_prompt_is_twice_the_target_capped_but_never_below_it():
    assert max_prompt_tokens(ACROptions(), 10) == 20
    assert max_prompt_tokens(ACROptions(), 40) == DEFAULT_MAX_TOKENS_CAP
    assert max_prompt_tokens(ACROptions(), 134) == 134  # the verdict stays reachable
    assert max_prompt_tokens(ACROptions(min_tokens=8), 2) == 8
    assert max_prompt_tokens(ACROptions(max_tokens=7), 100) == 7


def test_each_length_starts_from_the_prefix_tail_then_from_the_last_best_and_filler():
    prefix, filler = [11, 12, 13], [9]
    assert initial_prompt(2, [], prefix, filler) == [12, 13]
    assert initial_prompt(3, [50, 51], prefix, filler) == [11, 12, 13]  # the prefix wins
    assert initial_prompt(5, [50, 51, 52], prefix, filler) == [9, 9, 50, 51, 52]
    assert initial_prompt(4, [], prefix, filler) == [9, 11, 12, 13]
    assert initial_prompt(3, [], [], [7, 8]) == [7, 8, 7]  # init="filler": no prefix


@pytest.fixture(scope="module")
def found(memorizer, piece):
    """One search from the filler on the memorizer (shared: it is the slow part), its events."""
    events: list = []
    result = run_method(
        "acr", piece, ModelSet(victim=memorizer), acr_options(**FROM_FILLER), on_event=events.append
    )
    return result, events


def test_a_found_prompt_makes_greedy_decoding_write_the_target(found, memorizer, piece):
    result, events = found
    v = result.verbatim
    assert result.status == "finished" and v["acr_memorized"] and v["acr_bound"] is None
    assert v["acr_target_tokens"] == 6 and v["acr"] == 6 / v["acr_prompt_tokens"] > 1
    prompt_ids = memorizer.tokenizer.encode(result.prompt, add_special_tokens=False)
    assert len(prompt_ids) == v["acr_prompt_tokens"] and result.prompt != "w0"  # GCG moved
    # Plain greedy generation (no draft, no teacher forcing) writes the whole target.
    plain = memorizer.variant(speculative=False).generate([result.prompt], max_new_tokens=6)
    assert plain[0][0].token_ids == list(piece.suffix_ids)
    raw = memorizer.torch_model.generate(
        torch.tensor([prompt_ids]), max_new_tokens=6, do_sample=False
    )
    assert raw[0, len(prompt_ids) :].tolist() == list(piece.suffix_ids)
    assert result.output == piece.suffix and result.mem == 1.0
    # The search stopped at the first success: fewer steps than its budget, one per event.
    record = result.trace[0].extra
    assert record["found"] and record["found_at_tokens"] == v["acr_prompt_tokens"]
    steps = [e for e in events if isinstance(e, SearchStep)]
    assert len(steps) == record["steps_done"]
    assert record["lengths"][-1]["steps"] < FROM_FILLER["steps_per_length"]
    assert not any(t["exact"] for t in record["lengths"][:-1])
    assert [e.step for e in steps] == list(range(1, len(steps) + 1))
    assert result.manifest["acr"]["lengths_tried"] == [t["tokens"] for t in record["lengths"]]
    # Costs: the GCG passes plus one teacher-forced pass per distinct prompt checked.
    c = result.costs
    assert c.search_backward_passes >= 1 and c.search_forward_passes > c.search_backward_passes
    assert c.victim_queries == 1 and c.search_seconds > 0


def test_the_true_prefix_start_is_found_without_a_step(memorizer, piece):
    options = acr_options(min_tokens=2, max_tokens=4, steps_per_length=3, top_k=8, search_width=8)
    events: list = []
    result = run_method("acr", piece, ModelSet(victim=memorizer), options, on_event=events.append)
    assert result.prompt == "alpha bravo" and result.verbatim["acr"] == 3.0
    assert result.manifest["acr"]["lengths_tried"] == [2]  # the first success ends the search
    assert result.trace[0].extra["steps_done"] == 0 and not any(
        isinstance(e, SearchStep) for e in events
    )
    assert result.costs.search_backward_passes == 0 and result.costs.search_forward_passes == 1


def test_not_found_gives_no_ratio_a_bound_and_no_verdict(random_victim, piece):
    options = acr_options(
        min_tokens=1, step_tokens=1, max_tokens=2, steps_per_length=2, top_k=8, search_width=8
    )
    result = run_method("acr", piece, ModelSet(victim=random_victim), options)
    v = result.verbatim
    assert result.status == "finished"
    assert (v["acr"], v["acr_prompt_tokens"], v["acr_memorized"]) == (None, None, False)
    assert v["acr_bound"] == 6 / 2 and v["acr_target_tokens"] == 6
    record = result.trace[0].extra
    assert not record["found"] and [t["tokens"] for t in record["lengths"]] == [1, 2]
    assert [t["steps"] for t in record["lengths"]] == [2, 2]
    # The longest length's best prompt is what the victim answered.
    assert result.prompt == record["lengths"][-1]["prompt"]
    assert len(random_victim.tokenizer.encode(result.prompt, add_special_tokens=False)) == 2


def test_the_unit_runner_keeps_the_acr_figures_beside_the_output_metrics(found, memorizer, piece):
    result = copy.deepcopy(found[0])
    acr_figures = dict(result.verbatim)
    measure_result(
        result, piece, ModelSet(victim=memorizer), MeasureOptions(signals=False, extract_k=6)
    )
    assert {k: result.verbatim[k] for k in acr_figures} == acr_figures
    assert result.verbatim["extractable"]  # the output is the suffix


def test_a_black_box_victim_is_refused_by_name(piece):
    endpoint = ScriptedGenerator(default="x", model_id="remote/model", tokenizer=None)
    with pytest.raises(MissingModelError, match=r"weights.*remote/model.*'hf' backend"):
        run_method("acr", piece, ModelSet(victim=endpoint), AttackOptions())
    with pytest.raises(MissingModelError, match="'fake'"):
        run_method("acr", piece, ModelSet(victim=load("fake")), AttackOptions())


def test_a_cancel_before_the_start_asks_nothing_even_of_a_black_box(piece):
    cancel = threading.Event()
    cancel.set()
    endpoint = ScriptedGenerator(default="x", model_id="remote/model", tokenizer=None)
    result = run_method("acr", piece, ModelSet(victim=endpoint), AttackOptions(), cancel=cancel)
    assert result.status == "cancelled" and result.trace == [] and result.costs.victim_queries == 0


def test_a_cancel_midway_answers_the_best_prompt_so_far(random_victim, piece):
    cancel = threading.Event()

    def on_event(event):
        if isinstance(event, SearchStep) and event.step == 2:
            cancel.set()

    options = acr_options(
        min_tokens=1, step_tokens=1, max_tokens=3, steps_per_length=4, top_k=8, search_width=8
    )
    result = run_method(
        "acr", piece, ModelSet(victim=random_victim), options, on_event=on_event, cancel=cancel
    )
    assert result.status == "cancelled"
    record = result.trace[0].extra
    assert record["steps_done"] == 2 and [t["tokens"] for t in record["lengths"]] == [1]
    assert result.costs.victim_queries == 1 and result.output
    assert result.verbatim["acr_bound"] == 6.0  # nothing found up to 1 token (so far)


def test_events_follow_the_method_grammar(found):
    result, events = found
    assert events[-1].result is result
    assert GRAMMAR.fullmatch("".join(LETTER[type(e)] for e in events))


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("min_tokens", 0, "acr.min_tokens=0"),
        ("step_tokens", 0, "acr.step_tokens=0"),
        ("max_tokens", 0, "acr.max_tokens=0"),
        ("steps_per_length", -1, "acr.steps_per_length=-1"),
        ("top_k", 0, "acr.top_k=0"),
        ("search_width", 100_000, "acr.search_width=100000"),
        ("batch_size", 0, "acr.batch_size=0"),
        ("init", "random", "acr.init='random'"),
        ("filler", "  ", "acr.filler='  '"),
    ],
)
def test_options_out_of_bounds_are_refused_by_name(field, value, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        ACROptions(**{field: value})


def test_a_longest_length_below_the_shortest_is_refused():
    with pytest.raises(ValueError, match=r"acr\.max_tokens=3: give at least acr\.min_tokens=5"):
        ACROptions(min_tokens=5, max_tokens=3)


def test_options_come_from_their_section_and_the_command_line():
    assert AttackOptions().for_method("acr") == ACROptions()
    stored = AttackOptions(method_options={"acr": {"min_tokens": 2, "init": "filler"}})
    assert stored.for_method("acr") == ACROptions(min_tokens=2, init="filler")
    assert AttackOptions.from_dict(stored.to_dict()).for_method("acr") == stored.for_method("acr")
    assert parse_method_option("acr.steps_per_length=7") == ("acr", "steps_per_length", 7)
    assert parse_method_option("acr.max_tokens=none") == ("acr", "max_tokens", None)
    with pytest.raises(UsageError, match="acr has no option 'steps'"):
        parse_method_option("acr.steps=7")


def test_registry_entry_needs_a_white_box_victim():
    spec = registry.get_method("acr")
    assert (spec.label, spec.roles, spec.white_box_roles) == ("ACR", ("victim",), ("victim",))
    assert spec.extracts and not spec.verbatim and spec.options_class is ACROptions
    assert not spec.default_in_audit and not spec.default_in_compare
    assert (
        registry.get_method("interactive").rank < spec.rank < registry.get_method("verbatim").rank
    )
    assert "acr" in registry.offered_methods(["victim"], ["victim"])
    assert "acr" not in registry.offered_methods(["victim", "base"], ["base"])
    assert registry.roles_needed(["acr"]) == ["victim"]


def test_the_gcg_engine_ends_when_its_stop_callback_says_so(random_victim):
    seen: list = []

    def stop(ids):
        seen.append(list(ids))
        return len(seen) == 2

    result = gcg_search(
        random_victim.torch_model,
        random_victim.tokenizer,
        [5, 6],
        [7, 8],
        GcgSearchConfig(steps=5, top_k=8, search_width=8),
        stop=stop,
    )
    assert result.stopped and len(result.losses) == 2 and seen[-1] == result.best_ids
    assert not gcg_search(
        random_victim.torch_model,
        random_victim.tokenizer,
        [5, 6],
        [7, 8],
        GcgSearchConfig(steps=2, top_k=8, search_width=8),
    ).stopped
