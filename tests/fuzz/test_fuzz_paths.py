"""Fuzzing every path option of every command with the kinds of path a hostile user can name.

The path options come from the parser's declarations (every action whose ``type`` is ``Path``,
the global ``--store`` included): a new path option is fuzzed without touching this file, and
:func:`test_every_path_option_is_classified` fails on an option that looks like a path (its
dest or metavar says file, folder, csv, …) but is not declared as one, or on a path option the
CLI's check does not know as an input, an output or the store.

Property (``memprobe [--store S] COMMAND … OPTION BAD``): exit 2, exactly one line on stderr
that names the option and says what the path is, no traceback, the command never reached (its
handler is replaced), no store file created. ``BAD`` is a symlink loop, a named pipe, a device,
a folder, a /proc file, a socket, a path through a file, a missing file or folder …, spelled
absolute or relative, with ``./`` or doubled slashes (docs/security.md, "Faults and hostile
input").
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import re
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memprobe_core.cli.output import INPUT_FLAGS, INPUT_FOLDERS_TOO, OUTPUT_FLAGS
from tests.fuzz.stand_in import REACHED, commands_that_do_nothing, subcommands

# The module, not the function ``memprobe_core.cli.main`` that the package exports by that name.
cli_main = importlib.import_module("memprobe_core.cli.main")

# --- the path options, from the declarations ---------------------------------------------------
# The rule: an option is a path option when its type is Path. An option that takes a value and
# whose dest or metavar reads like a file must be one, unless it is listed here with the reason.
_LOOKS_LIKE_A_PATH = re.compile(
    r"(^|_)(file|files|path|paths|dir|folder|csv|html|xml|toml|junit|export|store|corpus|"
    r"names|conll|prompts|policy|dataset|document|heldout|suspect|reference|generated|output|"
    r"out|cache)($|_)"
)
NOT_PATHS: dict[str, str] = {
    "corpus_id": "a snippet id of the built-in corpus",
    "reference_model": "a model name (hub id, local folder or GGUF file: the model loader's)",
    "output_window": "a number of tokens",
}
ROLES = ("read", "read or folder", "store", "write")


@dataclass(frozen=True)
class PathOption:
    command: str
    action: argparse.Action
    role: str  # one of ROLES
    label: str  # how the one-line error names it

    @property
    def shown(self) -> str:
        return f"{self.command} {self.action.option_strings[0] if self.action.option_strings else self.action.dest}"


def _looks_like_a_path(action: argparse.Action) -> bool:
    metavar = " ".join(action.metavar) if isinstance(action.metavar, tuple) else action.metavar
    return action.nargs != 0 and bool(
        action.type is Path
        or re.search(r"FILE|PATH|DIR|FOLDER", str(metavar or ""))
        or _LOOKS_LIKE_A_PATH.search(action.dest)
    )


def _role(dest: str) -> str:
    if dest == "store":
        return "store"
    if dest in OUTPUT_FLAGS:
        return "write"
    return "read or folder" if dest in INPUT_FOLDERS_TOO else "read"


PARSER = cli_main.build_parser()
COMMANDS = subcommands(PARSER)
(STORE,) = [a for a in PARSER._actions if a.dest == "store"]
PATH_OPTIONS: list[PathOption] = [
    PathOption(name, action, _role(action.dest), {**INPUT_FLAGS, **OUTPUT_FLAGS}[action.dest])
    for name, sub in COMMANDS.items()
    for action in [STORE, *sub._actions]
    if action.type is Path and action.dest in {**INPUT_FLAGS, **OUTPUT_FLAGS}
]


def test_every_path_option_is_classified():
    """Every option that takes a path is declared ``type=Path``, and the CLI's up-front check
    knows each as exactly one of input, output or store; no other option shares their dests."""
    unclassified, unknown, shadowed = [], [], []
    for name, sub in COMMANDS.items():
        for action in [*PARSER._actions, *sub._actions]:
            if isinstance(action, argparse._SubParsersAction) or action.dest == "help":
                continue
            where = f"{name} {action.option_strings or action.dest}"
            if action.type is Path:
                if (action.dest in INPUT_FLAGS) == (action.dest in OUTPUT_FLAGS):
                    unknown.append(where)
                else:
                    label = {**INPUT_FLAGS, **OUTPUT_FLAGS}[action.dest]
                    names_it = label in action.option_strings or label.startswith("the ")
                    if not names_it:
                        unknown.append(f"{where}: labelled {label!r}")
            elif _looks_like_a_path(action) and action.dest not in NOT_PATHS:
                unclassified.append(where)
            elif action.dest in INPUT_FLAGS or action.dest in OUTPUT_FLAGS:
                shadowed.append(where)
    assert not unclassified, f"options that look like paths but are not type=Path: {unclassified}"
    assert not unknown, f"path options that check_output_paths does not classify: {unknown}"
    assert not shadowed, f"non-path options sharing a path option's dest: {shadowed}"
    # Every command with a path option is fuzzed, and every role is drawn somewhere.
    assert {o.command for o in PATH_OPTIONS} == set(COMMANDS)
    assert {o.role for o in PATH_OPTIONS} == set(ROLES)


# --- the kinds of path -------------------------------------------------------------------------
Maker = Callable[[Path], str]


def _loop(tmp: Path) -> str:
    (tmp / "loop-a").symlink_to(tmp / "loop-b")
    (tmp / "loop-b").symlink_to(tmp / "loop-a")
    return str(tmp / "loop-a")


def _self_loop(tmp: Path) -> str:
    (tmp / "self").symlink_to("self")
    return str(tmp / "self")


def _loop_on_the_way(tmp: Path) -> str:
    (tmp / "dir-loop").symlink_to("dir-loop")
    return str(tmp / "dir-loop" / "out.csv")


def _fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "pipe")
    return str(tmp / "pipe")


def _link_to_fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "pipe2")
    (tmp / "to-pipe").symlink_to(tmp / "pipe2")
    return str(tmp / "to-pipe")


def _socket(tmp: Path) -> str:
    path = tmp / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()  # the socket file stays
    return str(path)


def _folder(tmp: Path) -> str:
    (tmp / "a-folder").mkdir()
    return str(tmp / "a-folder")


def _through_a_file(tmp: Path) -> str:
    (tmp / "plain.txt").write_text("text\n")
    return str(tmp / "plain.txt" / "inside.csv")


def _missing(tmp: Path) -> str:
    return str(tmp / "missing.txt")


def _missing_folder(tmp: Path) -> str:
    return str(tmp / "no-such-folder" / "file.csv")


def _dangling_link(tmp: Path) -> str:
    (tmp / "dangling").symlink_to(tmp / "gone.txt")
    return str(tmp / "dangling")


def _fixed(path: str) -> Maker:
    return lambda tmp: path


# As root (the CI here), permissions do not stop a read or a write: the unwritable places drawn
# are those no one can write (a path under a regular file, a /proc or /sys file, /proc itself).
EVERYWHERE: dict[str, Maker] = {
    "a symlink loop": _loop,
    "a link to itself": _self_loop,
    "a symlink loop on the way": _loop_on_the_way,
    "a named pipe": _fifo,
    "a link to a named pipe": _link_to_fifo,
    "a socket": _socket,
    "a path through a file": _through_a_file,
    "/dev/zero": _fixed("/dev/zero"),
    "/dev/null": _fixed("/dev/null"),
    "/dev/full": _fixed("/dev/full"),
    "/proc/self/environ": _fixed("/proc/self/environ"),
    "/proc/version": _fixed("/proc/version"),
    "/proc/self/status": _fixed("/proc/self/status"),
    "/proc/new-file": _fixed("/proc/memprobe-new-file.csv"),
}
if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"):
    EVERYWHERE["a /sys file"] = _fixed("/sys/kernel/mm/transparent_hugepage/enabled")
# /dev/stdin is the test runner's standard input: a device or a pipe here, a file only if the
# suite is run as `pytest < FILE`, where it is a regular file and rightly read.
if os.path.exists("/dev/stdin") and not stat.S_ISREG(os.stat("/dev/stdin").st_mode):
    EVERYWHERE["/dev/stdin"] = _fixed("/dev/stdin")
BAD: dict[str, dict[str, Maker]] = {
    "read": {
        **EVERYWHERE,
        "a folder": _folder,
        "a missing file": _missing,
        "a file in a missing folder": _missing_folder,
        "a dangling link": _dangling_link,
    },
    "read or folder": {
        **EVERYWHERE,
        "a missing file": _missing,
        "a file in a missing folder": _missing_folder,
        "a dangling link": _dangling_link,
    },
    # A missing store is created, with its folders (and a dangling link's target).
    "store": {**EVERYWHERE, "a folder": _folder},
    # A missing output is created in an existing folder.
    "write": {
        **EVERYWHERE,
        "a folder": _folder,
        "a file in a missing folder": _missing_folder,
        "a dangling link": _dangling_link,
    },
}


# --- running a command ---------------------------------------------------------------------------
# The commands a stand-in handler was reached with (it returns 0).
def _argv(option: PathOption, bad: str, good_file: str, store: str) -> list[str]:
    """``memprobe`` with ``bad`` given to ``option`` and every other required argument a usable
    value (a run id, a readable regular file)."""
    head = ["--store", bad if option.action is STORE else store, option.command]
    rest: list[str] = []
    for action in COMMANDS[option.command]._actions:
        if action is option.action:
            value = bad
        elif action.required or (not action.option_strings and action.nargs is None):
            value = good_file if action.type is Path else "1"
            if action.choices:
                value = str(next(iter(action.choices)))
        else:
            continue
        rest += [action.option_strings[0], value] if action.option_strings else [value]
    return head + rest


def _spelled(path: str, tmp: Path, how: str) -> str:
    """``path`` as a user might type it: absolute, relative to the working folder (``tmp``),
    with ``./`` or doubled slashes."""
    if how == "relative" and path.startswith(str(tmp) + "/"):
        return os.path.relpath(path, tmp)
    if how == "dot":
        head, _, tail = path.rpartition("/")
        return f"{head}/./{tail}"
    if how == "slashes":
        return path.replace("/", "//")
    return path


def check_refused(
    option: PathOption, kind: str, how: str, tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The property: exit 2, one line naming the option, never reached, no store."""
    monkeypatch.chdir(tmp)
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp / "home"))
    monkeypatch.setenv("MEMPROBE_STORE", str(tmp / "home" / "default.sqlite"))
    good = tmp / "good.txt"
    good.write_text("some words of a text\n")
    store = tmp / "runs.sqlite"
    bad = _spelled(BAD[option.role][kind](tmp), tmp, how)
    err = io.StringIO()
    REACHED.clear()
    with commands_that_do_nothing(monkeypatch), contextlib.redirect_stderr(err):
        code = cli_main.main(_argv(option, bad, str(good), str(store)))
    assert not REACHED, f"{option.shown} {bad} ({kind}) reached the command"
    text = err.getvalue()
    lines = [line for line in text.splitlines() if line.strip()]
    where = f"{option.shown} {bad} ({kind}): exit {code}, {text!r}"
    assert code == 2, where
    assert len(lines) == 1 and "Traceback" not in text, where
    assert option.label in lines[0] and lines[0].startswith("memprobe: error: "), where
    assert not store.exists() and not (tmp / "home" / "default.sqlite").exists(), where


def _id(option: PathOption) -> str:
    return option.shown.replace(" ", ":")


@pytest.mark.parametrize("option", PATH_OPTIONS, ids=_id)
def test_each_path_option_refuses_every_bad_kind_in_one_line(option, tmp_path, monkeypatch):
    """Every path option × every kind of path it must refuse, spelled as given."""
    for number, kind in enumerate(BAD[option.role]):
        folder = tmp_path / str(number)
        folder.mkdir()
        check_refused(option, kind, "absolute", folder, monkeypatch)


CASES = st.sampled_from(PATH_OPTIONS).flatmap(
    lambda option: st.tuples(
        st.just(option),
        st.sampled_from(sorted(BAD[option.role])),
        st.sampled_from(["absolute", "relative", "dot", "slashes"]),
    )
)


# One process call is ~30 ms: five times the profile's examples (200 short, 15,000 long).
@settings(max_examples=settings.default.max_examples * 5)
@given(case=CASES)
def test_any_path_option_with_any_bad_path_is_refused_in_one_line(
    case, tmp_path_factory, monkeypatch
):
    option, kind, how = case
    check_refused(option, kind, how, tmp_path_factory.mktemp("path"), monkeypatch)


def test_a_good_path_reaches_every_command(tmp_path, monkeypatch):
    """The checks refuse only what they must: every path option given a usable path (an
    existing regular file to read, a new file in an existing folder to write, a store that
    does not exist yet) reaches its command."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path / "home"))
    good = tmp_path / "good.txt"
    good.write_text("some words of a text\n")
    for number, option in enumerate(PATH_OPTIONS):
        usable = {
            "read": str(good),
            "read or folder": str(tmp_path),
            "store": str(tmp_path / "new" / "folders" / f"{number}.sqlite"),
            "write": str(tmp_path / f"out-{number}.csv"),
        }[option.role]
        argv = _argv(option, usable, str(good), str(tmp_path / "runs.sqlite"))
        err = io.StringIO()
        REACHED.clear()
        with commands_that_do_nothing(monkeypatch), contextlib.redirect_stderr(err):
            code = cli_main.main(argv)
        assert code == 0 and len(REACHED) == 1, (argv, err.getvalue())
