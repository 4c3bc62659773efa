"""Typed progress events every extraction method emits, with one payload shape per event.

Every method emits, in this order::

    (SearchStep*)                      # GCG only: one per optimisation step, before any round
    (RoundStarted CandidateScored* RoundFinished)+
    Finished

``CandidateScored`` carries the candidate exactly as it will appear in the result's trace, so a
consumer (the store's recorder, the terminal table, the dashboard) never needs the result to show
progress. Consumers match on the class (``isinstance`` or ``match``); ``kind`` is the stable name
used in logs and tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:  # result.py defines Candidate/AttackResult; events are imported by it too
    from memprobe_core.attacks.result import AttackResult, Candidate


@dataclass(frozen=True)
class RoundStarted:
    """A round of ``n`` candidates begins (round 0: the method's initial prompt(s))."""

    round: int
    n: int
    kind: ClassVar[str] = "round_started"


@dataclass(frozen=True)
class CandidateScored:
    """One candidate was answered and scored (it is already final: store it as it is)."""

    round: int
    candidate: Candidate
    kind: ClassVar[str] = "candidate_scored"


@dataclass(frozen=True)
class RoundFinished:
    """A round ended; ``best`` is its best candidate by the objective."""

    round: int
    best: Candidate
    kind: ClassVar[str] = "round_finished"


@dataclass(frozen=True)
class SearchStep:
    """One step of a white-box search (GCG) ended; nothing was sent to the victim yet.

    Attributes:
        step / steps: this step (1-based) and the planned number.
        loss: the best loss so far; step_loss: this step's best loss.
        best_prompt: the best prompt so far, decoded.
    """

    step: int
    steps: int
    loss: float
    step_loss: float
    best_prompt: str
    kind: ClassVar[str] = "search_step"


@dataclass(frozen=True)
class Finished:
    """The method ended (``result.status`` says whether it was cancelled)."""

    result: AttackResult
    kind: ClassVar[str] = "finished"


AttackEvent = RoundStarted | CandidateScored | RoundFinished | SearchStep | Finished
EventCallback = Callable[[AttackEvent], None]


def emit(on_event: EventCallback | None, event: AttackEvent) -> None:
    """Send ``event`` to the callback, if any."""
    if on_event is not None:
        on_event(event)
