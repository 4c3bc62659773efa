"""Where an audit's pending units run: this process (``local``) or a Ray cluster (``ray``).

:func:`memprobe_core.audit.run_audit` does the bookkeeping every executor shares (stale units
reset, the run's status, progress, the manifest) and hands the pending units to an
:class:`~.base.Executor`. Every executor runs each unit through the one unit runner
(:func:`memprobe_core.runs.unit.run_unit`), and only the process that owns the SQLite store
writes to it, so the never-lost guarantees are the same whichever runs the units.

- :mod:`.base`: :class:`~.base.AuditWork` and the :class:`~.base.Executor` contract.
- :mod:`.local`: :class:`~.local.LocalExecutor`.
- :mod:`.ray`: :class:`~.ray.RayExecutor`; Ray itself is imported only when one is made, so
  memprobe works without Ray installed.
"""

from __future__ import annotations

from typing import Any

from memprobe_core.errors import OptionError, UsageError
from memprobe_core.executors.base import AuditWork, Executor
from memprobe_core.executors.local import LocalExecutor
from memprobe_core.executors.ray import RayExecutor, RayOptions, import_ray

EXECUTORS = ("local", "ray")


def make_executor(name: str = "local", **ray_options: Any) -> Executor:
    """An executor by name: ``local``, or ``ray`` with :class:`RayOptions` fields as keywords.

    Raises:
        UsageError: an unknown name, Ray options for ``local``, or ``ray`` without Ray
            installed (the message gives the install command).
    """
    if name == "local":
        given = [k for k, v in ray_options.items() if v is not None]
        if given:
            raise OptionError(
                given[0],
                ray_options[given[0]],
                "applies to executor='ray' only; choose that executor or drop the option",
            )
        return LocalExecutor()
    if name == "ray":
        import_ray()  # fail now, before an audit is recorded that could not run
        return RayExecutor(RayOptions(**{k: v for k, v in ray_options.items() if v is not None}))
    raise UsageError(f"executor {name!r} is unknown; choose from {list(EXECUTORS)}")


__all__ = ["EXECUTORS", "AuditWork", "Executor", "LocalExecutor", "RayExecutor", "make_executor"]
