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
from memprobe_core.models import dtypes, embedded

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
        load_options: keyword options passed to ``memprobe_core.models.load`` (device, endpoint
            …; a ``dtype`` here is the dtype of every role, as before per-role dtypes).
        dtypes: ``{role or "*": dtype}`` asked for (``auto`` where absent); once
            :meth:`resolved`, the concrete dtype of every role with weights
            (:mod:`memprobe_core.models.dtypes`), which the run records and a resume keeps.
    """

    victim: str | None = None
    base: str | None = None
    attacker: str | None = None
    init: str | None = None
    reverse: str | None = None
    reference: str | None = None
    backend: str | None = None
    load_options: dict[str, Any] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)

    def resolved(self) -> ModelNames:
        """A copy with every default filled in, each role's dtype included (what is recorded
        in the run config; resolving a resolved copy changes nothing)."""
        base_default, instruct_default, reverse_default = default_model_names()
        attacker = self.attacker or instruct_default
        options = dict(self.load_options)
        asked = dict(self.dtypes)
        if "dtype" in options:  # the dtype of every role, unless a role has its own
            asked.setdefault(dtypes.EVERY_ROLE, options.pop("dtype"))
        if "attacker" in asked and not self.init:  # the init model is the attacker's model
            asked.setdefault("init", asked["attacker"])
        out = ModelNames(
            victim=self.victim or base_default,
            base=self.base or base_default,
            attacker=attacker,
            init=self.init or attacker,
            reverse=self.reverse or reverse_default,
            reference=self.reference,
            backend=self.backend,
            load_options=options,
        )
        for role in ROLES:
            name = getattr(out, role)
            if name is not None and _has_weights(name, out.backend, options):
                out.dtypes[role] = dtypes.resolve(
                    role, dtypes.requested_for(role, asked), options.get("device")
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        """The names as a JSON-ready dict (what a run's config records)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelNames:
        """Names from a run config's dict; keys this version does not know are ignored."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if "dtypes" not in known:
            # A run recorded before per-role dtypes: every role as the loader then chose
            # (bfloat16 on CUDA, float32 on a CPU), or the one dtype the run was given.
            given = (known.get("load_options") or {}).get("dtype")
            known["dtypes"] = {dtypes.EVERY_ROLE: given or dtypes.LOADER_DEFAULT}
        return cls(**known)


# The roles a ModelNames names, in the order a run's config lists them.
ROLES = ("victim", "base", "attacker", "init", "reverse", "reference")


def _has_weights(name: str, backend: str | None, options: dict[str, Any]) -> bool:
    """Whether ``name`` loads local weights (a dtype means something): not an endpoint or the
    fake backend."""
    chosen = backend or model_backends.guess_backend(name, options)
    return chosen not in ("openai", "fake")


def default_model_names() -> tuple[str, str, str]:
    """``(base/victim, attacker/init, reverse)`` default names (one place each: their modules)."""
    return embedded.DEFAULT_VICTIM, embedded.DEFAULT_ATTACKER, DEFAULT_REVERSE_MODEL


def load_models(names: ModelNames, methods: Iterable[str]) -> ModelSet:
    """Load the models the methods need (and no other) through ``memprobe_core.models.load``.

    Raises:
        ModelError: a model cannot be loaded (unknown name, missing file, …).
    """
    names = names.resolved()
    cache: dict[tuple[str, str | None], Any] = {}

    def get(role: str) -> Any:
        name, dtype = getattr(names, role), names.dtypes.get(role)
        if (name, dtype) not in cache:  # one model in two dtypes is two models
            log.info("loading %s model %s (%s)", role, name, dtype or "backend's dtype")
            options = dict(names.load_options)
            if dtype is not None:
                options["dtype"] = dtype
            cache[name, dtype] = model_backends.load(name, backend=names.backend, **options)
        return cache[name, dtype]

    needed = roles_needed(methods, reference=names.reference is not None)
    return ModelSet.from_roles({role: get(role) for role in needed})


def models_from_config(config: dict[str, Any]) -> ModelSet:
    """Load the models a run's config names (the default ``models_factory``)."""
    return load_models(ModelNames.from_dict(config.get("models") or {}), config["methods"])
