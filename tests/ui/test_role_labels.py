"""The sidebar's model roles name the methods that use them from the registry, not a list."""

from __future__ import annotations

from memprobe_core.attacks import registry
from ui_common.models import role_help, role_label, role_users


def test_the_base_role_names_every_registered_method_that_uses_it() -> None:
    assert role_label("base") == "Base (P-S-Base, GCG)"
    toy = registry.MethodSpec(
        name="toy_base", label="Toy base", run=lambda *a, **k: None, roles=("base",), rank=46
    )
    registry.register(toy)
    try:
        assert role_label("base") == "Base (P-S-Base, GCG, Toy base)"
        assert role_help("base").endswith("Used by P-S-Base, GCG, Toy base.")
    finally:
        registry.unregister("toy_base")
    assert role_users("reverse") == "Reverse-LM"
    assert role_label("victim") == "Victim"  # every method's: no list
