"""The one error family: every error memprobe raises for a user to act on is a ``MemprobeError``.

Each subclass also keeps the built-in base it had (``ValueError``, ``RuntimeError``, ``OSError``)
so ``except ValueError`` in a caller's code still works. The CLI maps each class to one exit code
in one place (``memprobe_core.cli.errors``); library users catch ``MemprobeError``. The messages
say which input was wrong and what to do.

``memprobe_core.attacks.result.Cancelled`` is not one of them: it is control flow inside a
method (caught by the method itself), never shown to a user.
"""

from __future__ import annotations


class MemprobeError(Exception):
    """Base of every error memprobe raises for a user to act on."""


class UsageError(MemprobeError, ValueError):
    """Bad usage or input found after the command line was parsed (which input, what to do)."""


class UnknownRunError(MemprobeError, LookupError):
    """No run with that id in the store (the message says how to list the runs)."""
