"""The membership-signal registry: each signal declares itself, memprobe's own and plugins' alike.

A signal module calls :func:`register_signal` at its top level with a :class:`SignalSpec`: its
name (the key in ``AttackResult.membership``, the column ``signal_<name>``), its label, which way
points to "member", and — for a signal a plugin adds — ``compute``, a function of the token
statistics memprobe's scoring pass already has (:class:`SignalInput`), so a new signal costs no
model pass (docs/adding-a-signal.md)::

    register_signal(SignalSpec(name="gap", label="Gap", higher_is_member=True,
                               description="max − min token log-prob", compute=gap))

memprobe's built-in signals are declared in :mod:`memprobe_core.membership.builtin_signals`
(computed by the scoring pass itself, docs/method.md §8), found like a plugin's through the
``memprobe.signals`` entry-point group (:mod:`memprobe_core.plugins`). Every list of signals —
the reports' columns, evaluation, the CLI's ``--signals`` choices, the pages — is read from
here; the first read loads the group, so plugins are always included.
"""

from __future__ import annotations

import keyword
import logging
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from memprobe_core import plugins

log = logging.getLogger(__name__)

SIGNALS_GROUP = plugins.SIGNALS_GROUP

# The keys beside the signals in ``AttackResult.membership`` (records.MembershipRecord), which no
# signal may be named.
RESERVED_KEYS: frozenset[str] = frozenset(
    {"tokens", "min_k_percent", "scored_by", "error", "not_measured", "samia_not_measured"}
)
_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class SignalInput:
    """What a signal's ``compute`` is given for one text: the victim's scoring pass, already run.

    Attributes:
        stats: the victim's :class:`~memprobe_core.membership.token_stats.TokenStats` of the
            text's scored tokens (``log_probs``; ``mu`` and ``sigma`` of each position's
            next-token distribution, ``None`` when a server scored the text).
        text: the text (the snippet cut at its length: prefix then suffix).
        suffix_start: index into ``stats.log_probs`` of the first suffix token.
        options: the run's :class:`~memprobe_core.membership.options.MeasureOptions`.
        lower_log_probs: the victim's log-probs of the lower-cased text (``None``: not scored).
        reference_nll: the reference model's total NLL of the text (``None``: no reference).
    """

    stats: Any
    text: str
    suffix_start: int
    options: Any
    lower_log_probs: Sequence[float] | None = None
    reference_nll: float | None = None

    @property
    def log_probs(self) -> tuple[float, ...]:
        """``ℓ_t = log p(x_t | x_<t)`` of the scored tokens (never empty)."""
        return tuple(self.stats.log_probs)


# (SignalInput) -> value, or None where the signal is undefined for this text.
SignalFn = Callable[[SignalInput], float | None]


@dataclass(frozen=True)
class SignalSpec:
    """One membership signal.

    Attributes:
        name: key in ``AttackResult.membership`` (the CSV column is ``signal_<name>``); a
            lowercase identifier.
        label: what tables and charts call it (unique among signals).
        higher_is_member: True when a larger value points to a member; evaluation scores
            ``value`` (True) or ``-value`` (False), so AUROC > 0.5 always means "separates
            members the expected way".
        needs_reference: only computed when a reference model is given.
        description: one line for the manual and tooltips.
        needs_prefixes: only computed in a labelled audit with ``recall_shots`` (ReCaLL and
            Con-ReCall put labelled texts in front of each text).
        needs_samples: only computed with ``samia_samples`` (SaMIA samples continuations).
        needs_option: only computed when its own option turns it on (DC-PDD: a reference
            corpus's token frequencies; PAC: ``pac_augmentations``).
        needs_weights: only computed for a victim scored from its weights (Min-K%++ needs the
            mean and spread of the whole next-token distribution; a server gives the log-probs
            of the text's own tokens only).
        compute: ``(SignalInput) -> float | None``, called after the scoring pass of every
            text (a plugin's signal); ``None``: computed by memprobe's pass itself (the
            built-ins). A value it cannot give is ``None``; an exception is logged and recorded
            as ``None``.
    """

    name: str
    label: str
    higher_is_member: bool
    needs_reference: bool = False
    description: str = ""
    needs_prefixes: bool = False
    needs_samples: bool = False
    needs_option: bool = False
    needs_weights: bool = False
    compute: SignalFn | None = None

    @property
    def column(self) -> str:
        return f"signal_{self.name}"


_REGISTRY: dict[str, SignalSpec] = {}


def _refuse(spec: SignalSpec, source: str, why: str) -> ValueError:
    return ValueError(f"signal {spec.name!r} from {source}: {why}")


def _check(spec: SignalSpec, source: str) -> None:
    """Refuse a spec that would break a frame, a column or another signal (message names
    where it came from)."""
    if not _NAME.fullmatch(spec.name) or keyword.iskeyword(spec.name):
        raise _refuse(spec, source, "name it with a lowercase identifier (a-z, 0-9, _)")
    if spec.name in RESERVED_KEYS:
        raise _refuse(
            spec, source, f"{spec.name!r} is a key memprobe records beside the signals; rename it"
        )
    if spec.compute is not None and not callable(spec.compute):
        raise _refuse(spec, source, "compute must be a function (SignalInput) -> float | None")
    taken = _REGISTRY.get(spec.name)
    if taken is not None and taken != spec:
        raise _refuse(
            spec,
            source,
            f"the name is taken by {taken.label!r} "
            f"({plugins.source_of('signal', spec.name)}); rename it",
        )
    clash = next((s for s in _REGISTRY.values() if s.label == spec.label and s != spec), None)
    if clash is not None:
        raise _refuse(spec, source, f"label {spec.label!r} is signal {clash.name!r}'s; rename it")


def register_signal(spec: SignalSpec) -> SignalSpec:
    """Add a signal; it is listed after those registered before it.

    The same spec again is fine (a module imported twice).

    Raises:
        ValueError: a name that is not a lowercase identifier, is a reserved key
            (:data:`RESERVED_KEYS`) or another signal's, or a label another signal has; the
            message names the plugin (distribution and version) the spec came from.
    """
    module = getattr(spec.compute, "__module__", None) or "memprobe_core"
    source = plugins.registering_source(module)
    _check(spec, source)
    _REGISTRY[spec.name] = spec
    plugins.record_source("signal", spec.name, source)
    return spec


def unregister_signal(name: str) -> None:
    """Remove a signal (tests that register a toy signal clean up with this)."""
    _REGISTRY.pop(name, None)


def signal_specs() -> tuple[SignalSpec, ...]:
    """Every registered signal, built-ins first, in registration order (loads the
    ``memprobe.signals`` entry points on the first call)."""
    plugins.load_group(SIGNALS_GROUP)
    return tuple(_REGISTRY.values())


def computed_by_plugins() -> tuple[SignalSpec, ...]:
    """The signals with a ``compute`` function (computed after the scoring pass)."""
    return tuple(s for s in signal_specs() if s.compute is not None)


class SignalList(Sequence[SignalSpec]):
    """The registered signals as a sequence read at each use (``membership.options.SIGNALS``), so
    code written against the former tuple sees plugins' signals too."""

    def __iter__(self) -> Iterator[SignalSpec]:
        return iter(signal_specs())

    def __len__(self) -> int:
        return len(signal_specs())

    @overload
    def __getitem__(self, index: int) -> SignalSpec: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[SignalSpec]: ...
    def __getitem__(self, index: int | slice) -> SignalSpec | Sequence[SignalSpec]:
        return signal_specs()[index]

    def __repr__(self) -> str:
        return f"SignalList({[s.name for s in self]})"


class SignalsByName(Mapping[str, SignalSpec]):
    """The registered signals by name, read at each use (``membership.options.SIGNAL_BY_NAME``)."""

    def __getitem__(self, name: str) -> SignalSpec:
        plugins.load_group(SIGNALS_GROUP)
        return _REGISTRY[name]

    def __iter__(self) -> Iterator[str]:
        return iter([s.name for s in signal_specs()])

    def __len__(self) -> int:
        return len(signal_specs())


def compute_registered(data: SignalInput) -> dict[str, float | None]:
    """``{name: value}`` of every signal with a ``compute`` (plugins'), from one text's pass.

    A signal that needs a reference is left out without one, and one that needs the weights
    (``mu``/``sigma``) is ``None`` without them. A compute that raises, or returns something
    that is not a finite number, gives ``None``: one plugin's bug must not cost the unit's
    other signals; the first such failure of each signal is logged.
    """
    values: dict[str, float | None] = {}
    for spec in computed_by_plugins():
        if spec.needs_reference and data.reference_nll is None:
            continue
        if spec.needs_weights and getattr(data.stats, "mu", None) is None:
            values[spec.name] = None
            continue
        values[spec.name] = _call(spec, data)
    return values


_WARNED: set[str] = set()


def _call(spec: SignalSpec, data: SignalInput) -> float | None:
    assert spec.compute is not None
    try:
        value = spec.compute(data)
        if value is None:
            return None
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"it returned {number}, not a finite number")
        return number
    except Exception as exc:  # a plugin's error is recorded as "not measured", never raised
        if spec.name not in _WARNED:
            _WARNED.add(spec.name)
            log.warning(
                "signal %s (%s) not measured: %s: %s",
                spec.name,
                plugins.source_of("signal", spec.name),
                type(exc).__name__,
                exc,
            )
        return None
