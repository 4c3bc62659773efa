"""The verbatim-only method: teacher-forced k-extractability equals what greedy P-S generates."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest

from memprobe_core.attacks import AttackOptions, ModelSet, registry, run_method
from memprobe_core.attacks.model_set import MissingModelError
from memprobe_core.errors import UsageError
from memprobe_core.membership.measure import measure_result
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.membership.verbatim import leading_match
from memprobe_core.models.scripted import ScriptedGenerator
from memprobe_core.snippets.split import Snippet, split
from tests.helpers.tiny_models import tiny_hf_generator

PREFIXES = [
    "Licensed under the Apache License",
    "We the People of the United",
    "def add(a, b):",
    "Permission is hereby granted",
    "WITHOUT WARRANTIES OR CONDITIONS",
    "See the License for the specific",
]


@pytest.fixture(scope="module")
def victim():
    return tiny_hf_generator()


def _pieces(victim, *, own: bool):
    """Splits of length 24 (12 + 12): the texts as they are, or with the model's own greedy
    answer as the suffix (a text it reproduces, so that matches are long; as ids, since a random
    model's tokens need not survive decoding and encoding again)."""
    out = []
    for i, prefix in enumerate(PREFIXES):
        text = prefix + " and the rest of it, which the model has never seen" * 3
        piece = split(Snippet(f"s{i}", text, "legal"), victim.tokenizer, 24, prefix_ratio=0.5)
        if own:
            answer = victim.generate([piece.prefix], max_new_tokens=12)[0][0]
            piece = replace(piece, suffix=answer.text, suffix_ids=tuple(answer.token_ids))
        out.append(piece)
    return out


@pytest.mark.parametrize("own", [False, True])
def test_match_and_extractable_equal_greedy_generation(victim, own):
    options = AttackOptions(measure=MeasureOptions(extract_k=8, signals=False))
    matches = []
    for piece in _pieces(victim, own=own):
        result = run_method("verbatim", piece, ModelSet(victim=victim), options)
        # What P-S with the raw prefix generates (greedy, len(suffix) tokens), in token ids.
        generated = victim.generate([piece.prefix], max_new_tokens=piece.suffix_tokens)[0][0]
        generated = generated.token_ids
        expected = leading_match(generated, piece.suffix_ids)
        assert result.verbatim["match_tokens"] == expected, piece.snippet.id
        assert result.verbatim["extractable"] == (expected >= 8)
        assert result.verbatim["span_tokens"] is None and result.verbatim["teacher_forced"]
        matches.append(expected)
    if own:
        assert max(matches) >= 8  # the texts it reproduces are caught as extractable


def test_no_generation_and_costs_one_pass(victim):
    piece = _pieces(victim, own=False)[0]
    before = victim.stats.snapshot()
    result = run_method("verbatim", piece, ModelSet(victim=victim), AttackOptions())
    assert victim.stats.since(before).calls == 0  # nothing generated
    assert result.costs.victim_queries == 1 and result.costs.generated_tokens == 0
    assert result.mem == 0.0 and result.output == ""


def test_a_black_box_victim_is_refused_by_name():
    piece = split(Snippet("s", "one two three four five six", "legal"), "whitespace", 6)
    endpoint = ScriptedGenerator(default="x", model_id="remote/model", tokenizer=None)
    with pytest.raises(MissingModelError, match="weights.*remote/model"):
        run_method("verbatim", piece, ModelSet(victim=endpoint), AttackOptions())


def test_measured_without_signals_is_not_a_failure(victim):
    """Unlike signals-only, the verbatim method has its own measurement: --no-signals is fine."""
    piece = _pieces(victim, own=False)[0]
    options = AttackOptions(measure=MeasureOptions(signals=False))
    result = run_method("verbatim", piece, ModelSet(victim=victim), options)
    measure_result(result, piece, ModelSet(victim=victim), options.measure)
    assert result.verbatim["teacher_forced"]


def test_registry_places_it_in_table1_but_not_in_compare():
    spec = registry.get_method("verbatim")
    assert not spec.extracts and spec.verbatim and registry.in_table1("verbatim")
    assert not registry.in_table1("signals") and registry.in_table1("ps_base")
    assert "verbatim" not in registry.offered_methods(["victim"], ["victim"], extracting_only=True)


def test_cli_verbatim_only_flag():
    from memprobe_core.cli.audit import audit_methods

    def args(**kw):
        return argparse.Namespace(**{"verbatim_only": False, "methods": None, **kw})

    assert audit_methods(args(verbatim_only=True)) == ["verbatim"]
    assert audit_methods(args()) == registry.default_audit_methods()
    assert audit_methods(args(methods=["ps_base"])) == ["ps_base"]
    with pytest.raises(UsageError, match="--verbatim-only"):
        audit_methods(args(verbatim_only=True, methods=["ps_base"]))


# --- batched ahead of the units (MethodSpec.prefetch) ----------------------------------------


def _count_forwards(model):
    calls: list[int] = []
    original = model.forward

    def counting(*args, **kwargs):
        calls.append(int(kwargs["input_ids"].shape[0]))
        return original(*args, **kwargs)

    model.forward = counting
    return calls


@pytest.mark.parametrize("own", [False, True])
def test_prefetched_units_equal_units_one_at_a_time_and_ask_the_model_nothing(victim, own):
    from memprobe_core.attacks import verbatim_only

    models = ModelSet(victim=victim)
    options = AttackOptions(measure=MeasureOptions(signals=False))
    pieces = _pieces(victim, own=own)
    verbatim_only.clear_cache()
    alone = [run_method("verbatim", p, models, options).verbatim for p in pieces]
    verbatim_only.clear_cache()
    calls = _count_forwards(victim.torch_model)
    try:
        registry.get_method("verbatim").prefetch(pieces, models, options)
        batched_passes = len(calls)
        assert max(calls) == len(pieces)  # every snippet in the first batched pass
        after = [run_method("verbatim", p, models, options).verbatim for p in pieces]
    finally:
        del victim.torch_model.forward
        verbatim_only.clear_cache()
    assert after == alone
    assert len(calls) == batched_passes  # the units found their match computed


def test_prefetch_skips_a_black_box_victim():
    from memprobe_core.attacks import verbatim_only

    piece = split(Snippet("s", "one two three four five six", "legal"), "whitespace", 6)
    asked: list = []
    endpoint = ScriptedGenerator(
        lambda ask: asked.append(ask) or "x", model_id="remote/model", tokenizer=None
    )
    verbatim_only.clear_cache()
    registry.get_method("verbatim").prefetch([piece], ModelSet(victim=endpoint), AttackOptions())
    # It returns without touching the endpoint (a black box has no weights to teacher-force;
    # the unit itself refuses it, naming the victim).
    assert asked == []
