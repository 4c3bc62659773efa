"""An extraction map as a stored, resumable run (kind ``document``; docs/method.md §19).

``start_map`` records the document (its text, in the run's config, so a resume needs nothing
else), one sample per window (the window's decoded text) and one pending unit per window
(method ``map``, length = prefix + suffix tokens). ``run_map`` scores the pending windows in
batches and commits each window as its batch ends; a process killed mid-batch leaves that batch
pending, and the next ``run_map`` redoes it: nothing finished is lost or counted twice.

A resume tokenizes the stored text again and refuses when the ids differ from those the run was
cut with (another tokenizer or version): windows must mean the same tokens.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.model_set import MissingModelError, has_weights
from memprobe_core.attacks.result import AttackResult
from memprobe_core.documents.extraction_map import (
    MapSummary,
    WindowScore,
    front_ids,
    score_windows,
    summarise,
)
from memprobe_core.documents.map_near_verbatim import (
    SETTING_KEY,
    MapBoundOptions,
    measure_bounds,
    stored_bounds,
)
from memprobe_core.documents.rank_cost import document_rank_cost
from memprobe_core.documents.stored import (
    KIND,
    DocumentBusyError,
    DocumentRunError,
    document_record,
    recorded_endpoint,
    require_endpoint,
    run_config,
    victim_record,
)
from memprobe_core.documents.windows import MapOptions, Window, cut_windows, window_index
from memprobe_core.measuring.inextractability import InextractabilityOptions
from memprobe_core.measuring.sampler import SamplingScheme
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import RunRecord, Store, UnitKey
from memprobe_core.store.owner import claim_or_refuse

MAP_METHOD = "map"


@dataclass(frozen=True)
class MapProgress:
    """Where a map stands (passed to ``on_progress`` after every batch).

    Attributes:
        done / total: windows scored out of all. rate: windows per second in this call.
        eta_s: seconds left at that rate (``None`` before the first batch ends).
    """

    done: int
    total: int
    rate: float
    eta_s: float | None


ProgressCallback = Callable[[MapProgress], None]


@dataclass(frozen=True)
class PzSetting:
    """The sampling scheme p_z is measured under and the chance n_at_p is sized for (the
    ``--pz-*`` and ``--discover-p`` options of docs/method.md §14)."""

    temperature: float = 1.0
    top_k: int = 40
    top_p: float = 1.0
    discover_p: float = 0.5

    @property
    def scheme(self) -> SamplingScheme:
        return SamplingScheme(self.temperature, self.top_k, self.top_p)


def ids_digest(ids: Sequence[int]) -> str:
    """A short hash of a token-id sequence (does a resume cut the same windows?)."""
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:16]


def _encode(victim: Any, text: str) -> list[int]:
    return list(victim.tokenizer.encode(text, add_special_tokens=False))


def token_starts(tokenizer: Any, text: str, ids: Sequence[int]) -> list[int] | None:
    """Where each of the document's tokens starts in ``text`` (the map's text view colours the
    document's characters by them), from a fast tokenizer's offsets; ``None`` when the tokenizer
    gives none (a slow one) or its ids are not ``ids``."""
    try:
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    except (NotImplementedError, ValueError, TypeError):
        return None
    if list(encoded["input_ids"]) != list(ids):
        return None
    return [int(start) for start, _ in encoded["offset_mapping"]]


def _require_weights(victim: Any) -> None:
    if not has_weights(victim):
        raise MissingModelError(
            f"an extraction map needs the victim's weights (teacher-forced passes); "
            f"{victim.model_id!r} (backend {victim.backend!r}) has none. Use the continuation "
            "mode, which only asks the model to generate, or load it with the 'hf' backend."
        )


def start_map(
    store: Store,
    text: str,
    victim: Any,
    *,
    name: str,
    victim_name: str,
    options: MapOptions | None = None,
    pz: PzSetting | None = None,
    title: str = "",
    models: dict[str, Any] | None = None,
    cost: InextractabilityOptions | None = None,
    bound: MapBoundOptions | None = None,
) -> int:
    """Record a new extraction map of ``text`` on ``victim`` and return its run id (nothing is
    scored yet). The run records the victim's endpoint and, given ``models`` (a
    ``ModelNames`` dict), how to load it again; ``cost``: l and m of the document's rank-based
    extraction cost (default: the paper's); ``bound``: which windows get the near-verbatim
    lower bound (default: the one with the highest p_z).

    Raises:
        MissingModelError: the victim has no weights.
        DocumentError: the document is shorter than one window.
    """
    _require_weights(victim)
    options = options or MapOptions()
    pz = pz or PzSetting()
    pz.scheme  # noqa: B018  (checks the three scheme values together)
    ids = _encode(victim, text)
    windows = cut_windows(len(ids), options, name=repr(name))
    tok = victim.tokenizer
    samples = [
        Snippet(
            id=w.id,
            text=tok.decode(ids[w.start : w.end]),
            domain="document",
            source=f"{name} tokens {w.start}-{w.end}",
        )
        for w in windows
    ]
    config = {
        "mode": "map",
        "document": document_record(
            text,
            name,
            tokens=len(ids),
            ids_digest=ids_digest(ids),
            token_starts=token_starts(tok, text, ids),
        ),
        "victim": victim_name,
        "map": asdict(options),
        "pz": asdict(pz),
        "inextractability": asdict(cost or InextractabilityOptions()),
        SETTING_KEY: asdict(bound or MapBoundOptions()),
        **victim_record(victim, models),
    }
    units = (UnitKey(w.id, MAP_METHOD, options.window_tokens) for w in windows)
    return store.create_run(
        KIND,
        config=config,
        manifest={"victim": victim.manifest()},
        title=title or f"map of {name}",
        snippets=samples,
        units=units,
    )


@dataclass(frozen=True)
class WindowText:
    """A scored window's texts: the prompt, the true suffix, and greedy decoding's output up to
    and including its first token that differs from the suffix."""

    prefix: str
    suffix: str
    output: str


@dataclass(frozen=True)
class StoredMap:
    """A map run read back: its options, its document and the windows scored so far."""

    run_id: int
    status: str
    name: str
    victim: str
    text: str
    document_tokens: int
    options: MapOptions
    pz: PzSetting
    scores: list[WindowScore]
    texts: dict[int, WindowText]
    windows_total: int
    errors: int
    # Where each document token starts in ``text`` (None: the tokenizer gave no offsets, or
    # the run was recorded before memprobe kept them).
    token_starts: tuple[int, ...] | None = None
    # Where the victim is served (backend, model, servers; docs/options.md, "Where a run is
    # sent").
    endpoint: dict[str, str] = field(default_factory=dict)
    # The whole document's rank-based extraction cost (docs/method.md §21), made once every
    # window is scored (None before, or for a run recorded before memprobe made it).
    rank_cost: dict[str, Any] | None = None
    # The near-verbatim lower bound's window records (docs/method.md §22), in document order,
    # made after the rank cost (empty before, with --near-verbatim-windows 0, or for a run
    # recorded before memprobe made them).
    near_verbatim: tuple[dict[str, Any], ...] = ()

    @property
    def summary(self) -> MapSummary:
        return summarise(self.scores, self.document_tokens)


def map_config(store: Store, run_id: int) -> dict[str, Any]:
    """The run's config, refusing a run that is not an extraction map."""
    return run_config(store, run_id, "map")


def read_map(store: Store, run_id: int) -> StoredMap:
    """The stored map: every finished window's score, in document order."""
    config = map_config(store, run_id)
    run = store.get_run(run_id)
    units = store.units(run_id)
    finished = sorted(
        (u for u in units if u["status"] == "done"), key=lambda u: window_index(u["snippet_id"])
    )
    scores = [
        WindowScore.from_record(window_index(u["snippet_id"]), u["verbatim"]) for u in finished
    ]
    texts = {
        window_index(u["snippet_id"]): WindowText(
            prefix=u["prompt"] or "",
            suffix=str(u["verbatim"].get("suffix_text") or ""),
            output=u["output"] or "",
        )
        for u in finished
    }
    doc = config["document"]
    return StoredMap(
        run_id=run_id,
        status=run["status"],
        name=doc["name"],
        victim=config["victim"],
        text=doc["text"],
        document_tokens=int(doc["tokens"]),
        options=MapOptions(**config["map"]),
        pz=PzSetting(**config["pz"]),
        scores=scores,
        texts=texts,
        windows_total=len(units),
        errors=sum(1 for u in units if u["status"] == "error"),
        token_starts=tuple(doc["token_starts"]) if doc.get("token_starts") else None,
        endpoint=recorded_endpoint(run),
        rank_cost=config.get("rank_cost"),
        near_verbatim=tuple(stored_bounds(config)),
    )


def same_document_runs(store: Store, run_id: int) -> list[RunRecord]:
    """The store's map runs of run ``run_id``'s document (the same text, by hash) cut into
    windows of the same shape on other victims, newest first: the same windows asked of
    other models (the records only: a reader reads each map, or keeps what it read, by its
    ``updated``). A repeat on the run's own victim is left out: it is no control.

    Why: a map is read against a control. A model that cannot have seen the document (the
    embedded base beside the document canary's copy) shows how much of it is merely
    predictable, and the page puts such runs beside the one opened.
    """
    config = map_config(store, run_id)
    digest, shape = config["document"]["sha256"], config["map"]
    return [
        r
        for r in store.list_runs(kind=KIND)
        if r["config"].get("victim") != config["victim"]  # a repeat on it is no control
        and r["config"].get("mode") == "map"
        and r["config"].get("document", {}).get("sha256") == digest
        and r["config"].get("map") == shape
    ]


# Scores batches of windows: yields each batch with its scores (and the seconds it took per
# window) as they are ready, in any order. The local one scores them here, one batch after the
# other; memprobe_core.executors.ray_map spreads them over Ray workers.
BatchScorer = Callable[
    [list[list[Window]]], Iterator[tuple[list[Window], list[WindowScore], float]]
]


def local_scorer(victim: Any, text: str, pz: PzSetting) -> BatchScorer:
    """Score each batch in this process with ``victim``."""
    ids = _encode(victim, text)
    front = front_ids(victim.tokenizer, text)

    def score(
        batches: list[list[Window]],
    ) -> Iterator[tuple[list[Window], list[WindowScore], float]]:
        for windows in batches:
            began = time.perf_counter()
            scores = score_windows(
                victim.torch_model,
                ids,
                windows,
                front=front,
                scheme=pz.scheme,
                discover_p=pz.discover_p,
            )
            yield windows, scores, (time.perf_counter() - began) / len(windows)

    return score


def run_map(
    store: Store,
    run_id: int,
    victim: Any,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    scorer: BatchScorer | None = None,
) -> StoredMap:
    """Score every pending window of map ``run_id`` (a resume is the same call).

    Args:
        victim: the victim (its tokenizer cuts the windows; it scores them unless ``scorer``).
        scorer: where the batches are scored (default: here, :func:`local_scorer`).

    Raises:
        DocumentRunError: not a map, or the victim's tokenizer cuts the stored text differently.
        DocumentBusyError: another live process is working on the run.
        EndpointMismatch: ``victim`` is another model than the run records (nothing scored).
        KeyboardInterrupt: after marking the run ``interrupted`` (the batches in flight stay
            pending; a resume redoes them).
    """
    config = map_config(store, run_id)
    _require_weights(victim)
    require_endpoint(store, run_id, victim)
    doc = config["document"]
    ids = _encode(victim, doc["text"])
    if ids_digest(ids) != doc["ids_digest"]:
        raise DocumentRunError(
            f"run {run_id} was cut into windows by another tokenizer than {victim.model_id!r}'s "
            f"({doc['tokens']:,} tokens then, {len(ids):,} now); resume it with the victim it "
            f"was started with ({config['victim']!r})"
        )
    claim_or_refuse(store, run_id, DocumentBusyError)
    options = MapOptions(**config["map"])
    pz = PzSetting(**config["pz"])
    for unit in store.units(run_id, status="running"):  # a unit left by an older writer
        store.reset_unit(run_id, unit["key"], if_status="running")
    pending = {u["snippet_id"]: u for u in store.units(run_id, status="pending")}
    windows = [_window(window_id_, options) for window_id_ in pending]
    batches = [
        windows[first : first + options.batch_windows]
        for first in range(0, len(windows), options.batch_windows)
    ]
    total = len(store.units(run_id))
    done = total - len(pending)
    started = time.perf_counter()
    scored_now = 0
    score = scorer or local_scorer(victim, doc["text"], pz)
    try:
        for batch, scores, seconds in score(batches):
            for window, found in zip(batch, scores):
                unit = pending[window.id]
                store.finish_unit(run_id, unit["key"], _result(unit, found, victim, ids, seconds))
            scored_now += len(batch)
            done += len(batch)
            if on_progress is not None:
                rate = scored_now / max(time.perf_counter() - started, 1e-9)
                on_progress(MapProgress(done, total, rate, (total - done) / rate))
            if cancel is not None and cancel.is_set() and done < total:
                store.set_run_status(run_id, "interrupted")
                return read_map(store, run_id)
    except KeyboardInterrupt:
        store.set_run_status(run_id, "interrupted")
        raise
    _record_rank_cost(store, run_id, victim, ids)
    try:
        complete = _record_near_verbatim(store, run_id, victim, ids, pz, cancel)
    except KeyboardInterrupt:  # the bounds made so far are kept; a resume makes the rest
        store.set_run_status(run_id, "interrupted")
        raise
    if not complete:
        store.set_run_status(run_id, "interrupted")
        return read_map(store, run_id)
    store.set_run_status(run_id, "finished")
    return read_map(store, run_id)


def _record_rank_cost(store: Store, run_id: int, victim: Any, ids: list[int]) -> None:
    """The document's rank-based extraction cost, in the paper's setting (one pass over the
    whole text where it fits; docs/method.md §21), kept in the run's config once."""
    config = map_config(store, run_id)
    if "rank_cost" in config:
        return
    front = front_ids(victim.tokenizer, config["document"]["text"])
    # A run recorded before l and m were options: the paper's, as it was measured then.
    options = InextractabilityOptions(**config.get("inextractability", {}))
    config["rank_cost"] = document_rank_cost(victim.torch_model, ids, front, options=options)
    store.update_run(run_id, config=config)


def _record_near_verbatim(
    store: Store,
    run_id: int,
    victim: Any,
    ids: list[int],
    pz: PzSetting,
    cancel: threading.Event | None,
) -> bool:
    """The near-verbatim lower bound of the run's least protected windows (docs/method.md
    §22), each kept in the run's config as it is made; ``False`` when ``cancel`` stopped it
    (a resume makes the rest)."""
    config = map_config(store, run_id)
    return measure_bounds(
        config,
        read_map(store, run_id).scores,
        model=victim.torch_model,
        ids=ids,
        front=front_ids(victim.tokenizer, config["document"]["text"]),
        scheme=pz.scheme,
        save=lambda changed: store.update_run(run_id, config=changed),
        cancel=cancel,
    )


def _window(window_id_: str, options: MapOptions) -> Window:
    index = window_index(window_id_)
    return Window(index, index * options.stride, options.prefix_tokens, options.suffix_tokens)


def _result(
    unit: Any, score: WindowScore, victim: Any, ids: list[int], seconds: float
) -> AttackResult:
    """A window's stored result: the prefix as the prompt, greedy decoding's output up to its
    first wrong token as the output, the scores in ``verbatim``."""
    tok = victim.tokenizer
    end = score.suffix_start + score.suffix_tokens
    return AttackResult(
        method=MAP_METHOD,
        snippet_id=unit["snippet_id"],
        domain="document",
        length=unit["length"],
        prompt=tok.decode(ids[score.start : score.suffix_start]),
        output=tok.decode(list(score.greedy_ids)),
        mem=0.0,
        lcs_p=0.0,
        objective=0.0,
        alpha=0.0,
        costs=Costs(victim_queries=1, victim_seconds=seconds, wall_seconds=seconds),
        manifest={"teacher_forced": True},
        verbatim={**score.to_record(), "suffix_text": tok.decode(ids[score.suffix_start : end])},
    )
