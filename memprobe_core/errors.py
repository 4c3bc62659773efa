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


class OptionError(UsageError):
    """An option given a value it does not allow.

    The message names the option as the library knows it (``max_pairs=0: give a whole number
    from 1 to 1,000,000``); ``option``, ``value`` and ``problem`` let a front end name its own
    control instead (the CLI shows ``--pairs 0: give a whole number …``).
    """

    def __init__(self, option: str, value: object, problem: str) -> None:
        super().__init__(f"{option}={value!r}: {problem}")
        self.option, self.value, self.problem = option, value, problem

    def __reduce__(self) -> tuple[type, tuple[str, object, str]]:
        # Errors cross process boundaries (Ray workers pickle them): rebuild from the parts.
        return (type(self), (self.option, self.value, self.problem))


class UnknownRunError(MemprobeError, LookupError):
    """No run with that id in the store (the message says how to list the runs)."""
