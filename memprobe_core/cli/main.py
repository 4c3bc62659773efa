"""The ``memprobe`` command: the parser built from one module per command, and ``main``.

Every run is recorded in the run store (``--store``, default ``~/.cache/memprobe/runs.sqlite`` or
``$MEMPROBE_STORE``), every scored candidate as it is scored, so nothing is lost to a crash.
Exit codes: :mod:`memprobe_core.cli.errors`; :func:`main` returns no other.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from memprobe_core import LOGGER_ROOT
from memprobe_core.cli import (
    audit,
    common,
    corpus,
    dashboard,
    documents,
    infer,
    ner,
    plugins,
    probe,
    release,
    report,
    runs,
)
from memprobe_core.cli.errors import (
    CONTRACT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    cli_message,
    exit_code_for,
)
from memprobe_core.cli.output import check_output_paths, terminal_safe
from memprobe_core.paths import default_store_path

log = logging.getLogger(__name__)


class _OneLineErrors(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, as memprobe's own refusals are.

    argparse prints the whole usage before its error (30 lines for ``probe``, the error last,
    found by fuzzing the flags); the error alone says which flag and what is wrong, and
    ``--help`` shows the usage. Sub-command parsers are of the same class (``add_subparsers``).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"memprobe: error: {message} (usage: {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``memprobe`` argument parser (its ``--help`` is the manual)."""
    parser = _OneLineErrors(
        prog="memprobe",
        formatter_class=common.HelpFormatter,
        epilog=common.EPILOG,
        description="Measure how much of its training data a language model gives back.",
    )
    parser.add_argument(
        "--store",
        type=Path,
        help="run store file (default: $MEMPROBE_STORE or ~/.cache/memprobe/runs.sqlite)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log progress details, and show the traceback of an error",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    probe.add_parser(sub)
    audit.add_parsers(sub)
    infer.add_parser(sub)
    runs.add_parser(sub)
    report.add_parser(sub)
    release.add_parsers(sub)
    documents.add_parser(sub)
    documents.add_document_parser(sub)
    corpus.add_parser(sub)
    ner.add_parser(sub)
    dashboard.add_parser(sub)
    plugins.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``memprobe`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    The code is always one of :data:`~memprobe_core.cli.errors.CONTRACT`: an exception no entry
    of ``EXIT_CODES`` maps (a bug: ``RecursionError``, ``AssertionError``, …) is one line on
    stderr and ``EXIT_INTERNAL`` (70), never 1, which ``gate`` and ``audit`` give a meaning
    (Python exits 1 for an exception that leaves ``main``, so none may).
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:  # while the parser was built, or while an error was reported
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BaseException as exc:  # raised outside _main's handlers (building the parser, or
        # reporting another error): builtins only from here
        try:
            sys.stderr.write(
                f"memprobe: internal error: {type(exc).__name__} outside a command "
                "(a bug in memprobe, not a verdict)\n"
            )
        except BaseException:
            pass  # stderr is gone: the code alone says it
        return EXIT_INTERNAL


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage and 0 after --help
        return EXIT_OK if exc.code in (None, 0) else EXIT_USAGE
    except Exception as exc:  # a bug in a flag's parsing function, say
        return _internal_error(exc, verbose=False, command=None)
    stdout = sys.stdout
    sys.stdout = _ReaderMayLeave(stdout)
    try:
        code = _run(args)
        if code not in CONTRACT:
            raise AssertionError(f"the handler returned exit code {code!r}, outside the contract")
        # Flushed here, through the guard: a reader that went away after the last write
        # (`| head`) is not "Exception ignored" at interpreter exit.
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit as exc:  # a library or handler calling sys.exit: not ours to pass on
        return _internal_error(exc, verbose=args.verbose, command=args.command)
    except Exception as exc:
        mapped = exit_code_for(exc)
        if mapped is None:
            return _internal_error(exc, verbose=args.verbose, command=args.command)
        code, label = mapped
        if args.verbose:
            log.exception("memprobe %s failed", args.command)
        print(
            terminal_safe(f"memprobe: {label}: {cli_message(exc)}{_store_hint(exc, args)}"),
            file=sys.stderr,
        )
        return code
    finally:
        sys.stdout = stdout


class _ReaderMayLeave:
    """``sys.stdout`` while a command runs: a write or flush that finds the reader gone
    (``BrokenPipeError``: ``memprobe gate … | head -n1``) is dropped, with every later one, and
    the command runs on to its own exit code. A reader going away never changes the code: a
    breach is 1 whether or not anyone reads the report (ending the command at the broken pipe
    exited 0 before the gate returned its verdict).
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._gone = False

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return int(self._stream.write(text))
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        """Drop all further output; point file descriptor 1 at /dev/null, so what the stream
        still buffers goes there at the interpreter's final flush instead of raising again."""
        self._gone = True
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):
            return  # not a file (a test's stream): dropping is enough
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding …: the stream's own
        return getattr(self._stream, name)


def _run(args: argparse.Namespace) -> int:
    """Check the sizes and output paths, set up logging, and run the command's handler."""
    # Before any store is opened, model loaded or output written.
    problem = common.check_sizes(args) or check_output_paths(args)
    if problem:
        print(f"memprobe: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    # Log lines of every memprobe_core module (each logs below LOGGER_ROOT) go to stderr with
    # control characters shown as escapes (they carry dataset ids and server texts); warnings
    # always, INFO with -v.
    package_log = logging.getLogger(LOGGER_ROOT)
    handler = next((h for h in package_log.handlers if isinstance(h, _StderrHandler)), None)
    if handler is None:
        handler = _StderrHandler()
        package_log.addHandler(handler)
    handler.setFormatter(_TerminalSafeFormatter(args.verbose))
    handler.setLevel(logging.INFO if args.verbose else logging.WARNING)
    if args.verbose:
        package_log.setLevel(logging.INFO)
    else:
        _quiet_library_bars()
    with _sigterm_as_interrupt():
        return int(args.handler(args))


def _quiet_library_bars() -> None:
    """No progress bars of the hub and transformers on stderr ("Loading weights: 100%|███|"):
    the command shows its own progress, and a bar per model load buries it. ``--verbose`` keeps
    them; so does ``HF_HUB_DISABLE_PROGRESS_BARS=0`` set by the user."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when the hub is imported
    if os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] != "1":
        return
    # Already imported (the command's modules may import them): switch them off directly.
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()


def _internal_error(exc: BaseException, *, verbose: bool, command: str | None) -> int:
    """An exception memprobe did not expect, as one line (the traceback with ``--verbose``)."""
    if verbose:
        log.error("memprobe %s failed", command, exc_info=exc)
    # The message of a RecursionError or a MemoryError may be long or empty: its first 300
    # characters, in one line, are enough to recognise it; the traceback has the rest.
    message = " ".join(str(exc).split())[:300] or "(no message)"
    hint = "" if verbose else "; --verbose shows the traceback"
    print(
        terminal_safe(
            f"memprobe: internal error: {type(exc).__name__}: {message} "
            f"(a bug in memprobe, not a verdict{hint})"
        ),
        file=sys.stderr,
    )
    return EXIT_INTERNAL


class _StderrHandler(logging.StreamHandler):
    """Writes to the ``sys.stderr`` of the moment (as Python's own last-resort handler does),
    so a handler installed once keeps working when stderr is replaced (tests, redirection)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass  # always the current sys.stderr


class _TerminalSafeFormatter(logging.Formatter):
    """Log lines as :func:`terminal_safe` text (a traceback keeps its line breaks)."""

    def __init__(self, verbose: bool) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(message)s" if verbose else "%(levelname)s: %(message)s"
        )

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record), multiline=True)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM (``kill PID``, a scheduler's stop) like Ctrl-C while a command runs.

    Python's default SIGTERM ends the process at once, leaving the unit in flight and its run
    ``running``; as a ``KeyboardInterrupt`` the unit goes back to ``pending`` and the run is
    marked ``interrupted``. Only the main thread may set handlers (tests may call ``main`` from
    another); the previous handler is put back afterwards.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _store_hint(exc: BaseException, args: argparse.Namespace) -> str:
    """Which file an SQLite error is about (its own message never says) and what to check."""
    if not isinstance(exc, sqlite3.Error):
        return ""
    path = args.store or default_store_path()
    return (
        f" (store {path}: check that it is writable, that the disk has room and that the "
        "file is not damaged, or pass another --store)"
    )
