"""The typed records the store returns (a run, a unit, a candidate), unit keys and statuses.

They are ``TypedDict``s: a row read from SQLite is a dict (the pages, the CLI's ``--json`` and the
report read it by key), and the types say which keys it has and what each holds, so a misspelt
key or a wrong type is a type error instead of a ``KeyError`` at run time. The statuses are
defined here once; the tuples are derived from the ``Literal`` types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict, get_args

from memprobe_core.records import MembershipRecord, VerbatimRecord


@dataclass(frozen=True, order=True)
class UnitKey:
    """Identifies one unit of work of a run: a snippet probed by one method at one length."""

    snippet_id: str
    method: str
    length: int

    def __str__(self) -> str:
        return f"{self.snippet_id}/{self.method}/{self.length}"


RunKind = Literal["probe", "audit", "compare", "document"]
RunStatus = Literal["running", "finished", "interrupted", "cancelled", "failed"]
# ``cancelled``: stopped by the user in a probe or comparison; its partial best is kept for
# display but never counted as finished (an audit's cancelled unit goes back to ``pending``).
UnitStatus = Literal["pending", "running", "done", "error", "cancelled"]

RUN_KINDS: tuple[str, ...] = get_args(RunKind)
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
UNIT_STATUSES: tuple[str, ...] = get_args(UnitStatus)


class RunRecord(TypedDict):
    """A run: its config (what was asked) and manifest (what ran), with its units' counts."""

    id: int
    kind: RunKind
    title: str
    status: RunStatus
    created: float
    updated: float
    config: dict[str, Any]
    manifest: dict[str, Any]
    units_total: int
    units_done: int
    units_error: int
    units_running: int
    units_pending: int


class UnitRecord(TypedDict):
    """A unit (snippet × method × length) and, once finished, its result's columns."""

    run_id: int
    snippet_id: str
    method: str
    length: int
    key: UnitKey
    position: int
    status: UnitStatus
    error: str | None
    attempts: int
    started: float | None
    finished: float | None
    seconds: float | None
    domain: str | None
    prompt: str | None
    output: str | None
    mem: float | None
    lcs_p: float | None
    objective: float | None
    dis: float | None
    alpha: float | None
    mem_init: float | None
    mem_best: float | None
    mem_reference: float | None
    pii: dict[str, Any]
    costs: dict[str, Any]
    manifest: dict[str, Any]
    verbatim: VerbatimRecord
    membership: MembershipRecord


class CandidateRecord(TypedDict):
    """One scored candidate as stored (``flags``: the method's, plus ``clipped`` when the store
    cut its prompt or output)."""

    id: int
    run_id: int
    snippet_id: str
    method: str
    length: int
    round: int
    index: int
    prompt: str
    output: str
    mem: float | None
    lcs_p: float | None
    objective: float | None
    flags: list[str]
    is_round_best: bool
    extra: dict[str, Any]
    created: float
