"""Which process owns a running run, whether it is still alive, and whether it blocks a claim.

A run records its owner (``manifest["owner"] = {"pid", "host", "proc_start"}``) when a process
claims it (:meth:`memprobe_core.store.Store.claim_run`, one write transaction that reads the owner,
refuses while it may still be working, and writes the new one). A process killed by SIGKILL (or a
power cut) cannot mark its run ``interrupted``, so the store reports a ``running`` run whose owner
is gone from this machine as ``interrupted`` when it is read (see ``Store.get_run`` and
``Store.list_runs``), and a new claim takes it over.

``proc_start`` is the process's start time (clock ticks since boot, Linux ``/proc``; ``None``
elsewhere): a pid reused by an unrelated process has another start time, so it is not taken for
the owner.

Limits: an owner on another host cannot be checked; it blocks a claim while the run shows
activity (its ``updated`` time) within ``OTHER_HOST_QUIET_S``, and is taken over after that. Two
hosts sharing one pid namespace and one host name (containers with ``--network host`` and their
own pid namespaces) are not told apart.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

# How long a run owned by a process of another host must have been silent (no candidate, unit or
# status written) before another host may take it over: that process cannot be checked from here.
OTHER_HOST_QUIET_S = 600.0


def owner_record() -> dict[str, Any]:
    """``{"pid", "host", "proc_start"}`` of this process, as stored under ``manifest["owner"]``."""
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "proc_start": _proc_start(pid)}


def is_this_process(owner: dict[str, Any] | None) -> bool:
    """Whether ``owner`` names this very process (pid and host)."""
    return bool(
        owner
        and owner.get("host") == socket.gethostname()
        and _as_int(owner.get("pid")) == os.getpid()
    )


def owner_is_dead(owner: dict[str, Any] | None) -> bool:
    """Whether ``owner`` names a process of this host that no longer exists.

    ``False`` when it cannot be told: no owner recorded, another host, or a process that exists
    but belongs to another user. A pid now held by a process started at another time than the
    recorded ``proc_start`` (the pid was reused) counts as dead.
    """
    if not owner or owner.get("host") != socket.gethostname():
        return False
    pid = _as_int(owner.get("pid"))
    if pid is None or pid <= 0:
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):
        return False
    fields = _stat_fields(pid)
    if fields is None:
        return False
    if fields[0] == "Z":  # a killed child not yet reaped by its parent: dead all the same
        return True
    recorded = _as_int(owner.get("proc_start"))
    started = _as_int(fields[19]) if len(fields) > 19 else None
    return recorded is not None and started is not None and recorded != started


def blocking_owner(
    owner: dict[str, Any] | None, *, last_active: float | None, now: float | None = None
) -> dict[str, Any] | None:
    """The owner that forbids another process from claiming a ``running`` run, or ``None``.

    Blocks: a live process of this host other than this one; a process of another host while
    the run was active (``last_active``, its ``updated`` time) less than ``OTHER_HOST_QUIET_S``
    ago. Does not block: no owner, this process, a dead process of this host, a silent other host.
    """
    if not owner or _as_int(owner.get("pid")) is None or is_this_process(owner):
        return None
    if owner.get("host") == socket.gethostname():
        return None if owner_is_dead(owner) else owner
    now = time.time() if now is None else now
    if last_active is not None and now - last_active < OTHER_HOST_QUIET_S:
        return owner
    return None


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/PID/stat`` from the state on (``None`` where there is no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def _proc_start(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return _as_int(fields[19]) if fields is not None and len(fields) > 19 else None


def claim_or_refuse(store: Any, run_id: int, busy: type[Exception]) -> None:
    """Claim ``run_id`` in ``store`` for this process (``Store.claim_run``: check and write in
    one step), or raise ``busy`` with a message naming the holder and what to do.

    Two processes working through one run would compute every unit twice. A dead owner (killed,
    even by SIGKILL) is taken over.
    """
    holder = store.claim_run(run_id, owner_record())
    if holder is None:
        return
    pid, host = holder.get("pid"), holder.get("host")
    if host == socket.gethostname():
        raise busy(
            f"run {run_id} is being run by process {pid} on this machine (host {host}); wait "
            f"for it to end, or stop it (Ctrl-C in its terminal, or `kill {pid}`) and resume"
        )
    try:
        quiet = max(0.0, time.time() - float(store.get_run(run_id).get("updated") or 0.0))
    except (TypeError, ValueError):
        quiet = 0.0
    raise busy(
        f"run {run_id} is being run by process {pid} on host {host}, which this machine cannot "
        f"check (last write {quiet:.0f} s ago); wait for it to end, or stop that process; if it "
        f"is gone, resume once the run has been silent for {OTHER_HOST_QUIET_S:.0f} s"
    )
