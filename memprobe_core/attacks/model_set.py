"""The models of one probe, by role, and the error a method raises when one it needs is missing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memprobe_core.errors import MemprobeError
from memprobe_core.models.base import Generator


@dataclass
class ModelSet:
    """The models of one probe. Methods use the ones they need and say so when one is missing.

    Attributes:
        victim: the audited model (instruction-tuned in the paper's setting).
        base: its pre-instruction-tuning parent (P-S-Base, GCG).
        attacker: proposes candidate prompts (interactive method).
        init: writes the initial prompt (interactive method; defaults to the attacker).
        reverse: a reverse LM (Reverse-LM method).
        reference: a second model for the reference-ratio membership signal (optional; its
            tokenizer may differ from the victim's).
    """

    victim: Generator
    base: Generator | None = None
    attacker: Generator | None = None
    init: Generator | None = None
    reverse: Generator | None = None
    reference: Generator | None = None

    @classmethod
    def from_roles(cls, loaded: Mapping[str, Generator]) -> ModelSet:
        """A ModelSet from models keyed by role (``victim`` required; ``init`` falls back to the
        attacker when left out, as in the paper)."""
        if "victim" not in loaded:
            raise ValueError("a ModelSet needs a victim model")
        return cls(
            victim=loaded["victim"],
            base=loaded.get("base"),
            attacker=loaded.get("attacker"),
            init=loaded.get("init", loaded.get("attacker")),
            reverse=loaded.get("reverse"),
            reference=loaded.get("reference"),
        )

    def manifest(self) -> dict[str, Any]:
        return {
            role: (model.manifest() if model is not None else None)
            for role, model in (
                ("victim", self.victim),
                ("base", self.base),
                ("attacker", self.attacker),
                ("init", self.init or self.attacker),
                ("reverse", self.reverse),
                ("reference", self.reference),
            )
        }


class MissingModelError(MemprobeError, ValueError):
    """A method needs a model the ModelSet does not have (or one that cannot do the job)."""


def require(model: Generator | None, role: str, method: str, what: str = "") -> Generator:
    """Return ``model`` or raise an error that says which role to fill for ``method``."""
    if model is None:
        hint = f" ({what})" if what else ""
        raise MissingModelError(
            f"method {method!r} needs a {role} model{hint}; set ModelSet.{role} "
            f"(e.g. memprobe_core.models.load(...)) or pick another method"
        )
    return model


def has_weights(model: Generator) -> bool:
    """Whether ``model`` exposes its weights and gradients (a white box: the ``hf`` backend's
    ``torch_model``), as GCG's base, ACR's and verbatim-only's victim need."""
    return bool(model.white_box) and getattr(model, "torch_model", None) is not None
