"""The models of an audit by name: defaults per role and loading the roles the methods need.

A run records its :class:`ModelNames` (resolved, defaults filled in) in its config, so
``memprobe_core.audit.resume_audit`` can load the same models again in a new process through
:func:`models_from_config`. Only the roles the chosen methods need are loaded, and a model named
for several roles is loaded once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from memprobe_core import models as model_backends
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.registry import roles_needed
from memprobe_core.attacks.reverse_lm import DEFAULT_REVERSE_MODEL
from memprobe_core.models import embedded

log = logging.getLogger(__name__)


@dataclass
class ModelNames:
    """The models of an audit, by name, so a resumed audit can load them again.

    Attributes:
        victim / base / attacker: embedded short names, hub ids or local paths (``None``: the
            embedded default for that role).
        init: the init model (``None``: the attacker).
        reverse: the reverse LM (``None``: ``afterless/reverse-pythia-160m``; only loaded when
            ``reverse_lm`` is among the methods).
        reference: a second model for the reference-ratio membership signal (``None``: no
            reference, the signal is left out; loaded whatever the methods).
        backend: backend for every model (``None``: chosen from the name).
        load_options: keyword options passed to ``memprobe_core.models.load`` (device, dtype …).
    """

    victim: str | None = None
    base: str | None = None
    attacker: str | None = None
    init: str | None = None
    reverse: str | None = None
    reference: str | None = None
    backend: str | None = None
    load_options: dict[str, Any] = field(default_factory=dict)

    def resolved(self) -> ModelNames:
        """A copy with every default filled in (what is recorded in the run config)."""
        base_default, instruct_default, reverse_default = default_model_names()
        attacker = self.attacker or instruct_default
        return ModelNames(
            victim=self.victim or base_default,
            base=self.base or base_default,
            attacker=attacker,
            init=self.init or attacker,
            reverse=self.reverse or reverse_default,
            reference=self.reference,
            backend=self.backend,
            load_options=dict(self.load_options),
        )

    def to_dict(self) -> dict[str, Any]:
        """The names as a JSON-ready dict (what a run's config records)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelNames:
        """Names from a run config's dict; keys this version does not know are ignored."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def default_model_names() -> tuple[str, str, str]:
    """``(base/victim, attacker/init, reverse)`` default names (one place each: their modules)."""
    return embedded.DEFAULT_VICTIM, embedded.DEFAULT_ATTACKER, DEFAULT_REVERSE_MODEL


def load_models(names: ModelNames, methods: Iterable[str]) -> ModelSet:
    """Load the models the methods need (and no other) through ``memprobe_core.models.load``.

    Raises:
        ModelError: a model cannot be loaded (unknown name, missing file, …).
    """
    names = names.resolved()
    cache: dict[str, Any] = {}

    def get(role: str) -> Any:
        name = getattr(names, role)
        if name not in cache:
            log.info("loading %s model %s", role, name)
            cache[name] = model_backends.load(name, backend=names.backend, **names.load_options)
        return cache[name]

    needed = roles_needed(methods, reference=names.reference is not None)
    return ModelSet.from_roles({role: get(role) for role in needed})


def models_from_config(config: dict[str, Any]) -> ModelSet:
    """Load the models a run's config names (the default ``models_factory``)."""
    return load_models(ModelNames.from_dict(config.get("models") or {}), config["methods"])
