"""The method registry: each extraction method declares itself beside its code.

A method module ends with one :func:`register` call giving its :class:`MethodSpec`: its name,
display label, the model roles it needs, the section of :class:`~memprobe_core.attacks.options.AttackOptions` that holds its
options and the class of those options, which roles must be white-box, and its entry function.
Every list of methods in memprobe — the CLI's choices, the methods a page offers for the models
it has, the report's order and labels, the roles an audit loads — is derived from here, and so
are the columns of a method's own figures (``MethodSpec.figures``: the results frame, Table 1,
the pages' labels), its report table and its result line, so a new method is one module (plus
its tests) and nothing else (docs/adding-a-method.md)::

    register(MethodSpec(name="mine", label="Mine", run=run_mine, roles=("victim",), rank=60))

Importing any part of :mod:`memprobe_core.attacks` imports every module of that package
(:func:`import_modules`), so a method module dropped into it registers itself without being listed
anywhere, and the registry is complete whenever it is read.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, is_dataclass
from types import ModuleType
from typing import Any

from memprobe_core import plugins
from memprobe_core.attacks.context import MethodContext
from memprobe_core.attacks.figures import Figure, MethodTable, fixed_columns
from memprobe_core.errors import UsageError
from memprobe_core.option_fields import options_of
from memprobe_core.records import JsonValue

# (split, models, options, *, on_event=None, cancel=None) -> AttackResult
MethodFn = Callable[..., Any]

# Every model role a method can ask for, in the order they are loaded and listed. The victim is
# always loaded (its tokenizer cuts the snippets); "init" falls back to the attacker and
# "reference" is the optional second model of the reference-ratio membership signal.
ROLES: tuple[str, ...] = ("victim", "base", "attacker", "init", "reverse", "reference")


@dataclass(frozen=True)
class MethodSpec:
    """What memprobe needs to know about one extraction method.

    Attributes:
        name: the id stored with results and typed on the command line (``ps_base``).
        label: the display name in tables, charts and pages (``P-S-Base``).
        run: the entry function ``(split, models, options, *, on_event, cancel) -> AttackResult``.
        roles: the model roles it uses (from ``ROLES``; the victim is always loaded).
        rank: its position in reports and lists (the paper's Table 1 order: lower first).
        options_key: the :class:`~memprobe_core.attacks.options.AttackOptions` section holding its options (``None``: it has
            none of its own); two methods may share one (P-S-Base and P-S-Inst share ``ps``).
        options_class: the frozen dataclass of those options (defaults: its field defaults).
        white_box_roles: roles whose model must expose weights and gradients (GCG: ``base``).
        chat_roles: roles whose model must have a chat template (``divergence``: ``victim``, whose
            prompt is a chat message); an audit refuses a model known to have none before any
            unit runs.
        samples: the method samples the model that answers (``divergence``'s repeat-a-word
            answers); ``False``: every answer is greedy, as docs/method.md §2 asks of the paper's
            methods (the contract test holds each method to what it declares here).
        default_in_audit: run by an audit when no method is named.
        default_in_compare: ticked on the Compare page when offered (GCG is not: each step is a
            forward and backward pass of the base model, slow on a CPU).
        baseline_rank: a report measures paired gains over it, baselines in this order
            (``None``: not a baseline).
        summary: one line for help texts.
        candidates: how many candidates a run scores under given options (progress bars;
            ``None``: not known ahead, counted as one).
        batches: the sizes of the generation calls a run makes under given options, in order
            (the pre-run estimate costs batches, not candidates: ``divergence`` asks its
            ``samples`` in one call); ``None``: each candidate a batch of its own.
        short_label: the label's short form where a page names whose option it is ("Ours: rounds
            T"); empty: the label.
        rough_rate: seconds per batch of one per token of length before this machine has
            measured the method (the pre-run estimate's first guess on a 2-core CPU; ``None``:
            :data:`memprobe_core.runs.eta.ROUGH_SECONDS_PER_BATCH_TOKEN`).
        extracts: the method asks a model for the suffix (every paper method). ``False`` for a
            method that only measures (``signals``): it has no Mem, so Table 1, the paired
            gains, PII counts and the membership table's method rows leave it out, and the
            Compare page does not offer it.
        verbatim: the method measures the verbatim metrics itself without an output to score
            (``verbatim``: teacher-forced greedy match); Table 1 shows its extraction rate.
        prepare: ``(options, context) -> options``: its options section completed from the run
            it belongs to (a :class:`~memprobe_core.attacks.context.MethodContext`), called when
            an audit is created and each time it runs (what it returns is stored in the run's
            config) and by the unit runner before each unit (``divergence``: the audited
            dataset's fingerprint, then its store file and run, then its snippets, read through
            the context). A method never opens the store itself.
        prefetch: ``(pieces, models, options) -> None``, called by an executor with the pieces of
            this method's next units before it runs them: it may compute, in batches, what those
            units will ask for and keep it where their ``run`` looks first (``verbatim``: many
            snippets in one forward pass). It must change only what the units cost, never what
            they record; a failure is logged and the units compute for themselves.
        figures: the per-unit figures it records in ``AttackResult.verbatim`` beside the
            common ones (:class:`~memprobe_core.attacks.figures.Figure`): the results frame's
            columns, Table 1's columns and the pages' labels are read from here.
        describe: ``verbatim -> line | None``: one plain-text line on what a result of this
            method measured (the CLI's result and the pages' result view); ``None`` for a
            result it did not write.
        report_table: a per-run table of its own in the report
            (:class:`~memprobe_core.attacks.figures.MethodTable`; divergence's totals), in
            the JSON report under the method's name.
    """

    name: str
    label: str
    run: MethodFn
    roles: tuple[str, ...]
    rank: int
    options_key: str | None = None
    options_class: type | None = None
    white_box_roles: tuple[str, ...] = ()
    chat_roles: tuple[str, ...] = ()
    samples: bool = False
    default_in_audit: bool = False
    default_in_compare: bool = True
    baseline_rank: int | None = None
    summary: str = ""
    candidates: Callable[[Any], int] | None = None
    batches: Callable[[Any], Sequence[int]] | None = None
    short_label: str = ""
    rough_rate: float | None = None
    extracts: bool = True
    verbatim: bool = False
    prepare: Callable[[Any, MethodContext], Any] | None = None
    prefetch: Callable[..., None] | None = None
    figures: tuple[Figure, ...] = ()
    describe: Callable[[Mapping[str, Any]], str | None] | None = None
    report_table: MethodTable | None = None

    def __post_init__(self) -> None:
        needs = (*self.roles, *self.white_box_roles, *self.chat_roles)
        unknown = [r for r in needs if r not in ROLES]
        if unknown:
            raise ValueError(f"method {self.name!r}: unknown role(s) {unknown}; use {ROLES}")
        if (self.options_key is None) != (self.options_class is None):
            raise ValueError(f"method {self.name!r}: give options_key and options_class together")
        declared = is_dataclass(self.options_class) and options_of(self.options_class)
        if self.options_class is not None and not declared:
            # One tier: the CLI, the pages and docs/options.md know an option by its declaration.
            raise ValueError(
                f"method {self.name!r}: make {self.options_class.__name__} a dataclass whose "
                "options are declared with "
                "memprobe_core.option_fields.option(default, help=...) (docs/adding-a-method.md)"
            )


class UnknownMethodError(UsageError, ValueError):
    """A method name that no module registered (the message lists the known ones)."""


_REGISTRY: dict[str, MethodSpec] = {}


def register(spec: MethodSpec) -> MethodSpec:
    """Add a method (the same spec again is fine: a module imported twice).

    Raises:
        ValueError: a name that is not a lowercase identifier or is taken, a label another
            method has, an options section another class holds, or a figure name that is not a
            lowercase identifier, is a fixed column of the results frame (``mem``, ``lcs_p``,
            …, ``signal_*``) or another method's figure; the message names the plugin
            (distribution and version) the spec came from.
    """
    source = plugins.registering_source(getattr(spec.run, "__module__", None) or "")
    _check_spec(spec, source)
    _REGISTRY[spec.name] = spec
    plugins.record_source("method", spec.name, source)
    return spec


def _check_spec(spec: MethodSpec, source: str) -> None:
    """Refuse what would break a list, a frame or a report later (a figure named ``mem`` made
    the results frame's columns ambiguous and pandas fail in unrelated reports)."""

    def refuse(why: str) -> ValueError:
        return ValueError(f"method {spec.name!r} from {source}: {why}")

    if not _IDENTIFIER.fullmatch(spec.name):
        raise refuse("name it with a lowercase identifier (a-z, 0-9, _), e.g. 'my_method'")
    taken = _REGISTRY.get(spec.name)
    if taken is not None and taken != spec:
        raise refuse(
            f"registered already (label {taken.label!r}, from "
            f"{plugins.source_of('method', spec.name)}); rename it"
        )
    others = [s for s in _REGISTRY.values() if s.name != spec.name]
    clash = next((o for o in others if o.label == spec.label), None)
    if clash is not None:
        raise refuse(f"label {spec.label!r} is method {clash.name!r}'s; give it another label")
    for other in others:
        shares_section = spec.options_key is not None and other.options_key == spec.options_key
        if shares_section and other.options_class != spec.options_class:
            raise refuse(
                f"options section {spec.options_key!r} already holds "
                f"{other.name!r}'s {other.options_class}"
            )
    _check_figures(spec, others, refuse)


def _check_figures(
    spec: MethodSpec, others: list[MethodSpec], refuse: Callable[[str], ValueError]
) -> None:
    """Each figure a lowercase identifier, named once, taking no fixed column of the results
    frame, no signal's column and no other method's figure (they all share one frame)."""
    fixed = fixed_columns()
    owner = {f.name: o.name for o in others for f in o.figures}
    seen: set[str] = set()
    for figure in spec.figures:
        name = figure.name
        if not _IDENTIFIER.fullmatch(name):
            raise refuse(f"figure {name!r}: name it with a lowercase identifier (a-z, 0-9, _)")
        if name in fixed or name.startswith("signal_"):
            raise refuse(
                f"figure {name!r} is a column the results frame already has; prefix it with "
                f"the method's name, e.g. {spec.name + '_' + name!r}"
            )
        if name in owner:
            raise refuse(f"figure {name!r} is method {owner[name]!r}'s figure; rename it")
        if name in seen:
            raise refuse(f"figure {name!r} is declared twice")
        seen.add(name)


# Method and figure names: the store's keys, CLI choices and frame columns.
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")


def unregister(name: str) -> None:
    """Remove a method (tests that register a toy method clean up with this)."""
    _REGISTRY.pop(name, None)


def method_source(name: str) -> str:
    """Where method ``name`` came from: ``"memprobe (built-in)"`` or a plugin's
    ``"distribution version"`` (``memprobe plugins``)."""
    return plugins.source_of("method", name)


def specs() -> list[MethodSpec]:
    """Every registered method, in report order (rank, then name)."""
    return sorted(_REGISTRY.values(), key=lambda s: (s.rank, s.name))


def method_names() -> list[str]:
    """Every registered method name, in report order."""
    return [s.name for s in specs()]


def get_method(name: str) -> MethodSpec:
    """The spec of ``name``.

    Raises:
        UnknownMethodError: no method of that name (the message lists the known ones).
    """
    spec = _REGISTRY.get(name)
    if spec is None:
        raise UnknownMethodError(
            f"method {name!r} is unknown; use one of {', '.join(method_names())}"
        )
    return spec


def check_methods(methods: Iterable[str]) -> list[str]:
    """``methods`` without repeats, in the given order, each checked to be registered.

    Raises:
        UnknownMethodError: none given, or one that is not registered.
    """
    methods = list(methods)
    if not methods:
        raise UnknownMethodError(f"no method given; choose from {', '.join(method_names())}")
    unknown = [m for m in methods if m not in _REGISTRY]
    if unknown:
        raise UnknownMethodError(
            f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(method_names())}"
        )
    return list(dict.fromkeys(methods))


def method_label(name: str) -> str:
    """The display label (a method stored by another version keeps its bare name)."""
    spec = _REGISTRY.get(name)
    return spec.label if spec is not None else name


def method_rank(name: str) -> int:
    """Sort key of a method name in report order (an unregistered name sorts last)."""
    spec = _REGISTRY.get(name)
    return spec.rank if spec is not None else UNREGISTERED_RANK


# Past every registered rank: a method stored by another version sorts after the known ones.
UNREGISTERED_RANK = 10**9


def method_order(methods: Iterable[str]) -> list[str]:
    """The distinct ``methods`` in report order (unregistered ones last, as given)."""
    return sorted(dict.fromkeys(methods), key=method_rank)


def expected_candidates(name: str, options: Any) -> int:
    """How many candidates a run of method ``name`` will score under ``options`` (for progress)."""
    spec = get_method(name)
    return spec.candidates(options) if spec.candidates is not None else 1


def expected_batches(name: str, options: Any) -> list[int]:
    """The sizes of the generation calls a run of ``name`` makes under ``options``
    (``MethodSpec.batches``; without it, each expected candidate a batch of one)."""
    spec = get_method(name)
    if spec.batches is not None:
        return [int(n) for n in spec.batches(options)]
    return [1] * max(1, expected_candidates(name, options))


def default_compare_methods() -> list[str]:
    """What the Compare page ticks when it opens (of the methods it can offer)."""
    return [s.name for s in specs() if s.default_in_compare]


def default_audit_methods() -> list[str]:
    """What an audit runs when no method is named."""
    return [s.name for s in specs() if s.default_in_audit]


def baseline_methods() -> tuple[str, ...]:
    """The methods a report measures paired gains over (the prefix-suffix baselines), in order."""
    ranked = [s for s in specs() if s.baseline_rank is not None]
    return tuple(s.name for s in sorted(ranked, key=lambda s: (s.baseline_rank, s.name)))


def roles_needed(methods: Iterable[str], *, reference: bool = False) -> list[str]:
    """Model roles the given methods need, in ``ROLES`` order (always the victim; ``reference``:
    a reference model is named, for the membership signals). Unregistered names add nothing."""
    needed = {"victim", "reference"} if reference else {"victim"}
    for name in methods:
        spec = _REGISTRY.get(name)
        if spec is not None:
            needed.update(spec.roles)
    return [role for role in ROLES if role in needed]


def offered_methods(
    available: Iterable[str],
    white_box: Iterable[str],
    *,
    extracting_only: bool = False,
    chat: Iterable[str] | None = None,
) -> list[str]:
    """The methods that can run with the models at hand, in report order.

    Args:
        available: roles that have a model (``init`` counts as present when the attacker is).
        white_box: roles whose model exposes weights and gradients.
        extracting_only: leave out the methods that only measure (``MethodSpec.extracts``).
        chat: roles whose model has a chat template (``MethodSpec.chat_roles``); ``None``: not
            known (models named but not loaded), so no method is left out for it: one whose
            model turns out to have none refuses to run, naming it.
    """
    have = set(available)
    if "attacker" in have:
        have.add("init")
    open_box = set(white_box)
    chatting = have if chat is None else set(chat)
    if chat is not None and "attacker" in chatting:
        chatting.add("init")
    return [
        s.name
        for s in specs()
        if set(s.roles) <= have
        and set(s.white_box_roles) <= open_box
        and set(s.chat_roles) <= chatting
        and (s.extracts or not extracting_only)
    ]


def extracts(name: str) -> bool:
    """Whether method ``name`` asks a model for the suffix (an unregistered name, stored by
    another version, is taken to: every method before ``signals`` did)."""
    spec = _REGISTRY.get(name)
    return spec.extracts if spec is not None else True


def in_table1(name: str) -> bool:
    """Whether method ``name`` has a Table 1 row: it extracts, or it measures verbatim metrics."""
    spec = _REGISTRY.get(name)
    return spec is None or spec.extracts or spec.verbatim


def measures_verbatim(name: str) -> bool:
    """Whether method ``name`` fills its verbatim metrics itself (``MethodSpec.verbatim``)."""
    spec = _REGISTRY.get(name)
    return spec is not None and spec.verbatim


def import_modules(package: ModuleType) -> list[str]:
    """Import every module of ``package`` (each method module registers itself on import).

    Returns the modules' names, in file-name order.
    """
    names = sorted(info.name for info in pkgutil.iter_modules(package.__path__))
    for name in names:
        importlib.import_module(f"{package.__name__}.{name}")
    return names


def section_label(section: str) -> str:
    """The label of the (first registered) method whose options live in ``section``; ``""`` for
    a section no method owns."""
    return next((s.label for s in specs() if s.options_key == section), "")


def option_sections() -> dict[str, type]:
    """Each options section of :class:`~memprobe_core.attacks.options.AttackOptions` and the class it holds."""
    return {s.options_key: s.options_class for s in specs() if s.options_key and s.options_class}


def figures() -> list[Figure]:
    """Every registered method's own figures, in report order (each method's in its order)."""
    return [figure for spec in specs() for figure in spec.figures]


def figure_columns() -> list[str]:
    """The results-frame columns of the methods' own figures, in report order."""
    return [figure.name for figure in figures() if figure.column]


def table1_figures() -> list[Figure]:
    """The figures Table 1 aggregates (``Figure.table1``), in report order."""
    return [figure for figure in figures() if figure.table1 is not None]


def table1_groups() -> list[list[Figure]]:
    """Table 1's figures grouped by method: a report shows a method's columns only when one of
    them was measured in some cell (a run without that method has none)."""
    groups = [[f for f in spec.figures if f.table1 is not None] for spec in specs()]
    return [group for group in groups if group]


def method_tables() -> list[tuple[str, MethodTable]]:
    """``(method, table)`` of every method with a report table of its own, in report order."""
    return [(s.name, s.report_table) for s in specs() if s.report_table is not None]


def describe_result(verbatim: Mapping[str, JsonValue] | None) -> list[str]:
    """The plain-text lines the methods write on a result (``MethodSpec.describe``): each
    method's describer answers only for a result it wrote."""
    lines = [spec.describe(verbatim or {}) for spec in specs() if spec.describe is not None]
    return [line for line in lines if line]
