"""Plugins: extraction methods and membership signals from other installed packages.

A plugin is an installed distribution that declares entry points in the groups
:data:`METHODS_GROUP` (``memprobe.methods``) and :data:`SIGNALS_GROUP` (``memprobe.signals``);
each entry point's value is a module, and loading the plugin is importing that module, whose top
level registers its specs (``attacks.registry.register``,
``membership.signals_registry.register_signal``). memprobe's own methods and signals are declared
in its pyproject.toml under the same groups and load the same way; when memprobe runs from a
clone that is not installed, or its installed metadata predates a module, the built-in modules
are imported anyway (:data:`_BUILTIN_MODULES`).

Each group is loaded once per process, on the first read of its registry (the method registry's:
importing :mod:`memprobe_core.attacks`; the signal registry's: its first list). A plugin that
fails to import, or whose spec its registry refuses, costs only itself: the failure is logged
and kept (:func:`failures`, ``memprobe plugins``) with what to do, and memprobe goes on.

This module reads the registries' names only through their calls (:func:`record_source`,
:func:`registering_source`): it sits below every layer and imports none of them.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata

log = logging.getLogger("memprobe.plugins")

METHODS_GROUP = "memprobe.methods"
SIGNALS_GROUP = "memprobe.signals"
GROUPS: tuple[str, ...] = (METHODS_GROUP, SIGNALS_GROUP)
DISTRIBUTION = "memprobe"
BUILTIN = "memprobe (built-in)"

# What each group's built-ins are when memprobe's own entry points are missing: importing the
# methods' package imports every module of it (attacks.registry.import_modules).
_BUILTIN_MODULES: dict[str, str] = {
    METHODS_GROUP: "memprobe_core.attacks",
    SIGNALS_GROUP: "memprobe_core.membership.builtin_signals",
}


@dataclass(frozen=True)
class PluginFailure:
    """A plugin's entry point that could not be loaded, or whose spec was refused.

    Attributes:
        group: the entry-point group (``memprobe.methods`` or ``memprobe.signals``).
        entry_point: ``name = value`` as the plugin declares it.
        distribution: the installed distribution and its version.
        error: the exception, ``Type: message``.
    """

    group: str
    entry_point: str
    distribution: str
    error: str

    @property
    def message(self) -> str:
        """What failed and what to do, in one paragraph."""
        name = self.distribution.split(" ")[0]
        if self.distribution == BUILTIN or name == DISTRIBUTION:
            remedy = "reinstall memprobe (`pip install -e .` in a clone) so its metadata is current"
        else:
            remedy = (
                f"fix the plugin (its error is above) or remove it: pip uninstall {name}; "
                "memprobe runs without it meanwhile"
            )
        return (
            f"plugin {self.distribution}: entry point {self.entry_point} (group {self.group}) "
            f"was not loaded: {self.error}. To do: {remedy}"
        )


_loaded: set[str] = set()
_loading: list[str] = []  # the source of the entry point being imported (a stack: one may nest)
_sources: dict[tuple[str, str], str] = {}
_failures: list[PluginFailure] = []


def describe(dist: metadata.Distribution | None) -> str:
    """``"name version"`` of a distribution (:data:`BUILTIN` for memprobe's own)."""
    if dist is None:
        return "an unknown distribution"
    name = dist.metadata["Name"] or "?"
    if _normal(name) == DISTRIBUTION:
        return BUILTIN
    return f"{name} {dist.version}"


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    """The group's entry points, each once, memprobe's own first, then by distribution and name
    (so the built-ins come first in every list and the order does not depend on sys.path)."""
    seen: dict[tuple[str, str, str], metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=group):
        dist = _normal(ep.dist.metadata["Name"] or "") if ep.dist is not None else ""
        seen.setdefault((dist, ep.name, ep.value), ep)
    return [
        ep for key, ep in sorted(seen.items(), key=lambda kv: (kv[0][0] != DISTRIBUTION, kv[0]))
    ]


def load_group(group: str) -> None:
    """Load the entry points of ``group`` (once per process; later calls return at once)."""
    if group in _loaded:
        return
    # Marked first: a plugin that reads its registry while it loads sees it as it stands.
    _loaded.add(group)
    points = _entry_points(group)
    own = [ep for ep in points if describe(ep.dist) == BUILTIN]
    for ep in own:
        _load(group, ep, BUILTIN)
    # The built-ins whatever memprobe's metadata says (absent in a clone, stale after an upgrade).
    _load_builtin(group)
    for ep in points:
        if ep not in own:
            _load(group, ep, describe(ep.dist))


def _load_builtin(group: str) -> None:
    _loading.append(BUILTIN)
    try:
        importlib.import_module(_BUILTIN_MODULES[group])
    finally:
        _loading.pop()


def _load(group: str, ep: metadata.EntryPoint, source: str) -> None:
    """Import one entry point's module, recording a failure instead of raising."""
    _loading.append(source)
    try:
        importlib.import_module(ep.module)
    except Exception as exc:  # any error of a plugin's import is the plugin's, not memprobe's
        failure = PluginFailure(
            group=group,
            entry_point=f"{ep.name} = {ep.value}",
            distribution=source,
            error=f"{type(exc).__name__}: {exc}",
        )
        _failures.append(failure)
        log.warning("%s", failure.message)
    finally:
        _loading.pop()


def load_all() -> None:
    """Load every group (``memprobe plugins`` lists them all)."""
    for group in GROUPS:
        load_group(group)


def registering_source(module: str) -> str:
    """Where a spec being registered now comes from: the plugin whose entry point is loading,
    else the distribution that installed ``module`` (the spec's own module), else the module.
    """
    if _loading:
        return _loading[-1]
    top = module.split(".")[0]
    if top == "memprobe_core":
        return BUILTIN
    dists = _distributions_by_package().get(top, [])
    if dists:
        try:
            return describe(metadata.distribution(dists[0]))
        except metadata.PackageNotFoundError:
            pass
    return f"module {module}"


@functools.cache
def _distributions_by_package() -> Mapping[str, list[str]]:
    # Reads every installed distribution's file list (~0.3 s): once per process.
    return metadata.packages_distributions()


def record_source(kind: str, name: str, source: str) -> None:
    """Remember where ``kind`` (``method`` / ``signal``) ``name`` was registered from."""
    _sources[(kind, name)] = source


def source_of(kind: str, name: str) -> str:
    """Where ``kind`` ``name`` came from (``"memprobe (built-in)"`` or ``"dist version"``)."""
    return _sources.get((kind, name), "unknown")


def failures() -> list[PluginFailure]:
    """The entry points that could not be loaded so far, in load order."""
    return list(_failures)
