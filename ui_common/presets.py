"""Run-size presets of the Probe and Compare pages: quick on a CPU, the paper's one click away.

The core's defaults are the paper's (length 200, 3 rounds × 24 candidates, 30 GCG steps). On a
2-core CPU one round of 4 candidates at length 60 already took minutes on the dashboard, so a
page that detects no GPU starts from :data:`QUICK`; :data:`PAPER` sets the paper's sizes in one
click. A preset writes the widgets' values through session state (their keys are
``{prefix}_length``, ``{prefix}_rounds``, ``{prefix}_n`` and ``{prefix}_gcg_steps``), so any
value can still be changed by hand afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from memprobe_core.attacks import registry
from memprobe_core.attacks.options import AttackOptions, GCGOptions, InteractiveOptions
from memprobe_core.config import DEFAULT_LENGTH
from memprobe_core.machine_load import cpu_cores, free_cores
from memprobe_core.runs.eta import PriorEstimate, prior_estimate
from memprobe_core.snippets.corpus import DOMAINS
from ui_common.models import has_gpu
from ui_common.page import carried, keep, md


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


def run_size_radio(
    key: str, labels: Mapping[str, str], fill: Callable[[str], None], *, help_text: str
) -> str:
    """A page's "Run size" radio (Quick for a CPU, the paper's sizes for a GPU): choosing a size
    calls ``fill(name)``, which sets the option widgets below (each can still be changed).
    ``key`` is the widget's session key, already kept (``page.keep`` / ``carried``)."""
    return str(
        st.radio(
            "Run size",
            list(labels),
            format_func=labels.__getitem__,
            horizontal=True,
            key=key,
            on_change=lambda: fill(st.session_state[key]),
            help=help_text,
        )
    )


def preset_widget(prefix: str) -> Preset:
    """A "Run size" radio; choosing a preset sets the length, rounds, candidates and GCG steps."""
    detected = detected_preset()
    name = run_size_radio(
        carried(f"{prefix}_preset", "preset", detected.name, list(PRESETS)),
        {n: p.label for n, p in PRESETS.items()},
        lambda chosen: st.session_state.update(PRESETS[chosen].widget_values(prefix)),
        help_text=(
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


class Plan(dict[str, int]):
    """{method: candidates it will score}, with ``batches`` ({method: [batch sizes]}): a round's
    candidates are answered as one batch (the estimates cost batches, not candidates)."""

    batches: dict[str, list[int]]

    def __init__(self, counts: Mapping[str, int], batches: Mapping[str, list[int]]) -> None:
        super().__init__(counts)
        self.batches = dict(batches)


def planned_candidates(methods: Sequence[str], widgets: Mapping[str, Any]) -> Plan:
    """{method: candidates it will score} under the page's option widgets (the ETA's plan),
    with each method's batches: what its registry entry declares for these options
    (``MethodSpec.candidates`` and ``MethodSpec.batches``), so a method's own options (the
    attacker loop's rounds, divergence's samples, a plugin's count) size its estimate."""
    try:
        options = AttackOptions(**widgets)
    except (TypeError, ValueError):  # a refused value: build_options shows it, nothing to size
        return Plan({}, {})
    counts = {m: registry.expected_candidates(m, options) for m in methods}
    batches = {m: registry.expected_batches(m, options) for m in methods}
    return Plan(counts, batches)


def unit_rows(store: Any, methods: Sequence[str], *, runs: int = 40) -> list[dict[str, Any]]:
    """Finished units of ``methods`` in the newest ``runs`` runs, with what the estimate before
    a run reads: method, length, seconds, candidates, the run's victim and, from the unit's
    costs, its victim batches and the load it ran under (``memprobe_core.runs.eta``)."""
    wanted = set(methods)
    recent = store.list_runs(limit=runs)
    key = (str(getattr(store, "path", "")), tuple((r["id"], r.get("units_done")) for r in recent))
    cached = _ROWS.get(key)
    if cached is None:
        cached = []
        for run in recent:
            config = run.get("config") or {}
            if not wanted & set(config.get("methods") or []):
                continue
            victim = (config.get("models") or {}).get("victim")
            for unit in store.units(run["id"], status="done"):
                costs = unit.get("costs") or {}
                if not unit.get("seconds"):
                    continue
                cached.append(
                    {
                        "method": unit["method"],
                        "length": int(unit["length"]),
                        "seconds": float(unit["seconds"]),
                        "candidates": int(costs.get("victim_queries") or 0),
                        "victim": victim,
                        "victim_calls": costs.get("victim_calls"),
                        "others_busy_cores": costs.get("others_busy_cores"),
                        "cores": costs.get("cores"),
                    }
                )
        _ROWS.clear()
        _ROWS[key] = cached
    return [r for r in cached if r["method"] in wanted]


_ROWS: dict[Any, list[dict[str, Any]]] = {}
_FREE: dict[str, float] = {}


def free_cores_now(max_age: float = 10.0) -> float:
    """The cores free now (``memprobe_core.machine_load.free_cores``), measured at most every
    ``max_age`` seconds (each measurement waits 0.2 s)."""
    now = time.monotonic()
    if now - _FREE.get("at", -1e9) > max_age:
        _FREE.update(at=now, free=free_cores())
    return _FREE["free"]


def duration(seconds: float) -> str:
    """ "about 40 s", "about 7 min", "about 1 h 10 min"."""
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"about {seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60:02d} min"


def plural(count: int, word: str, many: str | None = None) -> str:
    """ "1 earlier unit", "3 earlier units"."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def estimate_text(
    rows: Sequence[Mapping[str, Any]],
    plan: Mapping[str, int],
    victim: str | None,
    length: int,
    *,
    free_now: float | None,
    cores: int,
    labels: Mapping[str, str] | None = None,
    gpu: bool = False,
    snippets: int = 1,
    lengths: Sequence[int] | None = None,
) -> str:
    """What the page says before Run about the time the run will take here (plain text: the
    caller shows it through ``md``). ``snippets`` × ``lengths``: an audit's units per method
    (one snippet at ``length`` otherwise)."""
    batches = getattr(plan, "batches", None)
    estimates = [
        prior_estimate(
            rows, plan, victim=victim, length=n, batches=batches, free_cores_now=free_now
        )
        for n in (lengths or [length])
    ]
    estimate = PriorEstimate(
        None if estimates[0].seconds is None else snippets * sum(e.seconds or 0 for e in estimates),
        estimates[0].measured_from,
        estimates[0].missing,
        None
        if estimates[0].rough_seconds is None
        else snippets * sum(e.rough_seconds or 0 for e in estimates),
        estimates[0].load_scale,
    )
    load = ""
    if free_now is not None:
        load = f"{free_now:.1f} of {cores} cores free now"
    if estimate.seconds is None:
        names = ", ".join((labels or {}).get(m, m) for m in estimate.missing)
        verb = "has" if len(estimate.missing) == 1 else "have"
        text = f"No time measured yet: {names} {verb} not run on this victim here."
        if estimate.rough_seconds is not None and not gpu:
            text += (
                f" Rough guess for a 2-core CPU: {duration(estimate.rough_seconds)} (a reference "
                "rate of the embedded models, not this machine's"
                + (f"; {load}" if load else "")
                + ")."
            )
        return text + " The first run measures it; the time left shows once a round is scored."
    if estimate.load_scale is None:
        correction = "the same load as then assumed (they recorded none)"
    else:
        correction = f"corrected for the load ({load}): ×{estimate.load_scale:.2f}"
    return (
        f"Estimated time on this machine: {duration(estimate.seconds)} (from "
        f"{plural(estimate.measured_from, 'earlier unit')} of these methods on this victim, "
        f"scaled to {'these lengths' if lengths and len(lengths) > 1 else 'this length'}, each "
        f"round's candidates costed as one batch; {correction})."
    )


def estimate_caption(
    store: Any,
    plan: Mapping[str, int],
    victim: str | None,
    length: int,
    *,
    snippets: int = 1,
    lengths: Sequence[int] | None = None,
) -> None:
    """Before Run: how long this run should take here, from this machine's earlier runs
    (per token of length and per batch, corrected for the load now), or a rough first figure.
    An audit passes its ``snippets`` and ``lengths``."""
    if store is None or not plan or snippets < 1 or (lengths is not None and not lengths):
        return
    labels = {m: registry.method_label(m) for m in plan}
    text = estimate_text(
        unit_rows(store, list(plan)),
        plan,
        victim,
        length,
        free_now=free_cores_now(),
        cores=cpu_cores(),
        labels=labels,
        gpu=has_gpu(),
        snippets=snippets,
        lengths=lengths,
    )
    st.caption(md(text))


# --- the Audit page's run sizes -----------------------------------------------------------------


@dataclass(frozen=True)
class AuditSize:
    """Sizes of an audit from the built-in corpus: its domains, snippets per domain, lengths,
    and the probe preset of the same name for rounds, candidates and GCG steps."""

    name: str
    label: str
    domains: tuple[str, ...]
    per_domain: int
    lengths: tuple[int, ...]

    def widget_values(self) -> dict[str, Any]:
        """The sizes as the session-state values of the Audit page's widgets."""
        run = PRESETS[self.name].widget_values(AUDIT)
        run.pop(f"{AUDIT}_length")  # an audit picks its lengths in a list
        return run | {
            "audit_domains": list(self.domains),
            "audit_limit": self.per_domain,
            "audit_lengths": list(self.lengths),
        }


AUDIT = "audit"
AUDIT_QUICK = AuditSize("quick", "Quick (CPU)", tuple(DOMAINS), 1, (50,))
AUDIT_PAPER = AuditSize("paper", "Paper sizes", tuple(DOMAINS), 2, (DEFAULT_LENGTH,))
AUDIT_SIZES = {a.name: a for a in (AUDIT_QUICK, AUDIT_PAPER)}


def audit_size() -> AuditSize:
    """The Audit page's chosen run size (the detected one before any choice)."""
    return AUDIT_SIZES.get(
        st.session_state.get(f"{AUDIT}_preset", ""), AUDIT_SIZES[detected_preset().name]
    )


def audit_size_widget() -> AuditSize:
    """The Audit page's "Run size" radio; a choice sets domains, snippets per domain, lengths,
    rounds, candidates and GCG steps (each can still be changed)."""
    detected = AUDIT_SIZES[detected_preset().name]
    q, p = AUDIT_QUICK, AUDIT_PAPER
    name = run_size_radio(
        keep(f"{AUDIT}_preset", detected.name, list(AUDIT_SIZES)),
        {n: a.label for n, a in AUDIT_SIZES.items()},
        lambda chosen: st.session_state.update(AUDIT_SIZES[chosen].widget_values()),
        help_text=(
            f"Quick: {q.per_domain} snippet per domain, length "
            f"{q.lengths[0]}, {QUICK.rounds} round × {QUICK.n} candidates (minutes on a 2-core "
            f"CPU). Paper sizes: {p.per_domain} snippets per domain, length {p.lengths[0]}, "
            f"{PAPER.rounds} rounds × {PAPER.n} candidates (for a GPU). Each value can still be "
            "changed below."
        ),
    )
    if detected is AUDIT_QUICK:
        st.caption("No GPU found: the quick sizes are the default here.")
    return AUDIT_SIZES[name]
