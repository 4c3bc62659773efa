"""Batch audits: a dataset × methods × lengths, one unit at a time, resumable, nothing lost.

An audit is a run of kind ``audit`` in the :class:`~memprobe_core.store.Store`. ``start_audit``
records its snippets, its units (every snippet × length × method, in that order, so a partly run
audit already compares methods on the same snippets) and a config naming the models, so that
``resume_audit`` can reload them in a new process.

``run_audit`` works through the pending units one at a time: each unit is marked ``running``
(attempt counted), every scored candidate is written as it is scored, and the final result is
committed when the unit ends. After a crash or a kill, the unit that was in flight is the only
one still ``running``; resuming redoes it (its partial candidates dropped) and skips every
``done`` unit. A unit that fails (a snippet too short for the length, a model error) is recorded
with its error and the audit goes on. Ctrl-C (``KeyboardInterrupt``) or the ``cancel`` event stops
after putting the unit in flight back to ``pending`` and marking the run ``interrupted``.

Model names, defaults and loading live in :mod:`memprobe_core.runs.roles` (re-exported here).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from memprobe_core import __version__
from memprobe_core.attacks import registry, run_method
from memprobe_core.attacks.context import MethodContext
from memprobe_core.attacks.events import EventCallback
from memprobe_core.attacks.model_set import MissingModelError, ModelSet, has_weights
from memprobe_core.attacks.options import BUILT_IN_SECTIONS, AttackOptions
from memprobe_core.attacks.prepare import prepare_options
from memprobe_core.config import DEFAULT_PREFIX_RATIO
from memprobe_core.errors import MemprobeError
from memprobe_core.executors.base import AuditWork, Executor
from memprobe_core.executors.local import LocalExecutor
from memprobe_core.membership.recall import with_recall_prefixes
from memprobe_core.models import embedded
from memprobe_core.models.endpoints import check_endpoint, endpoint_from_manifest
from memprobe_core.runs.probe import RunConfig
from memprobe_core.runs.roles import (
    ModelNames,
    models_from_config,
)
from memprobe_core.runs.unit import Runner, SplitSpec, UnitOutcome, snippets_by_id
from memprobe_core.snippets.overlap import (
    SHARED_TEXTS,
    labelled_note,
    labelled_overlap,
    overlap_record,
)
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import RunRecord, Store, UnitKey
from memprobe_core.store.owner import claim_or_refuse

log = logging.getLogger(__name__)


class AuditBusyError(MemprobeError, RuntimeError):
    """The audit is being run by another live process."""


@dataclass(frozen=True)
class AuditProgress:
    """Where an audit stands (passed to ``on_progress`` before and after every unit).

    Attributes:
        done: units finished (with a result or an error) out of ``total``.
        errors: units that ended with an error.
        rate: units per second in this session (0 before the first unit ends).
        eta_s: seconds left at that rate (``None`` until the rate is known).
        current: the unit now running (``None`` between units and at the end).
        elapsed_s: seconds since this session of the audit started.
    """

    done: int
    total: int
    errors: int
    rate: float
    eta_s: float | None
    current: UnitKey | None
    elapsed_s: float


ProgressCallback = Callable[[AuditProgress], None]


@dataclass(frozen=True)
class AuditSummary:
    """How a call to ``run_audit`` ended.

    Attributes:
        status: the run's status now: ``finished`` (no unit pending; some may have failed),
            ``interrupted`` (stopped by Ctrl-C or cancel) or ``failed`` (models not loadable).
        done / errors / pending / total: unit counts at the end.
        ran: units this call worked on (finished or failed).
        seconds: wall time of this call.
    """

    run_id: int
    status: str
    done: int
    errors: int
    pending: int
    total: int
    ran: int
    seconds: float


def start_audit(
    store: Store,
    snippets: Sequence[Snippet],
    methods: Sequence[str],
    lengths: Sequence[int],
    options: AttackOptions | None = None,
    models: ModelNames | None = None,
    *,
    title: str = "",
    split_tokenizer: str = "model",
    prefix_ratio: float = DEFAULT_PREFIX_RATIO,
    dataset: dict[str, Any] | None = None,
    loaded: ModelSet | None = None,
) -> int:
    """Record a new audit (snippets, units, config) and return its run id; nothing runs yet.

    Args:
        store: where the run goes.
        snippets: the dataset (ids must be unique).
        methods: any of ``ps_base``, ``ps_inst``, ``reverse_lm``, ``gcg``, ``interactive``.
        lengths: total tokens per split (e.g. 200, 300, 500).
        options: method options (defaults: ``AttackOptions()``).
        models: model names (defaults: the embedded models).
        title: label shown in run lists.
        split_tokenizer: ``model`` (the victim's tokenizer, as the paper) or ``whitespace``.
        prefix_ratio: prefix share of each split.
        dataset: where the snippets came from (source, rejected rows) for the record.
        loaded: the models already loaded for the run, if any: checked
            (:func:`refuse_unfit_models`) after the options and before the run is stored.

    Raises:
        ValueError: no snippets, an unknown method, a length below 2 or a bad tokenizer choice.
        UsageError: ``options.measure.recall_shots`` on a dataset with too few labelled texts;
            a method's ``prepare`` hook refusing its options for this dataset (a reference
            corpus missing or empty).
        MissingModelError: a method that needs a chat model (``MethodSpec.chat_roles``) named
            with a model known to have no chat template (an embedded base model), or that
            ``loaded`` cannot serve (no chat template, no weights for a white-box role).
    """
    methods = registry.check_methods(methods)
    if not snippets:
        raise ValueError(
            "the dataset has no usable snippet; check the file, or the corpus domains and limit"
        )
    overlap = labelled_overlap(snippets)  # warned and recorded: the report names it
    if overlap is not None:
        log.warning("%s", labelled_note(overlap))
        dataset = {**(dataset or {}), SHARED_TEXTS: overlap_record(overlap)}
    lengths = list(dict.fromkeys(int(n) for n in lengths))
    if not lengths or min(lengths) < 2:
        raise ValueError(f"lengths {lengths}: give one or more lengths of at least 2 tokens")
    if split_tokenizer not in ("model", "whitespace"):
        raise ValueError(f"split tokenizer {split_tokenizer!r} is unknown; use model or whitespace")
    options = options or AttackOptions()
    measures_something = any(registry.extracts(m) or registry.measures_verbatim(m) for m in methods)
    if not measures_something and not options.measure.signals:
        raise ValueError(
            "the signals-only method measures membership signals, and they are turned off "
            "(--no-signals): turn them on, or add an extraction method"
        )
    # ReCaLL's prefixes are picked once, from the dataset, and stored with the run: a resume
    # or a Ray worker measures with the same texts.
    options = replace(options, measure=with_recall_prefixes(options.measure, snippets))
    names = (models or ModelNames()).resolved()
    refuse_known_without_chat(methods, names)
    options = prepare_options(options, methods, MethodContext(snippets=tuple(snippets)))
    if loaded is not None:  # a method its models cannot serve: refused, no run left "failed"
        refuse_unfit_models(methods, loaded)
    config = RunConfig(
        methods=tuple(methods),
        lengths=tuple(lengths),
        options=options,
        models=names.to_dict(),
        split=SplitSpec(tokenizer=split_tokenizer, prefix_ratio=prefix_ratio),  # type: ignore[arg-type]
        dataset=dataset or {},
    )
    units = (UnitKey(s.id, m, n) for s in snippets for n in lengths for m in methods)
    run_id = store.create_run(
        "audit", config=config.to_dict(), title=title, snippets=snippets, units=units
    )
    log.info(
        "audit %d: %d snippets × %d methods × %d lengths",
        run_id,
        len(snippets),
        len(methods),
        len(lengths),
    )
    return run_id


def resume_audit(
    store: Store,
    run_id: int,
    *,
    models: ModelSet | None = None,
    models_factory: Callable[[dict[str, Any]], ModelSet] | None = None,
    on_progress: ProgressCallback | None = None,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
    retry_errors: bool = False,
    runner: Runner = run_method,
    executor: Executor | None = None,
) -> AuditSummary:
    """Continue an audit: finished units are skipped, the unit in flight is redone.

    Args:
        retry_errors: also redo units that ended with an error.
        Others: as ``run_audit``.

    Raises:
        KeyError: no such run. ValueError: the run is not an audit. AuditBusyError: another
            process holds the run (checked before ``retry_errors`` changes anything).
    """
    run = store.get_run(run_id)
    if run["kind"] != "audit":
        raise ValueError(f"run {run_id} is a {run['kind']}, not an audit; only audits resume")
    RunConfig.from_dict(run["config"])  # a config this version cannot read fails before any change
    if models is not None:  # loaded by the caller (a page): sent where the run was, or refused
        refuse_other_endpoints(run_id, run, models)
    _claim(store, run_id)  # before any change: a run another process holds is left alone
    if retry_errors:
        for unit in store.units(run_id, status="error"):
            store.reset_unit(run_id, unit["key"])
    return run_audit(
        store,
        run_id,
        models=models,
        models_factory=models_factory,
        on_progress=on_progress,
        on_event=on_event,
        cancel=cancel,
        runner=runner,
        executor=executor,
    )


def run_audit(
    store: Store,
    run_id: int,
    *,
    models: ModelSet | None = None,
    models_factory: Callable[[dict[str, Any]], ModelSet] | None = None,
    on_progress: ProgressCallback | None = None,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
    runner: Runner = run_method,
    executor: Executor | None = None,
) -> AuditSummary:
    """Run every pending unit of an audit, committing each as it ends.

    Args:
        store: the store holding the run.
        run_id: an audit made by ``start_audit``.
        models: the loaded models; when ``None``, ``models_factory(run config)`` loads them
            (default: by the names in the config, only the roles the methods need).
        on_progress: called with an ``AuditProgress`` before and after each unit.
        on_event: also receives every method event (after the store has recorded it).
        cancel: set it to stop after the current candidate; the run is marked interrupted.
        runner: the method entry point (default ``memprobe_core.attacks.run_method``).
        executor: where the units run (default: one at a time in this process; see
            :mod:`memprobe_core.executors.base`). A Ray executor loads the models on its
            workers with ``models_factory``; ``models`` is then ignored.

    Returns:
        An ``AuditSummary``. Ctrl-C does not propagate: it ends the call with status
        ``interrupted`` (the unit in flight goes back to pending).

    Raises:
        ModelError: the models cannot be loaded (the run can be resumed once they can; with
            Ray: on no worker).
        AuditBusyError: another process holds this audit (a live process of this machine, or
            one of another host that wrote to it recently); nothing was changed.
        EndpointMismatch: ``models`` are served from another endpoint than the run's first
            session's (checked before the run is claimed; nothing was sent).
    """
    started = time.perf_counter()
    run = store.get_run(run_id)
    RunConfig.from_dict(run["config"])  # a config this version cannot read fails before any change
    if models is not None:  # loaded by the caller (a page): sent where the run was, or refused
        refuse_other_endpoints(run_id, run, models)
    # Claimed (owner written, status running) in one write transaction before any other change:
    # of two processes starting this run at once, one gets it and the other is refused here.
    _claim(store, run_id)
    _prepare_methods(store, run_id)
    run = store.get_run(run_id)  # with the owner just written, for the manifest below
    _redo_units_left_running(store, run_id)
    pending = [u["key"] for u in store.units(run_id, status="pending")]
    tally = _Tally(store.unit_counts(run_id), started, on_progress)
    if not pending:
        store.set_run_status(run_id, "finished")
        tally.progress(None)
        return _summary(store, run_id, "finished", tally.ran, started)

    executor = executor or LocalExecutor()
    work = AuditWork(
        store=store,
        run_id=run_id,
        config=run["config"],
        units=pending,
        snippets=snippets_by_id(store, run_id),
        models_factory=CheckedModelsFactory(models_factory or models_from_config),
        on_start=tally.progress,
        on_end=tally.unit_ended,
        on_models=lambda loaded: _record_manifest(store, run_id, run, loaded, executor.name),
        on_event=on_event,
        cancel=cancel,
        runner=runner,
    )
    try:
        if models is not None:  # loaded by the caller: checked here, before any unit runs
            refuse_unfit_models(run["config"]["methods"], models)
        executor.run(work, models)
    except KeyboardInterrupt:  # the executor already put the units in flight back to pending
        log.info("audit %d interrupted", run_id)
        store.set_run_status(run_id, "interrupted")
        return _summary(store, run_id, "interrupted", tally.ran, started)
    except MemprobeError:  # e.g. no worker could load the models: resumable once they can
        store.set_run_status(run_id, "failed")
        raise
    status = "interrupted" if cancel is not None and cancel.is_set() else "finished"
    store.set_run_status(run_id, status)
    tally.progress(None)
    return _summary(store, run_id, status, tally.ran, started)


def _prepare_methods(store: Store, run_id: int) -> None:
    """Let each method's ``prepare`` hook record this store file and run in its options section
    of the config (e.g. where its units read the audited snippets from, here or in a Ray worker
    that reads the same file).

    Done as the audit runs, not when it is created: the run id is known then, and a store
    file moved since is named where it is now. Only the fields a hook changed are written,
    and nothing when none changed.
    """
    raw = store.get_run(run_id)["config"]
    config = RunConfig.from_dict(raw)
    context = MethodContext(store_path=store.path.resolve(), run_id=run_id)
    prepared = prepare_options(config.options, config.methods, context)
    changed = False
    for method in config.methods:
        before, after = config.options.for_method(method), prepared.for_method(method)
        if before == after:
            continue
        key = registry.get_method(method).options_key
        assert key is not None  # only a method with an options section is prepared
        _stored_section(raw, key).update(_changed_fields(before, after))
        changed = True
    if changed:
        store.update_run(run_id, config=raw)


def _stored_section(config: dict[str, Any], key: str) -> dict[str, Any]:
    """The options section ``key`` of a stored config (made when it has none)."""
    options = config.setdefault("options", {})
    holder = options if key in BUILT_IN_SECTIONS else options.setdefault("method_options", {})
    section: dict[str, Any] = holder.setdefault(key, {})
    return section


def _changed_fields(before: Any, after: Any) -> dict[str, Any]:
    """The fields of the options dataclass ``after`` that differ from ``before``, as stored."""
    new = asdict(after)
    return {name: value for name, value in new.items() if getattr(before, name) != value}


def refuse_known_without_chat(methods: Sequence[str], names: ModelNames) -> None:
    """Refuse a method that needs a chat model (``MethodSpec.chat_roles``) named with a model
    known by its name to have no chat template: an embedded base model. Any other model is
    checked once loaded (:class:`CheckedModelsFactory`).

    Raises:
        MissingModelError: naming the method, the role and the model.
    """
    if names.backend not in (None, "hf"):
        return  # another backend serves the name: only the loaded model can tell
    for method in methods:
        for role in registry.get_method(method).chat_roles:
            name = getattr(names, role)
            known = embedded.EMBEDDED.get(name or "")
            if known is not None and known.kind == "base":
                raise _no_chat_template(method, role, name)


def refuse_unfit_models(methods: Sequence[str], models: ModelSet) -> None:
    """Refuse loaded models a method cannot use: one without a chat template for a chat method
    (``MethodSpec.chat_roles``), one without weights for a white-box role
    (``MethodSpec.white_box_roles``: GCG's base, ACR's and verbatim-only's victim). Checked
    once the models are loaded and before any unit runs, so an audit never fails unit by unit
    for a model it could not have used.

    Raises:
        MissingModelError: naming the method, the role and the model.
    """
    for method in methods:
        spec = registry.get_method(method) if method in registry.method_names() else None
        if spec is None:
            continue
        for role in spec.chat_roles:
            model = getattr(models, role, None)
            if model is not None and not model.has_chat_template:
                raise _no_chat_template(method, role, getattr(model, "model_id", str(model)))
        for role in spec.white_box_roles:
            model = getattr(models, role, None)
            if model is not None and not has_weights(model):
                raise MissingModelError(
                    f"{spec.label} needs the weights of its {role} model (a white box): "
                    f"{role} {getattr(model, 'model_id', model)!r} (backend "
                    f"{getattr(model, 'backend', '?')!r}) has none; load it with the 'hf' "
                    "backend, or leave the method out"
                )


def _no_chat_template(method: str, role: str, name: object) -> MissingModelError:
    return MissingModelError(
        f"{method} needs a chat model as its {role}: {role} {name!r} has no chat template; "
        f"name an instruction-tuned {role} (e.g. {embedded.DEFAULT_INSTRUCT})"
    )


@dataclass(frozen=True)
class CheckedModelsFactory:
    """A models factory whose model set is refused, once loaded and before any unit runs, when a
    method cannot use one of its models (:func:`refuse_unfit_models`). Plain and picklable: a
    Ray worker calls it."""

    factory: Callable[[dict[str, Any]], ModelSet]

    def __call__(self, config: dict[str, Any]) -> ModelSet:
        models = self.factory(config)
        refuse_unfit_models(config.get("methods", ()), models)
        return models


def _redo_units_left_running(store: Store, run_id: int) -> None:
    """A unit still marked running was in flight when its process died: it is redone."""
    for stale in store.units(run_id, status="running"):
        log.info("audit %d: redoing unit %s (was in flight)", run_id, stale["key"])
        store.reset_unit(run_id, stale["key"])


class _Tally:
    """Counts the units of one ``run_audit`` call and reports progress (rate, ETA)."""

    def __init__(
        self, counts: dict[str, int], started: float, on_progress: ProgressCallback | None
    ) -> None:
        self.total = sum(counts.values())
        self.finished_before = counts["done"] + counts["error"]
        self.errors = counts["error"]
        self.ran = 0
        self.started = started
        self.on_progress = on_progress

    def unit_ended(self, outcome: UnitOutcome) -> None:
        self.ran += 1
        self.errors += outcome.status == "error"
        self.progress(None)

    def progress(self, current: UnitKey | None) -> None:
        if self.on_progress is None:
            return
        elapsed = time.perf_counter() - self.started
        rate = self.ran / elapsed if self.ran and elapsed > 0 else 0.0
        left = self.total - self.finished_before - self.ran
        eta = left / rate if rate > 0 else None
        done = self.finished_before + self.ran
        self.on_progress(AuditProgress(done, self.total, self.errors, rate, eta, current, elapsed))


def refuse_other_endpoints(run_id: int, run: RunRecord, models: ModelSet) -> None:
    """Refuse to go on with an audit on models served from another endpoint than those of its
    first session (backend, model, servers; docs/options.md, "memprobe resume RUN"): its
    snippets would go where they were never sent. A run no session has loaded models for yet
    is not checked.

    Raises:
        EndpointMismatch: naming the role and both endpoints; nothing was sent.
    """
    recorded = (run.get("manifest") or {}).get("models") or {}
    for role, manifest in models.manifest().items():
        if manifest is None or not isinstance(recorded.get(role), dict):
            continue
        check_endpoint(
            f"run {run_id}'s {role}",
            endpoint_from_manifest(recorded[role]),
            endpoint_from_manifest(manifest),
            "Resume it with the models it records (`memprobe resume RUN` loads them), or start "
            "a new audit there",
        )


def _record_manifest(
    store: Store, run_id: int, run: RunRecord, loaded: dict[str, Any], executor: str
) -> None:
    """Keep the loaded models' manifest; note each session (a resumed run lists several)."""
    manifest = dict(run.get("manifest") or {})
    manifest.setdefault("models", loaded)
    if manifest["models"] != loaded:
        log.warning("audit %d resumed with different models than it started with", run_id)
    manifest.setdefault("sessions", []).append(
        {"started": time.time(), "models": loaded, "executor": executor}
    )
    manifest["memprobe"] = __version__
    store.update_run(run_id, manifest=manifest)


def _claim(store: Store, run_id: int) -> None:
    """Claim the run for this process, or raise :class:`AuditBusyError` naming its holder."""
    claim_or_refuse(store, run_id, AuditBusyError)


def _summary(store: Store, run_id: int, status: str, ran: int, started: float) -> AuditSummary:
    counts = store.unit_counts(run_id)
    return AuditSummary(
        run_id=run_id,
        status=status,
        done=counts["done"],
        errors=counts["error"],
        pending=counts["pending"] + counts["running"],
        total=sum(counts.values()),
        ran=ran,
        seconds=time.perf_counter() - started,
    )
