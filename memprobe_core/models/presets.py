"""Model presets: the papers' real setups (hub + GPU) and the offline embedded pair.

A preset fills every model role of a probe. The embedded pair is not one family (Gemma base,
SmolLM2 instruct), so P-S-Base vs P-S-Inst on it says nothing about instruction tuning; the hub
presets pair each instruct model with its own base model, as the paper does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from memprobe_core.errors import UsageError
from memprobe_core.models.embedded import (
    DEFAULT_ATTACKER,
    DEFAULT_BASE,
    DEFAULT_INIT,
    DEFAULT_VICTIM,
)

PAPER_ATTACKER = "HuggingFaceH4/zephyr-7b-beta"


@dataclass(frozen=True)
class Preset:
    """Models of every role.

    Attributes:
        name: the preset's short name.
        victim: the audited (instruction-tuned) model.
        base: its pre-instruction-tuning parent.
        attacker: proposes candidate prompts.
        init: writes the initial prompt.
        family: model family, for display.
        note: what the preset needs and what it is good for.
    """

    name: str
    victim: str
    base: str
    attacker: str
    init: str
    family: str
    note: str

    def roles(self) -> dict[str, str]:
        """``{role: model name}`` for victim, base, attacker, init."""
        return {
            "victim": self.victim,
            "base": self.base,
            "attacker": self.attacker,
            "init": self.init,
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_GPU = "needs the Hugging Face hub (or local copies) and a GPU with ~16 GB per 7B model in bf16"

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "embedded",
            DEFAULT_VICTIM,
            DEFAULT_BASE,
            DEFAULT_ATTACKER,
            DEFAULT_INIT,
            "mixed",
            "offline and CPU-friendly; base and instruct models are different families, so "
            "P-S-Base vs P-S-Inst here says nothing about instruction tuning",
        ),
        Preset(
            "llama-7b-tulu",
            "allenai/tulu-7b",
            "huggyllama/llama-7b",
            PAPER_ATTACKER,
            PAPER_ATTACKER,
            "LLaMA-1",
            f"paper setup: LLaMA-7B and its Tulu instruction tune; {_GPU}",
        ),
        Preset(
            "llama-7b-vicuna",
            "lmsys/vicuna-7b-v1.3",
            "huggyllama/llama-7b",
            PAPER_ATTACKER,
            PAPER_ATTACKER,
            "LLaMA-1",
            f"paper setup: LLaMA-7B and Vicuna-7B v1.3; {_GPU}",
        ),
        Preset(
            "olmo-7b",
            "allenai/OLMo-7B-Instruct-hf",
            "allenai/OLMo-7B-hf",
            PAPER_ATTACKER,
            PAPER_ATTACKER,
            "OLMo",
            f"paper setup: OLMo-7B and its Instruct model (open training data: Dolma); {_GPU}",
        ),
        Preset(
            "falcon-7b",
            "tiiuae/falcon-7b-instruct",
            "tiiuae/falcon-7b",
            PAPER_ATTACKER,
            PAPER_ATTACKER,
            "Falcon",
            f"paper setup: Falcon-7B and Falcon-7B-Instruct; {_GPU}",
        ),
    )
}


def get_preset(name: str) -> Preset:
    """The preset called ``name``.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    if name not in PRESETS:
        raise UsageError(f"preset {name!r} is unknown; choose from {list(PRESETS)}")
    return PRESETS[name]
