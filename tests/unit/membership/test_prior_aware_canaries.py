"""The canary demo's recipe on a tiny model, read by the prior-aware check (docs/method.md,
"Prior-aware check"): the members a copy was fine-tuned on (the canary demo's own pool and
:func:`~memprobe_core.membership.canaries.fine_tune`) come out "memorised" on the copy; on its
base model, and for the held-out half on the copy, none does."""

from __future__ import annotations

import pytest

from memprobe_core.measuring.prior_aware import MEMORISED
from memprobe_core.membership import canaries as cn
from memprobe_core.membership import prior_aware as pam
from memprobe_core.models.hf import HFGenerator
from memprobe_core.snippets.split import MEMBER, split
from tests.helpers.tiny_models import tiny_causal_lm

# Enough passes for a 2-layer, 64-wide model to learn four 48-token texts by heart.
SETTINGS = cn.CanarySettings(per_side=4, epochs=40, learning_rate=6e-3, max_tokens=48)
LENGTH = 40  # prefix and suffix inside the trained tokens


@pytest.fixture(scope="module")
def verdicts() -> dict[str, list[tuple[str, str]]]:
    snippets = cn.pool(SETTINGS, 77)
    base, tokenizer = tiny_causal_lm(seed=4)
    copy, _ = tiny_causal_lm(seed=4)
    cn.fine_tune(copy, tokenizer, [s.text for s in snippets if s.label == MEMBER], SETTINGS)
    pam.clear_cache()
    out: dict[str, list[tuple[str, str]]] = {}
    for name, model in (("base", base), ("canary", copy)):
        victim = HFGenerator(model, tokenizer, model_id=f"tiny-{name}")
        out[name] = [
            (
                str(s.label),
                str(
                    pam.measure_prior_aware(victim, split(s, tokenizer, LENGTH), 19)["pam_verdict"]
                ),
            )
            for s in snippets
        ]
    pam.clear_cache()
    return out


def test_the_canaries_are_memorised_on_the_copy_trained_on_them(verdicts) -> None:
    members = [verdict for label, verdict in verdicts["canary"] if label == MEMBER]
    assert len(members) == 4 and all(v == MEMORISED for v in members)


def test_nothing_is_memorised_on_the_base_model_nor_the_held_out_half(verdicts) -> None:
    assert not any(verdict == MEMORISED for _, verdict in verdicts["base"])
    held_out = [verdict for label, verdict in verdicts["canary"] if label != MEMBER]
    assert len(held_out) == 4 and MEMORISED not in held_out
