"""``memprobe`` with every command replaced by a stand-in that records the arguments it was
reached with: the option and path fuzzers check what gets past option checking without touching
a store or a model."""

from __future__ import annotations

import argparse
import contextlib
import importlib
from collections.abc import Iterator

import pytest

# The module, not the function `memprobe_core.cli.main` that the package exports under its name.
cli_main = importlib.import_module("memprobe_core.cli.main")

# The arguments each stand-in was reached with, in order (a test clears it first). main() turns
# anything a command raises into an exit code, so the stand-in records and returns 0.
REACHED: list[argparse.Namespace] = []


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The sub-command parsers of ``parser``, by name."""
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _stand_in(args: argparse.Namespace) -> int:
    REACHED.append(args)
    return 0


@contextlib.contextmanager
def commands_that_do_nothing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``memprobe`` whose commands stop at their first step: every sub-command's handler is
    replaced by one that records its arguments in :data:`REACHED`."""
    real = cli_main.build_parser

    def build() -> argparse.ArgumentParser:
        parser = real()
        for sub in subcommands(parser).values():
            sub.set_defaults(handler=_stand_in)
        return parser

    with monkeypatch.context() as patch:
        patch.setattr(cli_main, "build_parser", build)
        yield
