"""Run-size presets of the Probe and Compare pages: quick on a CPU, the paper's one click away.

The core's defaults are the paper's (length 200, 3 rounds × 24 candidates, 30 GCG steps). On a
2-core CPU one round of 4 candidates at length 60 already took minutes on the dashboard, so a
page that detects no GPU starts from :data:`QUICK`; :data:`PAPER` sets the paper's sizes in one
click. A preset writes the widgets' values through session state (their keys are
``{prefix}_length``, ``{prefix}_rounds``, ``{prefix}_n`` and ``{prefix}_gcg_steps``), so any
value can still be changed by hand afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from memprobe_core.attacks import registry
from memprobe_core.attacks.options import AttackOptions, GCGOptions, InteractiveOptions
from memprobe_core.config import DEFAULT_LENGTH
from memprobe_core.runs.eta import prior_estimate
from ui_common.models import has_gpu
from ui_common.page import carried, md


@dataclass(frozen=True)
class Preset:
    """Sizes of a run: snippet length (tokens), attacker rounds, candidates a round, GCG steps."""

    name: str
    label: str
    length: int
    rounds: int
    n: int
    gcg_steps: int

    def widget_values(self, prefix: str) -> dict[str, int]:
        """The preset as the session-state values of the page's widgets."""
        return {
            f"{prefix}_length": self.length,
            f"{prefix}_rounds": self.rounds,
            f"{prefix}_n": self.n,
            f"{prefix}_gcg_steps": self.gcg_steps,
        }


QUICK = Preset("quick", "Quick (CPU)", length=60, rounds=1, n=4, gcg_steps=5)
PAPER = Preset(
    "paper",
    "Paper",
    length=DEFAULT_LENGTH,
    rounds=InteractiveOptions.rounds,
    n=InteractiveOptions.n_candidates,
    gcg_steps=GCGOptions.steps,
)
PRESETS = {p.name: p for p in (QUICK, PAPER)}


def detected_preset() -> Preset:
    """:data:`PAPER` when a GPU is found, else :data:`QUICK`."""
    return PAPER if has_gpu() else QUICK


def default_value(prefix: str, field: str) -> int:
    """The starting value of widget ``{prefix}_{field}`` (the chosen, else detected, preset)."""
    chosen = PRESETS.get(st.session_state.get(f"{prefix}_preset", ""), detected_preset())
    return chosen.widget_values(prefix)[f"{prefix}_{field}"]


def preset_value(prefix: str, name: str) -> int | None:
    """The starting value of option widget ``{prefix}_{name}`` if the run-size presets size it
    (rounds, candidates, GCG steps), ``None`` otherwise."""
    if f"{prefix}_{name}" not in QUICK.widget_values(prefix):
        return None
    return default_value(prefix, name)


def preset_widget(prefix: str) -> Preset:
    """A "Run size" radio; choosing a preset sets the length, rounds, candidates and GCG steps."""
    detected = detected_preset()

    def apply() -> None:
        chosen = PRESETS[st.session_state[f"{prefix}_preset"]]
        st.session_state.update(chosen.widget_values(prefix))

    name = st.radio(
        "Run size",
        list(PRESETS),
        format_func=lambda n: PRESETS[n].label,
        horizontal=True,
        key=carried(f"{prefix}_preset", "preset", detected.name, list(PRESETS)),
        on_change=apply,
        help=(
            f"Quick: length {QUICK.length}, {QUICK.rounds} round × {QUICK.n} candidates, "
            f"{QUICK.gcg_steps} GCG steps (minutes on a CPU). Paper: length {PAPER.length}, "
            f"{PAPER.rounds} rounds × {PAPER.n} candidates, {PAPER.gcg_steps} GCG steps (the "
            "paper's settings; for a GPU). Each value can still be changed below."
        ),
    )
    if detected is QUICK:
        st.caption(
            "No GPU found: the quick sizes are the default here; the paper's are one click away."
        )
    return PRESETS[name]


def planned_candidates(methods: Sequence[str], widgets: Mapping[str, Any]) -> dict[str, int]:
    """{method: candidates it will score} under the page's option widgets (the ETA's plan)."""
    sized = {k: widgets[k] for k in ("interactive", "gcg") if k in widgets}
    try:
        options = AttackOptions(**sized)
    except ValueError:  # a refused value: build_options shows it, there is no plan to size
        return {}
    return {m: registry.expected_candidates(m, options) for m in methods}


def estimate_caption(store: Any, plan: Mapping[str, int], victim: str | None, length: int) -> None:
    """Before Run: how long this run should take here, from this machine's earlier runs."""
    if store is None or not plan:
        return
    estimate = prior_estimate(store.unit_timings(plan), plan, victim=victim, length=length)
    if estimate.seconds is None:
        names = ", ".join(registry.method_label(m) for m in estimate.missing)
        st.caption(
            md(
                f"No time estimate yet: {names} has not run on this victim here. The first "
                "run measures it (the ETA appears once its first candidate is scored)."
            )
        )
        return
    seconds = estimate.seconds
    if seconds < 1:
        size = "under a second"
    elif seconds < 90:
        size = f"about {seconds:.0f} s"
    else:
        size = f"about {seconds / 60:.0f} min"
    st.caption(
        md(
            f"Estimated time on this machine: {size} (from {estimate.measured_from} earlier "
            "units of these methods on this victim, scaled to this length and size)."
        )
    )
