"""The method registry: what each built-in method declares, and the lists derived from it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from memprobe_core.attacks import registry
from memprobe_core.attacks.options import AttackOptions, GCGOptions, ReverseOptions
from memprobe_core.errors import UsageError

# The paper's methods, in its Table 1 order (a fact of the paper, not of the registry).
PAPER = ["ps_base", "ps_inst", "reverse_lm", "gcg", "interactive"]


def test_methods_are_listed_in_report_order_each_with_its_declared_label() -> None:
    specs = registry.specs()
    assert registry.method_names() == [s.name for s in specs]
    assert [(s.rank, s.name) for s in specs] == sorted((s.rank, s.name) for s in specs)
    assert [m for m in registry.method_names() if m in PAPER] == PAPER
    assert [registry.method_label(s.name) for s in specs] == [s.label for s in specs]
    assert [registry.extracts(s.name) for s in specs] == [s.extracts for s in specs]
    assert not registry.extracts("signals") and not registry.extracts("verbatim")
    assert registry.extracts("old_method")  # stored by another version: an extraction


def test_defaults_and_baselines_follow_the_declarations() -> None:
    audit = registry.default_audit_methods()
    assert audit == [s.name for s in registry.specs() if s.default_in_audit]
    assert {"ps_base", "ps_inst", "interactive"} <= set(audit)
    assert "gcg" not in registry.default_compare_methods()  # slow on a CPU: not ticked
    # Paired gains are reported over P-S-Inst first, then P-S-Base.
    assert registry.baseline_methods()[:2] == ("ps_inst", "ps_base")


def test_order_puts_unregistered_names_last_and_drops_repeats() -> None:
    assert registry.method_order(["old_method", "interactive", "ps_base", "interactive"]) == [
        "ps_base",
        "interactive",
        "old_method",
    ]
    assert registry.method_label("old_method") == "old_method"


def test_every_method_is_offered_with_every_model_in_hand() -> None:
    roles = registry.ROLES
    assert registry.offered_methods(roles, white_box=roles, chat=roles) == registry.method_names()
    assert registry.offered_methods(roles, white_box=roles) == registry.method_names()


@pytest.mark.parametrize("method", registry.method_names())
def test_a_method_is_not_offered_without_a_model_it_declares(method: str) -> None:
    spec = registry.get_method(method)
    roles = registry.ROLES
    for role in set(spec.roles) - {"init"}:  # init counts as present when the attacker is
        have = [r for r in roles if r != role]
        assert method not in registry.offered_methods(have, white_box=roles, chat=roles), role
    for role in spec.white_box_roles:
        open_box = [r for r in roles if r != role]
        assert method not in registry.offered_methods(roles, white_box=open_box, chat=roles), role
    for role in spec.chat_roles:
        chatting = [r for r in roles if r != role]
        assert method not in registry.offered_methods(roles, white_box=roles, chat=chatting), role
        # Not knowing whether it has a template offers it (the run then refuses one without).
        assert method in registry.offered_methods(roles, white_box=roles, chat=None)
    # Compare compares extractions: the measuring-only methods are left out there.
    extracting = registry.offered_methods(roles, roles, extracting_only=True)
    assert (method in extracting) == spec.extracts


def test_the_built_in_methods_declare_the_models_they_need() -> None:
    # An endpoint as the base model: no gradients, so no GCG; as the victim: no teacher-forced
    # verbatim pass and no ACR (its search runs on the victim); no reverse weights: no Reverse-LM.
    assert registry.get_method("gcg").white_box_roles == ("base",)
    assert registry.get_method("verbatim").white_box_roles == ("victim",)
    assert registry.get_method("acr").white_box_roles == ("victim",)
    assert registry.get_method("reverse_lm").white_box_roles == ("reverse",)
    # Divergence asks a chat victim and samples it; the paper's methods answer greedily.
    assert registry.get_method("divergence").chat_roles == ("victim",)
    assert registry.get_method("divergence").samples
    assert not [m for m in PAPER if registry.get_method(m).samples]


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
