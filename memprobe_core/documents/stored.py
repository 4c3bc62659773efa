"""What the two kinds of document run share in the store (run kind ``document``): the stored
document, the refusals, and reading a run's config by its mode (``map`` or ``continue``)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from memprobe_core.errors import MemprobeError, UsageError
from memprobe_core.models.endpoints import check_endpoint, endpoint_from_manifest, endpoint_of
from memprobe_core.store import RunRecord, Store

KIND = "document"
# A document run's modes, as its config records them, and how people call them.
MODES: dict[str, str] = {"map": "extraction map", "continue": "continuation"}


class DocumentRunError(UsageError):
    """A document run that cannot be started, read or resumed (the message says why)."""


class DocumentBusyError(MemprobeError, RuntimeError):
    """The run is being worked on by another live process."""


def document_record(text: str, name: str, **extra: Any) -> dict[str, Any]:
    """The document as a run's config keeps it: the whole text (a resume needs nothing else),
    its name, hash and word count, and ``extra`` (token counts)."""
    return {
        "name": name,
        "text": text,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "words": len(text.split()),
        **extra,
    }


def units_text(run: RunRecord) -> str:
    """A run's progress in units as lists show it: "12/45" (done of all), but for a
    continuation "4 turns": it stores each turn as it arrives and knows no total in advance, so
    "4/4" would read as finished while it may stop at any turn."""
    done = run["units_done"]
    if run["kind"] == KIND and run["config"].get("mode") == "continue":
        return f"{done} turn" + ("" if done == 1 else "s")
    return f"{done}/{run['units_total']}"


def run_mode(store: Store, run_id: int) -> str:
    """The mode (a key of :data:`MODES`) of document run ``run_id``.

    Raises:
        UnknownRunError: no such run. DocumentRunError: not a document run, or one of a mode
            this memprobe does not know.
    """
    run = store.get_run(run_id)
    mode = run["config"].get("mode") if run["kind"] == KIND else None
    if mode not in MODES:
        run_config(store, run_id, "map")  # raises, naming what the run is
    return str(mode)


def run_config(store: Store, run_id: int, mode: str) -> dict[str, Any]:
    """The config of document run ``run_id`` in ``mode``.

    Raises:
        UnknownRunError: no such run. DocumentRunError: another kind of run, or another mode.
    """
    run = store.get_run(run_id)
    found = run["config"].get("mode") if run["kind"] == KIND else None
    if found != mode:
        article = "an" if run["kind"][:1] in "aeiou" else "a"
        what = f"a document's {MODES[found]}" if found in MODES else f"{article} {run['kind']} run"
        raise DocumentRunError(
            f"run {run_id} is {what}, not a document's {MODES[mode]}; `memprobe runs` lists the "
            "runs and their kinds"
        )
    return run["config"]


def victim_record(victim: Any, models: dict[str, Any] | None) -> dict[str, Any]:
    """What a document run's config keeps of its victim besides its name: the endpoint it is
    sent to (``endpoint``: backend, model, servers; never a key) and, when given, how to load
    it again (``models``: a :class:`~memprobe_core.runs.roles.ModelNames` dict), so a resume
    goes to the same place (docs/options.md, "Where a run is sent")."""
    record: dict[str, Any] = {"endpoint": endpoint_of(victim)}
    if models is not None:
        record["models"] = models
    return record


def recorded_endpoint(run: RunRecord) -> dict[str, str]:
    """The endpoint a document run records: its config's, or for a run stored before runs
    recorded one, the one its victim's manifest names (``{}``: neither)."""
    endpoint = run["config"].get("endpoint")
    if isinstance(endpoint, dict):
        return {k: str(v) for k, v in endpoint.items()}
    return endpoint_from_manifest((run.get("manifest") or {}).get("victim"))


# How to send a stored run elsewhere on purpose (named in every refusal).
SWITCH_REMEDY = (
    "A run goes on where it was started; to send it elsewhere on purpose, give `memprobe "
    "document --resume RUN --switch-endpoint --base-url URL` (the switch is recorded in the run)"
)


def require_endpoint(store: Store, run_id: int, victim: Any) -> None:
    """Refuse to ask ``victim`` for run ``run_id`` when it is served from another endpoint
    than the one the run records (checked before anything is sent).

    Raises:
        EndpointMismatch: naming both endpoints and how to switch on purpose.
    """
    run = store.get_run(run_id)
    check_endpoint(
        f"run {run_id}'s document", recorded_endpoint(run), endpoint_of(victim), SWITCH_REMEDY
    )


def switch_endpoint(
    store: Store, run_id: int, victim: Any, models: dict[str, Any] | None
) -> dict[str, str]:
    """Record that run ``run_id`` goes on at ``victim``'s endpoint from now on (asked for with
    ``--switch-endpoint``): the config's endpoint and load record become the new ones, and
    ``endpoint_switches`` lists each switch (from, to, when). Returns the endpoint it left."""
    run = store.get_run(run_id)
    config = dict(run["config"])
    old = recorded_endpoint(run)
    new = endpoint_of(victim)
    config["endpoint"] = new
    if models is not None:
        config["models"] = models
    config["endpoint_switches"] = [
        *config.get("endpoint_switches", []),
        {"from": old, "to": new, "at": time.time()},
    ]
    store.update_run(run_id, config=config)
    return old
