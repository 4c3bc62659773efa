"""Two runs' units, matched: the same snippet probed by the same method at the same length.

A release comparison (``memprobe diff``, ``memprobe gate --baseline``) is paired: each unit of the
candidate run is compared with the same unit of the baseline run, so that the snippets' own
difficulty cancels out. Runs that share no unit cannot be compared and are refused, naming what
differs; runs that share some are compared on the shared units, with a note saying how many of
each were left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from memprobe_core.errors import UsageError
from memprobe_core.models.endpoints import endpoint_from_manifest
from memprobe_core.report.build import require_attack_run
from memprobe_core.store import RunRecord, Store

KEY = ["snippet_id", "method", "length"]


class IncomparableRuns(UsageError):
    """The two runs share no finished unit (the message names what differs)."""


@dataclass(frozen=True)
class PairedRuns:
    """The finished units both runs have, side by side.

    Attributes:
        run_a / run_b: the run ids (``a``: the baseline, ``b``: the candidate).
        victim_a / victim_b: the audited models (``NAME at URL`` for one served from an
            endpoint, as the run recorded it).
        a / b: one row per shared unit, in the same order (the results frames' columns).
        only_a / only_b: finished units of one run that the other does not have.
    """

    run_a: int
    run_b: int
    victim_a: str
    victim_b: str
    a: pd.DataFrame
    b: pd.DataFrame
    only_a: int
    only_b: int

    @property
    def units(self) -> int:
        return len(self.a)

    def note(self) -> str:
        """What was left out, in words (``""`` when both runs have the same units)."""
        if not (self.only_a or self.only_b):
            return ""
        return (
            f"compared on the {self.units} unit(s) both runs finished; left out: "
            f"{self.only_a} of run {self.run_a}'s and {self.only_b} of run {self.run_b}'s"
        )


def pair_runs(store: Store, run_a: int, run_b: int) -> PairedRuns:
    """The shared finished units of runs ``run_a`` (baseline) and ``run_b`` (candidate).

    Raises:
        UnknownRunError: a run id the store does not have.
        IncomparableRuns: the same run twice, or runs with no finished unit in common.
    """
    if run_a == run_b:
        raise IncomparableRuns(
            f"run {run_a} given twice: compare two runs (e.g. the shipped model's audit and the "
            "candidate's)"
        )
    frames = {run: finished_units(store, run) for run in (run_a, run_b)}
    a, b = frames[run_a], frames[run_b]
    shared = a.merge(b[KEY], on=KEY, how="inner")[KEY]
    if shared.empty:
        raise IncomparableRuns(
            f"runs {run_a} and {run_b} share no finished unit: run {run_a} has {_shape(a)}; "
            f"run {run_b} has {_shape(b)}. Audit the same snippets, methods and lengths on both "
            "models"
        )
    return PairedRuns(
        run_a=run_a,
        run_b=run_b,
        victim_a=_victim(a, store.get_run(run_a)),
        victim_b=_victim(b, store.get_run(run_b)),
        a=shared.merge(a, on=KEY, how="left"),
        b=shared.merge(b, on=KEY, how="left"),
        only_a=len(a) - len(shared),
        only_b=len(b) - len(shared),
    )


def finished_units(store: Store, run: int) -> pd.DataFrame:
    """The run's finished units, one row per key (a unit finished twice: the last).

    Raises:
        UsageError: a document run (its windows are not attack results).
    """
    require_attack_run(store.get_run(run))
    frame = store.results_frame(run)
    return frame.drop_duplicates(KEY, keep="last").sort_values(KEY, kind="stable")


def _shape(frame: pd.DataFrame) -> str:
    """``"methods ps_base; lengths 100; 12 snippets"`` (or ``"no finished unit"``)."""
    if frame.empty:
        return "no finished unit"
    methods = ", ".join(sorted(frame["method"].unique()))
    lengths = ", ".join(str(n) for n in sorted(frame["length"].unique()))
    return f"methods {methods}; lengths {lengths}; {frame['snippet_id'].nunique()} snippets"


def _victim(frame: pd.DataFrame, run: RunRecord) -> str:
    """The run's victim, with the endpoint it was sent to when it was served from one (two
    runs of one model name on two servers are two models)."""
    names = frame["victim"].dropna().unique() if "victim" in frame else []
    name = str(names[0]) if len(names) else "?"
    served = (run.get("manifest") or {}).get("models") or {}
    endpoint = endpoint_from_manifest(served.get("victim"))
    return f"{name} at {endpoint['base_url']}" if endpoint.get("base_url") else name
