"""Algorithm 1 (the attacker loop) on scripted fake models: best kept, events, cancel, costs."""

from __future__ import annotations

import threading

import pytest

from memprobe_core import plugins
from memprobe_core.attacks import (
    AttackOptions,
    MissingModelError,
    ModelSet,
    method_names,
    registry,
    run_interactive,
    run_method,
)
from memprobe_core.attacks.options import InteractiveOptions
from memprobe_core.attacks.prompts import INIT_META_PROMPT
from memprobe_core.metrics import dis
from memprobe_core.snippets.split import Snippet, split
from tests.helpers.scripted_models import (
    counting_victim,
    first_requests,
    make_split,
    parrot,
    question_attacker,
)


def run(options=None, attacker=None, victim=None, **kw):
    attacker = attacker or question_attacker()
    victim = victim or counting_victim()
    options = options or AttackOptions(
        seed=3, interactive=InteractiveOptions(rounds=3, n_candidates=6)
    )
    return run_interactive(make_split(), ModelSet(victim=victim, attacker=attacker), options, **kw)


def test_loop_keeps_best_and_final_objective_is_max_over_trace():
    attacker = question_attacker()
    result = run(attacker=attacker)
    eligible = [c for c in result.trace if "empty" not in c.flags]
    assert result.objective == max(c.objective for c in eligible)
    best = next(c for c in result.trace if c.objective == result.objective)
    assert result.prompt == best.prompt and result.output == best.output
    assert len(result.trace) == 1 + 3 * 6
    # Each round's argmax is flagged, and it is what the next round's refine request paraphrases.
    for r in range(3):
        rows = [c for c in result.trace if c.round == r]
        round_best = [c for c in rows if c.is_round_best]
        assert len(round_best) == 1
        assert round_best[0].objective == max(c.objective for c in rows)
        next_request = first_requests(attacker)[r + 1]
        assert round_best[0].prompt in next_request[-1]["content"]
    # The init prompt was cleaned of its label and quotes.
    assert result.trace[0].prompt == "ask number 1"
    assert result.trace[0].round == 0
    assert result.dis == pytest.approx(dis("ask number 1", result.prompt))
    assert result.mem > result.trace[0].mem  # the loop improved on p_init on this victim
    assert result.status == "finished"


def test_events_arrive_in_order_and_complete():
    events = []
    result = run(
        on_event=events.append,
        options=AttackOptions(seed=1, interactive=InteractiveOptions(rounds=2, n_candidates=4)),
    )
    kinds = [(e.kind, getattr(e, "round", None)) for e in events]
    expected = [("round_started", 0), ("candidate_scored", 0), ("round_finished", 0)]
    for r in (1, 2):
        expected += [("round_started", r)] + [("candidate_scored", r)] * 4 + [("round_finished", r)]
    expected += [("finished", None)]
    assert kinds == expected
    assert events[-1].result is result
    scored = [e.candidate for e in events if e.kind == "candidate_scored"]
    assert scored == result.trace
    assert all({"mem", "lcs_p", "objective"} <= set(vars(c)) for c in scored)
    assert events[3].n == 4


def test_cancel_stops_within_one_candidate_and_returns_best_so_far():
    cancel = threading.Event()
    events = []

    def on_event(e):
        events.append(e)
        if e.kind == "candidate_scored" and e.round == 1 and e.candidate.index == 2:
            cancel.set()

    result = run(on_event=on_event, cancel=cancel)
    scored = [e for e in events if e.kind == "candidate_scored"]
    assert len(scored) == 1 + 3  # p_init + candidates 0, 1, 2 of round 1; nothing after the flag
    assert result.status == "cancelled"
    assert events[-1].kind == "finished"
    assert len(result.trace) == 4
    assert result.objective == max(c.objective for c in result.trace)


def test_cancel_before_start_returns_an_empty_cancelled_result():
    cancel = threading.Event()
    cancel.set()
    events = []
    result = run(on_event=events.append, cancel=cancel)
    assert result.status == "cancelled" and result.trace == [] and result.prompt == ""
    assert [e.kind for e in events] == ["round_started", "finished"]


def test_empty_and_duplicate_candidates_are_kept_and_flagged():
    attacker = question_attacker(
        script=["ask number 2", "", "ask number 5", "ask number 5", "ask number 2", '""']
    )
    victim = counting_victim()
    result = run(
        attacker=attacker,
        victim=victim,
        options=AttackOptions(interactive=InteractiveOptions(rounds=1, n_candidates=5)),
    )
    flags = [c.flags for c in result.trace]
    assert flags == [[], ["empty"], [], ["duplicate"], ["duplicate"], ["empty"]]
    assert [c.n for c in attacker.calls] == [1, 5]  # the script's texts went one per candidate
    # Victim queried once per distinct non-empty prompt: 'ask number 2' (init), then 'ask number 5'.
    assert result.costs.victim_queries == 2
    assert [len(c.requests) for c in victim.calls] == [1, 1]
    dup = result.trace[3]
    assert dup.output == result.trace[2].output and dup.objective == result.trace[2].objective
    assert result.prompt == "ask number 5"
    assert all(c.objective == 0.0 for c in result.trace if "empty" in c.flags)


def test_empty_candidates_are_never_chosen_even_with_the_top_objective():
    # 'ask number 0' gives a non-matching output with an LCS_P of 0, so every prompt scores <= 0;
    # an empty candidate scores exactly 0 and must still lose to real prompts.
    attacker = question_attacker(script=["ask number 0", "", "ask number 0 bravo"])
    result = run(
        attacker=attacker,
        options=AttackOptions(alpha=0.1, interactive=InteractiveOptions(rounds=1, n_candidates=2)),
    )
    assert result.prompt in {"ask number 0", "ask number 0 bravo"}
    assert result.trace[1].flags == ["empty"] and not result.trace[1].is_round_best
    assert [c.n for c in attacker.calls] == [1, 2]


def test_one_batched_attacker_and_victim_call_per_round():
    attacker, victim = question_attacker(), counting_victim()
    result = run(
        attacker=attacker,
        victim=victim,
        options=AttackOptions(seed=5, interactive=InteractiveOptions(rounds=3, n_candidates=6)),
    )
    assert attacker.stats.calls == 4  # init + 3 rounds
    assert victim.stats.calls == 4
    assert all(c.max_new_tokens == make_split().suffix_tokens for c in victim.calls)
    assert result.costs.attacker_queries == 1 + 3 * 6
    assert result.costs.victim_queries == victim.stats.sequences
    assert (
        result.costs.generated_tokens
        == attacker.stats.generated_tokens + victim.stats.generated_tokens
    )
    assert result.costs.wall_seconds >= result.costs.scoring_seconds >= 0


def test_unbatched_makes_one_call_per_candidate_with_same_scoring():
    attacker, victim = question_attacker(), counting_victim()
    options = AttackOptions(
        seed=5, interactive=InteractiveOptions(rounds=2, n_candidates=5, batched=False)
    )
    result = run(attacker=attacker, victim=victim, options=options)
    assert attacker.stats.calls == 1 + 2 * 5
    assert victim.stats.calls == victim.stats.sequences == result.costs.victim_queries
    assert len(result.trace) == 11


def test_deterministic_under_a_seed():
    a = run(
        options=AttackOptions(seed=9, interactive=InteractiveOptions(rounds=2, n_candidates=5))
    ).to_dict()
    b = run(
        options=AttackOptions(seed=9, interactive=InteractiveOptions(rounds=2, n_candidates=5))
    ).to_dict()
    c = run(
        options=AttackOptions(seed=10, interactive=InteractiveOptions(rounds=2, n_candidates=5))
    ).to_dict()
    for d in (a, b, c):
        d.pop("costs")
    assert a == b
    assert [t["prompt"] for t in a["trace"]] != [t["prompt"] for t in c["trace"]]


def test_partial_access_shows_only_the_prefix_to_the_init_model():
    sp = make_split()
    for access, sees_suffix in (("partial", False), ("full", True)):
        init, attacker = question_attacker(), question_attacker()
        run_interactive(
            sp,
            ModelSet(victim=counting_victim(), attacker=attacker, init=init),
            AttackOptions(interactive=InteractiveOptions(rounds=1, n_candidates=2, access=access)),
        )
        content = first_requests(init)[0][-1]["content"]
        assert content.startswith(INIT_META_PROMPT)
        assert sp.prefix in content
        assert (sp.suffix in content) is sees_suffix
        assert len(init.calls) == 1 and len(attacker.calls) == 1  # init model is separate


def test_base_attacker_gets_few_shot_text_and_instruct_a_chat():
    for chat in (False, True):
        attacker = question_attacker(chat=chat)
        result = run(
            attacker=attacker,
            options=AttackOptions(interactive=InteractiveOptions(rounds=1, n_candidates=2)),
        )
        init_req, refine_req = first_requests(attacker)
        if chat:
            assert isinstance(init_req, list) and init_req[0]["role"] == "user"
        else:
            assert isinstance(init_req, str) and init_req.rstrip().endswith("Question:")
            assert isinstance(refine_req, str) and refine_req.rstrip().endswith("New question:")
        assert result.manifest["attacker_format"] == ("chat" if chat else "few-shot text")


def test_alpha_from_the_table_or_the_option():
    res = run()  # books at length 18: the paper did not tune that length
    assert (res.alpha, res.manifest["alpha_source"]) == (0.5, "fallback")
    sp = split(Snippet("b", " ".join(["w"] * 250), domain="books"), "whitespace", 200)
    res = run_interactive(
        sp,
        ModelSet(victim=counting_victim(), attacker=question_attacker()),
        AttackOptions(interactive=InteractiveOptions(rounds=0)),
    )
    assert (res.alpha, res.manifest["alpha_source"]) == (0.2, "paper:llama")
    res = run(options=AttackOptions(alpha=0.7, interactive=InteractiveOptions(rounds=0)))
    assert (res.alpha, res.manifest["alpha_source"]) == (0.7, "override")
    assert res.objective == pytest.approx(0.7 * res.mem - 0.3 * res.lcs_p)


def test_result_has_pii_costs_and_manifest():
    result = run(
        options=AttackOptions(seed=2, interactive=InteractiveOptions(rounds=1, n_candidates=3))
    )
    m = result.manifest
    assert m["models"]["victim"]["model_id"] == "test/victim"
    assert m["models"]["init"]["model_id"] == "test/attacker"
    assert m["seed"] == 2 and m["rouge_variant"] == "recall"
    split_record = {k: v for k, v in m["split"].items() if k not in ("prefix", "suffix")}
    assert split_record == {
        "length": 18,
        "prefix_tokens": 6,
        "suffix_tokens": 12,
        "tokenizer": "whitespace",
        "bos_in_prefix": False,
    }
    assert len(m["split"]["suffix"].split()) == 12 and m["split"]["prefix"]
    assert m["decoding"]["attacker"]["temperature"] == 1.0
    assert {"torch", "transformers", "memprobe"} <= set(m["versions"])
    assert m["options"]["interactive"]["n_candidates"] == 3
    assert result.pii["counts"] == {"truth": 0, "copied": 0, "invented": 0}
    # The result survives a round trip through a dict (what the store keeps).
    from memprobe_core.attacks import AttackResult

    assert AttackResult.from_dict(result.to_dict()) == result


def test_missing_attacker_and_unknown_method_say_what_to_do():
    with pytest.raises(MissingModelError, match="attacker"):
        run_interactive(make_split(), ModelSet(victim=counting_victim()), AttackOptions())
    with pytest.raises(ValueError, match="ps_base, ps_inst, reverse_lm, gcg, interactive"):
        run_method("nope", make_split(), ModelSet(victim=counting_victim()), AttackOptions())
    # memprobe's own (an installed plugin's method may follow them)
    built_in = {m for m in method_names() if registry.method_source(m) == plugins.BUILTIN}
    assert built_in == {
        "ps_base",
        "ps_inst",
        "reverse_lm",
        "gcg",
        "interactive",
        "acr",
        "divergence",
        "signals",
        "verbatim",
    }
    res = run_method(
        "interactive",
        make_split(),
        ModelSet(victim=counting_victim(), attacker=question_attacker()),
        AttackOptions(interactive=InteractiveOptions(rounds=1, n_candidates=2)),
    )
    assert res.method == "interactive"


def test_pii_report_of_the_chosen_output_counts_copied_and_invented():
    text = "one two three four five six please write to bob@example.com for the rest of it"
    sp = split(Snippet("p", text), "whitespace", len(text.split()), prefix_ratio=0.4)
    victim = parrot("test/victim", "write to bob@example.com or call 555-123-4567 now")
    res = run_interactive(
        sp,
        ModelSet(victim=victim, attacker=question_attacker()),
        AttackOptions(interactive=InteractiveOptions(rounds=0)),
    )
    assert res.pii["copied"]["email"] == ["bob@example.com"]
    assert res.pii["invented"]["phone"] == ["5551234567"]
