"""How long a document run should take, said before it starts (the Document page's estimate).

From this store's earlier runs on the same victim where there are some (a map: the seconds each
window took, per token of window; a continuation: the seconds per generated token), else an
honest rough figure: the embedded 270M model's rates measured on a 2-core CPU, said to be rough.
Either way the figure includes what comes before the first result: loading the model when this
process has not loaded it yet, and the first batch of windows, which all land together when it
ends (a map shows nothing for the whole first batch: 16 windows by default).

The machine's current load scales the figure by :func:`load_factor` (``1 + busy / cores``, the
cores other processes keep busy, :mod:`memprobe_core.machine_load`): the CPU is shared out
between them and the job. Pure: the caller passes the
timings, the load and whether the model is loaded, so tests drive it with made-up figures.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memprobe_core.documents.continuation import ContinuationOptions
from memprobe_core.documents.windows import MapOptions
from memprobe_core.store import Store

# Rough rates when the store has no earlier run on the victim: the embedded gemma-3-270m on a
# 2-core CPU, measured here (`memprobe document --builtin apache-2.0`): a map of 45 windows of
# 100 tokens in 45 s with the cores nearly free (0.79-1.17 s a window by batch); a continuation's
# 120-token opening in 51 s with both cores busy with other work (0.43 s a token; a quarter of
# it with the cores free, rounded up). A larger victim takes longer in proportion to its size.
ROUGH_WINDOW_TOKEN_S = 0.011
ROUGH_GENERATED_TOKEN_S = 0.15
# Loading a model this process has not loaded yet (the libraries on first use, weights from
# disk): seconds with the cores free, rough (the embedded model took 26-49 s with both busy).
ROUGH_LOAD_S = 25.0
# Tokens per whitespace word when no earlier map of the victim says (English prose with a
# Gemma-sized vocabulary: the built-in Apache License is 1.45).
ROUGH_TOKENS_PER_WORD = 1.45
# Earlier runs of the victim an estimate reads at most (newest first).
EARLIER_RUNS = 3


@dataclass(frozen=True)
class RunEstimate:
    """Seconds a document run should take, and what the figure rests on.

    Attributes:
        seconds: the whole run, model loading included.
        first_s: until the first result shows (a map's first batch; a continuation's opening
            answer).
        loading_s: model loading, included in both (0: the model is loaded already).
        measured_from: earlier windows or turns of this victim the rate comes from (0: the
            rough rate of the embedded model).
        load_factor: the factor applied for the cores other processes keep busy now (1: none).
        most: ``True`` when ``seconds`` is an upper bound (a continuation stops at its budgets
            or earlier, on the victim's answers).
    """

    seconds: float
    first_s: float
    loading_s: float
    measured_from: int
    load_factor: float
    most: bool = False


def load_factor(cores: int, free: float | None) -> float:
    """``1 + busy / cores``, ``busy`` the cores other processes keep busy (``cores - free``):
    the CPU shared out between them and the job, which wants every core (2 on a 2-core machine
    whose cores are both busy; 1 when the load is not known).

    Measured on the Document page (2 cores, both busy with other work, load 12-14): a map whose
    windows took 1.0 s each on free cores took 2.1 s each, and the model 26 s to load. An earlier
    ``cores / free`` (at least half a core free) said ×4, an estimate 1.7 times the run.
    """
    if free is None or cores <= 0:
        return 1.0
    busy = min(float(cores), max(0.0, cores - free))
    return 1.0 + busy / cores


def earlier_runs(
    store: Store, *, victim: str, mode: str, limit: int = EARLIER_RUNS
) -> list[dict[str, Any]]:
    """The newest ``limit`` document runs in ``mode`` on ``victim`` (its name as the run
    records it) that did some work: ``{"id", "document", "units"}`` each."""
    out: list[dict[str, Any]] = []
    for run in store.list_runs(kind="document"):
        config = run["config"]
        if config.get("mode") != mode or config.get("victim") != victim:
            continue
        if not run["units_done"]:
            continue
        out.append(
            {
                "id": run["id"],
                "document": config.get("document") or {},
                "units": store.units(run["id"]),
            }
        )
        if len(out) >= limit:
            break
    return out


def document_tokens(runs: Iterable[Mapping[str, Any]], text: str) -> tuple[int, bool]:
    """``(tokens, exact)``: the victim's token count of ``text`` where an earlier map of it
    recorded one (``exact``), else its words times the earlier maps' tokens per word (or
    :data:`ROUGH_TOKENS_PER_WORD`)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    ratios = []
    for run in runs:
        doc = run["document"]
        if doc.get("sha256") == digest and doc.get("tokens"):
            return int(doc["tokens"]), True
        if doc.get("tokens") and doc.get("words"):
            ratios.append(int(doc["tokens"]) / int(doc["words"]))
    ratio = statistics.median(ratios) if ratios else ROUGH_TOKENS_PER_WORD
    return round(len(text.split()) * ratio), False


def window_count(tokens: int, options: MapOptions) -> int:
    """Windows a document of ``tokens`` tokens is cut into (as ``cut_windows`` cuts them)."""
    if tokens < options.window_tokens:
        return 0
    return (tokens - options.window_tokens) // options.stride + 1


def map_window_seconds(runs: Iterable[Mapping[str, Any]]) -> list[tuple[float, int]]:
    """``(seconds, window tokens)`` of each window the given map runs scored: ``runs`` are
    ``{"units": [...]}`` dicts of ``Store.units`` rows (done windows hold their share of their
    batch's wall time in ``costs``)."""
    out = []
    for run in runs:
        for unit in run["units"]:
            seconds = (unit.get("costs") or {}).get("wall_seconds")
            if unit.get("status") == "done" and seconds and unit.get("length"):
                out.append((float(seconds), int(unit["length"])))
    return out


def estimate_map(
    timings: list[tuple[float, int]],
    *,
    windows: int,
    options: MapOptions,
    model_loaded: bool,
    cores: int,
    free: float | None,
) -> RunEstimate:
    """A map of ``windows`` windows cut with ``options``: the median seconds per window token of
    the earlier ``timings`` (:func:`map_window_seconds`), else the rough rate."""
    if timings:
        per_token = statistics.median(s / tokens for s, tokens in timings)
    else:
        per_token = ROUGH_WINDOW_TOKEN_S
    per_window = per_token * options.window_tokens
    factor = load_factor(cores, free)
    loading = 0.0 if model_loaded else ROUGH_LOAD_S
    first = loading + min(windows, options.batch_windows) * per_window
    return RunEstimate(
        seconds=(loading + windows * per_window) * factor,
        first_s=first * factor,
        loading_s=loading * factor,
        measured_from=len(timings),
        load_factor=factor,
    )


def continuation_token_seconds(runs: Iterable[Mapping[str, Any]]) -> list[tuple[float, int]]:
    """``(seconds, tokens)`` of each turn the given continuation runs stored (``runs``: as for
    :func:`map_window_seconds`; a turn's record is in its unit's ``verbatim["turn"]``)."""
    out = []
    for run in runs:
        for unit in run["units"]:
            turn = (unit.get("verbatim") or {}).get("turn") or {}
            seconds, tokens = turn.get("seconds"), turn.get("tokens")
            if unit.get("status") == "done" and seconds and tokens:
                out.append((float(seconds), int(tokens)))
    return out


def most_tokens(options: ContinuationOptions) -> int:
    """The most tokens a continuation generates: its token budget, or every turn it may ask
    (the opening, the Best-of-N attempts, the phase-2 turns) at its tokens per turn."""
    turns = 1 + options.best_of_n + options.max_turns
    return min(options.max_tokens, turns * options.turn_tokens)


def estimate_continuation(
    timings: list[tuple[float, int]],
    *,
    options: ContinuationOptions,
    model_loaded: bool,
    cores: int,
    free: float | None,
) -> RunEstimate:
    """The longest a continuation with ``options`` should take (it stops earlier when the victim
    refuses, drifts or says THE END): :func:`most_tokens` at the earlier turns' seconds per
    token (:func:`continuation_token_seconds`), else the rough rate."""
    if timings:
        per_token = sum(s for s, _ in timings) / sum(t for _, t in timings)
    else:
        per_token = ROUGH_GENERATED_TOKEN_S
    factor = load_factor(cores, free)
    loading = 0.0 if model_loaded else ROUGH_LOAD_S
    first = loading + min(options.turn_tokens, options.max_tokens) * per_token
    return RunEstimate(
        seconds=(loading + most_tokens(options) * per_token) * factor,
        first_s=first * factor,
        loading_s=loading * factor,
        measured_from=len(timings),
        load_factor=factor,
        most=True,
    )


def duration(seconds: float) -> str:
    """``"40 s"``, ``"3 min 20 s"``, ``"2 h 5 min"`` (rounded to what a reader plans by)."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes} min {rest:02d} s" if minutes < 10 else f"{round(seconds / 60)} min"
    hours, rest = divmod(round(seconds / 60), 60)
    return f"{hours} h {rest} min"


def describe_estimate(
    e: RunEstimate, *, what: str, first: str, source: str, cores: int, free: float | None
) -> str:
    """The estimate in a few words: ``what`` (e.g. "45 windows"), ``first`` (what shows first,
    e.g. "the first 16 windows"), ``source``: whose rate (e.g. "gemma-3-270m's 45 earlier
    windows in this store")."""
    total = ("at most about " if e.most else "about ") + duration(e.seconds)
    parts = [f"Estimate for {what}: {total}; {first} after about {duration(e.first_s)}"]
    if e.loading_s:
        parts.append(f"loading the model included (about {duration(e.loading_s)}, rough)")
    if e.measured_from:
        parts.append(f"measured from {source}")
    else:
        parts.append(
            "rough: no earlier run of this victim in this store, so the embedded 270M model's "
            "rate on a 2-core CPU (a larger victim takes longer in proportion)"
        )
    if e.load_factor > 1 and free is not None:
        parts.append(
            f"×{e.load_factor:.1f} for the load now ({cores - free:.1f} of {cores} cores "
            "busy with other work)"
        )
    return "; ".join(parts) + "."
