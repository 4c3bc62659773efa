"""The method registry: what each built-in method declares, and the lists derived from it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from memprobe_core.attacks import registry
from memprobe_core.attacks.options import AttackOptions, GCGOptions, ReverseOptions
from memprobe_core.errors import UsageError


def test_built_in_methods_in_table_1_order_with_their_labels() -> None:
    assert registry.method_names() == [
        "ps_base",
        "ps_inst",
        "reverse_lm",
        "gcg",
        "interactive",
        "acr",
        "divergence",
        "verbatim",
        "signals",
    ]
    assert [registry.method_label(m) for m in registry.method_names()] == [
        "P-S-Base",
        "P-S-Inst",
        "Reverse-LM",
        "GCG",
        "Ours (interactive)",
        "ACR",
        "Divergence",
        "Verbatim only",
        "Signals only",
    ]
    assert [registry.extracts(m) for m in registry.method_names()] == [True] * 7 + [False] * 2
    assert registry.extracts("old_method")  # stored by another version: an extraction
    assert registry.default_audit_methods() == ["ps_base", "ps_inst", "interactive"]
    # Paired gains are reported over P-S-Inst first, then P-S-Base.
    assert registry.baseline_methods() == ("ps_inst", "ps_base")


def test_order_puts_unregistered_names_last_and_drops_repeats() -> None:
    assert registry.method_order(["old_method", "interactive", "ps_base", "interactive"]) == [
        "ps_base",
        "interactive",
        "old_method",
    ]
    assert registry.method_label("old_method") == "old_method"


def test_offered_methods_follow_the_roles_and_the_white_box_rule() -> None:
    everything = ("victim", "base", "attacker", "reverse")
    assert registry.offered_methods(everything, white_box=("base", "victim")) == (
        registry.method_names()
    )
    # An endpoint as the victim: no teacher-forced verbatim pass.
    assert "verbatim" not in registry.offered_methods(everything, white_box=("base",))
    # An endpoint as the base model: no gradients, so no GCG.
    assert "gcg" not in registry.offered_methods(everything, white_box=())
    # No reverse model: no Reverse-LM; no attacker: no interactive (its init model is the attacker).
    # A victim without weights: no ACR (its search runs on the victim).
    assert registry.offered_methods(("victim", "base"), white_box=("base",), chat=()) == [
        "ps_base",
        "ps_inst",
        "gcg",
        "signals",
    ]
    # Divergence asks a chat victim; not knowing whether it has a template offers it (it then
    # refuses a victim without one, naming it).
    assert "divergence" in registry.offered_methods(("victim",), white_box=(), chat=("victim",))
    assert "divergence" in registry.offered_methods(("victim",), white_box=())
    assert "divergence" not in registry.offered_methods(("victim",), white_box=(), chat=())
    assert "acr" in registry.offered_methods(("victim",), white_box=("victim",))
    # Compare compares extractions: the measuring-only methods are left out there.
    assert registry.offered_methods(everything, ("base", "victim"), extracting_only=True) == [
        m for m in registry.method_names() if m not in ("signals", "verbatim")
    ]


def test_roles_needed_in_load_order() -> None:
    assert registry.roles_needed(["ps_inst"]) == ["victim"]
    assert registry.roles_needed(["gcg"]) == ["victim", "base"]
    assert registry.roles_needed(["interactive"], reference=True) == [
        "victim",
        "attacker",
        "init",
        "reference",
    ]


def test_unknown_methods_are_refused_naming_them_and_the_known_ones() -> None:
    with pytest.raises(UsageError, match=r"unknown method\(s\) nope; choose from ps_base"):
        registry.check_methods(["ps_base", "nope"])
    assert registry.check_methods(["gcg", "ps_base", "gcg"]) == ["gcg", "ps_base"]
    with pytest.raises(UsageError, match="no method given"):
        registry.check_methods([])
    with pytest.raises(ValueError, match="method 'nope' is unknown"):
        registry.get_method("nope")


def test_a_spec_with_an_unknown_role_or_half_an_options_pair_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown role"):
        registry.MethodSpec(name="x", label="X", run=print, roles=("judge",), rank=1)
    with pytest.raises(ValueError, match="together"):
        registry.MethodSpec(name="x", label="X", run=print, roles=(), rank=1, options_key="x")


def test_a_second_options_class_cannot_take_a_section() -> None:
    spec = registry.MethodSpec(
        name="gcg_twin",
        label="Twin",
        run=print,
        roles=("base",),
        rank=41,
        options_key="gcg",
        options_class=ReverseOptions,
    )
    with pytest.raises(ValueError, match="options section 'gcg' already holds"):
        registry.register(spec)
    assert "gcg_twin" not in registry.method_names()


@dataclass(frozen=True)
class _Undeclared:
    size: int = 1  # a plain field: no help, range or flag for the front ends to read


@pytest.mark.parametrize("options_class", [_Undeclared, dict])
def test_an_options_class_must_declare_its_options(options_class: type) -> None:
    with pytest.raises(ValueError, match="declared with memprobe_core.option_fields.option"):
        registry.MethodSpec(
            name="plain",
            label="Plain",
            run=print,
            roles=(),
            rank=1,
            options_key="plain",
            options_class=options_class,
        )


def test_options_for_a_method_come_from_its_section() -> None:
    options = AttackOptions(gcg=GCGOptions(steps=7))
    assert options.for_method("gcg") == GCGOptions(steps=7)
    assert options.for_method("ps_base") is options.for_method("ps_inst") is options.ps


TOY_MODULE = """
from memprobe_core.attacks.registry import MethodSpec, register

def run_dropped(split, models, options, *, on_event=None, cancel=None):
    raise NotImplementedError("only registered, never run here")

register(MethodSpec(name="dropped_in", label="Dropped in", run=run_dropped, roles=("victim",), rank=99))
"""


def test_a_module_dropped_into_the_package_registers_itself(tmp_path, monkeypatch) -> None:
    import sys

    import memprobe_core.attacks as attacks

    (tmp_path / "dropped_in_method.py").write_text(TOY_MODULE)
    # The package's search path gains a folder holding one new module, as if it had been added.
    monkeypatch.setattr(attacks, "__path__", [*attacks.__path__, str(tmp_path)])
    try:
        names = registry.import_modules(attacks)
        assert "dropped_in_method" in names
        assert "dropped_in" in registry.method_names()
        assert registry.method_label("dropped_in") == "Dropped in"
    finally:
        registry.unregister("dropped_in")
        sys.modules.pop("memprobe_core.attacks.dropped_in_method", None)
