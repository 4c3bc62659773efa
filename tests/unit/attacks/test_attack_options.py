"""AttackOptions: each method's options nested and validated; older flat configs still load."""

from __future__ import annotations

import pytest

from memprobe_core.attacks.options import (
    LEGACY_FLAT_OPTIONS,
    AttackOptions,
    GCGOptions,
    InteractiveOptions,
    PrefixSuffixOptions,
    ReverseOptions,
)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: InteractiveOptions(rounds=101), "rounds=101"),
        (lambda: InteractiveOptions(n_candidates=0), "n_candidates=0"),
        (lambda: InteractiveOptions(access="some"), "access='some': use one of full, partial"),
        (
            lambda: InteractiveOptions(attacker_temperature=-1),
            r"attacker_temperature=-1: give a number of 0 or more",
        ),
        (
            lambda: InteractiveOptions(attacker_top_p=0),
            r"attacker_top_p=0: give a number in \(0, 1\]",
        ),
        (lambda: GCGOptions(steps=-1), "gcg_steps=-1"),
        (lambda: GCGOptions(top_k=0), "gcg_top_k=0"),
        (
            lambda: GCGOptions(answer_model="attacker"),
            "gcg_answer_model='attacker': use one of base, victim",
        ),
        (lambda: ReverseOptions(max_new_tokens=0), "reverse_max_new_tokens=0"),
    ],
)
def test_each_method_validates_its_own_options(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_a_config_stored_flat_loads_into_the_nested_options():
    flat = {
        "seed": 3,
        "rounds": 2,
        "n_candidates": 5,
        "access": "partial",
        "gcg_steps": 7,
        "gcg_answer_model": "victim",
        "reverse_max_new_tokens": 9,
        "ps_chat_template": False,
        "compat": "reference",
    }
    options = AttackOptions.from_dict(flat)
    assert options.interactive == InteractiveOptions(
        rounds=2, n_candidates=5, access="partial", max_prompt_tokens=500
    )
    assert options.gcg == GCGOptions(steps=7, answer_model="victim")
    assert options.reverse == ReverseOptions(max_new_tokens=9)
    assert options.ps == PrefixSuffixOptions(chat_template=False)
    assert options.seed == 3
    # and the nested form round-trips
    assert AttackOptions.from_dict(options.to_dict()) == options


def test_every_flat_name_has_a_home_in_the_nested_options():
    for flat, (section, field) in LEGACY_FLAT_OPTIONS.items():
        assert field in type(getattr(AttackOptions(), section)).__dataclass_fields__, flat


def test_the_compat_preset_fills_max_prompt_tokens_without_touching_the_callers_object():
    mine = InteractiveOptions(rounds=1)
    options = AttackOptions(compat="reference", interactive=mine)
    assert options.interactive.max_prompt_tokens == 500
    assert mine.max_prompt_tokens is None  # a copy was changed, not the caller's options


def test_a_wrong_type_for_a_method_section_is_refused():
    with pytest.raises(TypeError, match="gcg must be a GCGOptions"):
        AttackOptions(gcg=3)  # type: ignore[arg-type]


def test_no_speculative_flag_and_stored_configs():
    """``--no-speculative`` turns drafting off; a config stored before the option drafts."""
    import argparse

    from memprobe_core.cli.common import add_method_options, attack_options

    parser = argparse.ArgumentParser()
    add_method_options(parser)
    assert attack_options(parser.parse_args([])).speculative is True
    assert attack_options(parser.parse_args(["--no-speculative"])).speculative is False
    old = AttackOptions().to_dict()
    del old["speculative"]
    assert AttackOptions.from_dict(old).speculative is True
