"""The error messages of memprobe_core that name a flag or an option (issue 51, category 7): found
by reading the source (``ast``), so a new one is found without a hand list.

A *site* is a ``raise``, an exception built (a call of a class whose name ends in ``Error``,
``Exception`` or is a :class:`~memprobe_core.snippets.split.DataError` subclass of the loaders),
or any string inside an exception class's body (a message assembled in ``__init__``). Its names
are what its string parts name: ``--flags``, library names the CLI turns into flags
(:data:`memprobe_core.cli.errors.CLI_FLAGS`, written ``name=`` or as a bare ``snake_name``), and
method options written ``section.field``. A site is keyed by its file, the function it is in and
the names (line numbers move with every edit; two sites of one function naming the same flags
are one entry).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable
from pathlib import Path

from memprobe_core.attacks import registry
from memprobe_core.cli.errors import CLI_FLAGS
from memprobe_core.option_fields import options_of

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "memprobe_core"
EXCEPTION_NAMES = ("Error", "Exception", "TooManySnippets", "MissingColumn", "Mismatch")

_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_ASSIGNED = re.compile(r"(?<![\w.-])(\w+)=")
_BARE = re.compile(r"(?<![\w.-])(\w+_\w+)(?!\w)")


def _method_options() -> set[str]:
    return {
        f"{spec.options_key}.{opt.name}"
        for spec in registry.specs()
        if spec.options_key and spec.options_class
        for opt in options_of(spec.options_class)
    }


def names_in(text: str, method_options: set[str]) -> set[str]:
    """The flags and options ``text`` names."""
    found = set(_FLAG.findall(text))
    found |= {n for n in _ASSIGNED.findall(text) if n in CLI_FLAGS}
    found |= {n for n in _BARE.findall(text) if n in CLI_FLAGS}
    found |= {n for n in method_options if re.search(rf"(?<![\w.-]){re.escape(n)}(?!\w)", text)}
    if "{}_column=" in text:  # f"pass {role}_column= …": text_column, id_column …
        found.add("{role}_column")
    return found


def _text(node: ast.AST) -> str:
    """The string parts under ``node``, a placeholder ``{}`` for each formatted value."""
    parts: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.JoinedStr):
            parts.append(
                "".join(
                    v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
                    for v in sub.values
                )
            )
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            parts.append(sub.value)
    return " ".join(parts)


@functools.cache
def _exception_classes() -> frozenset[str]:
    """The names of memprobe_core's exception classes, by inheritance (``ResponseTooLarge``,
    ``LogprobsUnavailable`` end in neither ``Error`` nor ``Exception``: a name rule misses them)."""
    bases: dict[str, set[str]] = {}
    for file in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, set()).update(
                    b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
                )
    found = {name for name, of in bases.items() if any(b.endswith(EXCEPTION_NAMES) for b in of)}
    while True:
        more = {name for name, of in bases.items() if of & found} - found
        if not more:
            return frozenset(found)
        found |= more


def _message_text(node: ast.AST) -> str:
    """As :func:`_text`, each f-string once as a whole (not also its constant parts)."""
    inner = {id(v) for sub in ast.walk(node) if isinstance(sub, ast.JoinedStr) for v in sub.values}
    parts: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.JoinedStr):
            parts.append(
                "".join(
                    v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
                    for v in sub.values
                )
            )
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and id(sub) not in inner:
            parts.append(sub.value)
    return " ".join(parts)


def _is_exception_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else ""
    )
    return name.endswith(EXCEPTION_NAMES) or name in _exception_classes()


def _is_exception_class(node: ast.AST) -> bool:
    return isinstance(node, ast.ClassDef) and any(
        name.endswith(EXCEPTION_NAMES) or name in _exception_classes()
        for name in (
            b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
        )
    )


def sites() -> dict[tuple[str, str, tuple[str, ...]], int]:
    """``{(file, function, names): first line}`` of every site naming a flag or option."""
    method_options = _method_options()
    found: dict[tuple[str, str, tuple[str, ...]], int] = {}

    def visit(node: ast.AST, path: str, where: str, in_error_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            here, inside = where, in_error_class
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                here = f"{where}.{child.name}" if where else child.name
            elif isinstance(child, ast.ClassDef):
                here = f"{where}.{child.name}" if where else child.name
                inside = in_error_class or _is_exception_class(child)
            target = None
            if isinstance(child, ast.Raise) and child.exc is not None:
                target = child.exc
            elif _is_exception_call(child) or (inside and isinstance(child, ast.Assign)):
                target = child
            if target is not None:
                names = names_in(_text(target), method_options)
                if names:
                    key = (path, here, tuple(sorted(names)))
                    found.setdefault(key, child.lineno)
                if isinstance(child, ast.Raise):
                    continue  # its call is the same site
            visit(child, path, here, inside)

    for file in sorted(PACKAGE.rglob("*.py")):
        path = file.relative_to(ROOT).as_posix()
        visit(ast.parse(file.read_text(encoding="utf-8")), path, "", False)
    return found


_COMMAND = re.compile(r"`(memprobe [^`]*)`")
_ASSIGNED_ANY = re.compile(r"(?<![\w.-])([a-z]\w*)=")


def error_texts() -> list[tuple[str, str, str]]:
    """``(file, function, text)`` of every error site (see :func:`sites`), whatever it names."""
    found: list[tuple[str, str, str]] = []

    def visit(node: ast.AST, path: str, where: str, in_error_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            here, inside = where, in_error_class
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                here = f"{where}.{child.name}" if where else child.name
                inside = in_error_class or _is_exception_class(child)
            target = None
            if isinstance(child, ast.Raise) and child.exc is not None:
                target = child.exc
            elif _is_exception_call(child) or (inside and isinstance(child, ast.Assign)):
                target = child
            if target is not None:
                text = _message_text(target)
                # A message kept in a variable first (`self._refusal = f"…"; raise X(self._refusal)`)
                for arg in getattr(target, "args", []):
                    if isinstance(arg, (ast.Name, ast.Attribute)):
                        text += " " + assigned.get(ast.dump(arg), "")
                found.append((path, here, text))
                if isinstance(child, ast.Raise):
                    continue
            visit(child, path, here, inside)

    for file in sorted(PACKAGE.rglob("*.py")):
        path = file.relative_to(ROOT).as_posix()
        tree = ast.parse(file.read_text(encoding="utf-8"))
        assigned = {  # what a name or attribute of this file is set to, as message text
            ast.dump(target): _message_text(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            for target in node.targets
        }
        visit(tree, path, "", False)
    return found


def commands_named() -> dict[str, tuple[str, str]]:
    """Every `` `memprobe …` `` command an error message names, ``{command: (file, function)}``."""
    return {
        command: (path, where)
        for path, where, text in error_texts()
        for command in _COMMAND.findall(text)
        if not command.endswith(" ")  # a placeholder's constant part (`memprobe report {}`)
    }


def library_names_named(cli_text: Callable[[str], str]) -> dict[tuple[str, str, str], str]:
    """``{(file, function, name): shown}`` for every ``name=`` an error message still names
    once the CLI has shown it (:func:`memprobe_core.cli.errors.cli_text`): an argument a
    command-line user cannot pass."""
    found: dict[tuple[str, str, str], str] = {}
    for path, where, text in error_texts():
        shown = cli_text(text)
        for name in _ASSIGNED_ANY.findall(shown):
            found.setdefault((path, where, name), shown)
    return found
