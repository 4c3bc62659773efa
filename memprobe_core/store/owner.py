"""Which process owns a running run, and whether it is still alive.

A run records its owner (``manifest["owner"] = {"pid", "host"}``) when a process starts working
on it. A process killed by SIGKILL (or a power cut) cannot mark its run ``interrupted``, so the
store reports a ``running`` run whose owner is gone from this machine as ``interrupted`` when it
is read (see ``Store.get_run`` and ``Store.list_runs``).

Limits: an owner on another host cannot be checked (the run is reported as stored), and a pid
reused by an unrelated process makes a dead owner look alive until that process ends.
"""

from __future__ import annotations

import os
import socket
from typing import Any


def owner_record() -> dict[str, Any]:
    """``{"pid", "host"}`` of this process, as stored under ``manifest["owner"]``."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def owner_is_dead(owner: dict[str, Any] | None) -> bool:
    """Whether ``owner`` names a process of this host that no longer exists.

    ``False`` when it cannot be told: no owner recorded, another host, or a process that exists
    but belongs to another user.
    """
    if not owner or not owner.get("pid") or owner.get("host") != socket.gethostname():
        return False
    pid = int(owner["pid"])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A killed child not yet reaped by its parent still answers signal 0; it is dead all the same."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
