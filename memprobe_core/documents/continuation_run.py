"""A continuation as a stored, resumable run (kind ``document``, mode ``continue``;
docs/method.md §20).

``start_continuation`` records the document (its text, in the run's config) and the options.
``run_continuation_stored`` asks the victim turn after turn (:mod:`.continuation`) and stores
each turn as it arrives — its sample, unit and result in one transaction
(:meth:`~memprobe_core.store.Store.append_finished_unit`) — so a process killed at any moment
loses at most the turn in flight. A resume reads the stored turns back and hands them to the
engine, which replays them without asking the victim and goes on from there.

Each turn is unit ``(tNNNNN, "continue", 0)``: the request as its prompt, the whole turn (its
answer, phase, Best-of-N perturbations, refusal, stop reason, cost) in its ``verbatim`` dict under
``turn``. The answer is stored there only (its sample and the unit's output column stay empty):
an answer is as long as its token budget allows, and three copies tripled the store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.result import AttackResult
from memprobe_core.documents.continuation import (
    ContinuationOptions,
    ContinuationResult,
    Turn,
    refuse_chat_options,
    run_continuation,
    split_document,
)
from memprobe_core.documents.nv_recall import NvRecall, nv_recall
from memprobe_core.documents.stored import (
    KIND,
    DocumentBusyError,
    document_record,
    recorded_endpoint,
    require_endpoint,
    run_config,
    victim_record,
)
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey
from memprobe_core.store.owner import claim_or_refuse

CONTINUE_METHOD = "continue"
# Turn ids sort in order: t00000, t00001, …
TURN_ID_DIGITS = 5


def turn_id(index: int) -> str:
    return f"t{index:0{TURN_ID_DIGITS}d}"


@dataclass(frozen=True)
class TurnProgress:
    """Passed to ``on_progress`` after every new turn.

    Attributes:
        turns: turns so far (stored ones included). max_turns: the phase-2 budget.
        generated_tokens / max_tokens: tokens so far and the budget.
        last: the turn that just arrived.
    """

    turns: int
    max_turns: int
    generated_tokens: int
    max_tokens: int
    last: Turn


def _options_dict(options: ContinuationOptions) -> dict[str, Any]:
    data = asdict(options)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


def start_continuation(
    store: Store,
    text: str,
    victim: Any,
    *,
    name: str,
    victim_name: str,
    options: ContinuationOptions | None = None,
    title: str = "",
    models: dict[str, Any] | None = None,
) -> int:
    """Record a new continuation of ``text`` on ``victim`` and return its run id (nothing is
    asked yet). The run records where the victim is served (its endpoint) and, given
    ``models`` (a ``ModelNames`` dict), how to load it again: a resume goes there.

    Raises:
        UsageError: the document is shorter than its opening plus the held-back words.
        OptionError: a chat-only option (Best-of-N, instruction, continue prompt) changed for
            a base victim.
    """
    options = options or ContinuationOptions()
    split_document(text, options)  # refuses a document too short for phase 1, before storing
    if not victim.has_chat_template:
        refuse_chat_options(options, victim_name)
    config = {
        "mode": "continue",
        "document": document_record(text, name),
        "victim": victim_name,
        "victim_chat": bool(victim.has_chat_template),
        "continuation": _options_dict(options),
        **victim_record(victim, models),
    }
    return store.create_run(
        KIND,
        config=config,
        manifest={"victim": victim.manifest()},
        title=title or f"continuation of {name}",
    )


@dataclass(frozen=True)
class StoredContinuation:
    """A continuation run read back: its turns, the text generated and its nv-recall."""

    run_id: int
    status: str
    name: str
    victim: str
    text: str
    options: ContinuationOptions
    turns: list[Turn]
    stop_reason: str | None
    generated_text: str
    score: NvRecall
    # Where the victim is served (docs/options.md, "Where a run is sent").
    endpoint: dict[str, str] = field(default_factory=dict)

    @property
    def queries(self) -> int:
        return sum(t.queries for t in self.turns)

    @property
    def generated_tokens(self) -> int:
        return sum(t.tokens for t in self.turns)

    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.turns)


def continuation_options(config: dict[str, Any]) -> ContinuationOptions:
    return ContinuationOptions(**config["continuation"])


def stored_turns(store: Store, run_id: int) -> list[Turn]:
    """The run's stored turns, in order."""
    units = [u for u in store.units(run_id) if u["method"] == CONTINUE_METHOD]
    units.sort(key=lambda u: u["snippet_id"])
    return [Turn.from_dict(u["verbatim"]["turn"]) for u in units if u["status"] == "done"]  # type: ignore[arg-type]


def generated_text(turns: list[Turn]) -> str:
    """What the run generated, as the engine joins it: phase 1's passing answer and every
    phase-2 answer, one per line (failed phase-1 attempts are not part of it)."""
    kept = [t.output for t in turns if (t.phase == 1 and t.success) or t.phase == 2]
    return "\n".join(kept)


def read_continuation(store: Store, run_id: int) -> StoredContinuation:
    """The stored run, scored with nv-recall against the whole document."""
    config = run_config(store, run_id, "continue")
    run = store.get_run(run_id)
    turns = stored_turns(store, run_id)
    text = config["document"]["text"]
    generated = generated_text(turns)
    return StoredContinuation(
        run_id=run_id,
        status=run["status"],
        name=config["document"]["name"],
        victim=config["victim"],
        text=text,
        options=continuation_options(config),
        turns=turns,
        stop_reason=turns[-1].stop_reason if turns else None,
        generated_text=generated,
        score=nv_recall(text, generated),
        endpoint=recorded_endpoint(run),
    )


def run_continuation_stored(
    store: Store,
    run_id: int,
    victim: Any,
    *,
    on_progress: Callable[[TurnProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> StoredContinuation:
    """Ask the victim until the run stops (a resume is the same call), storing each turn.

    Raises:
        DocumentRunError: not a continuation run.
        DocumentBusyError: another live process is working on the run.
        EndpointMismatch: ``victim`` is served from another endpoint than the run records
            (nothing is sent).
        ResumeMismatch: the stored turns do not fit the victim (a chat model resumed with a base
            one, or the other way round).
        KeyboardInterrupt: after marking the run ``interrupted`` (the stored turns are kept).
    """
    config = run_config(store, run_id, "continue")
    require_endpoint(store, run_id, victim)
    claim_or_refuse(store, run_id, DocumentBusyError)
    options = continuation_options(config)
    prior = stored_turns(store, run_id)
    victim_label = str(config["victim"])
    counts = [len(prior), sum(t.tokens for t in prior)]  # turns and tokens stored so far

    def on_turn(turn: Turn) -> None:
        store.append_finished_unit(
            run_id,
            # The answer is stored once, in the unit's turn (the sample only names the turn).
            Snippet(id=turn_id(turn.index), text="", domain="document", source="turn"),
            UnitKey(turn_id(turn.index), CONTINUE_METHOD, 0),
            _result(turn, victim_label),
        )
        counts[0] += 1
        counts[1] += turn.tokens
        if on_progress is not None:
            on_progress(
                TurnProgress(counts[0], options.max_turns, counts[1], options.max_tokens, turn)
            )

    try:
        result: ContinuationResult = run_continuation(
            victim,
            config["document"]["text"],
            options,
            prior_turns=prior,
            on_turn=on_turn,
            cancel=cancel,
        )
    except KeyboardInterrupt:
        store.set_run_status(run_id, "interrupted")
        raise
    store.set_run_status(run_id, "interrupted" if result.stop_reason == "cancelled" else "finished")
    return read_continuation(store, run_id)


def _result(turn: Turn, victim: str) -> AttackResult:
    return AttackResult(
        method=CONTINUE_METHOD,
        snippet_id=turn_id(turn.index),
        domain="document",
        length=0,
        prompt=turn.request_text,
        output="",  # the answer is in ``verbatim["turn"]``: stored once, read from there
        mem=0.0,
        lcs_p=0.0,
        objective=0.0,
        alpha=0.0,
        costs=Costs(
            victim_queries=turn.queries,
            generated_tokens=turn.tokens,
            victim_seconds=turn.seconds,
            wall_seconds=turn.seconds,
        ),
        manifest={"victim": victim, "context": turn.context},
        verbatim={"turn": turn.to_dict()},
    )
