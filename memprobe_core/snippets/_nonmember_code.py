"""Python-source-shaped non-member texts (``code`` domain): functions with docstrings.

Each text is a module: a one-line docstring, a few imports and constants, then functions with
Google-style docstrings whose names, arguments, constants and literals are random identifiers,
numbers and dates. The text parses as Python (a test checks it); it is never imported or run.
"""

from __future__ import annotations

import random

from memprobe_core.snippets import _nonmember_words as words

# Whitespace words a whole text should reach: code runs ~2 Gemma tokens per word (identifiers,
# operators and indentation split), so this gives > 600 tokens with margin.
TARGET_WORDS = 420

_IMPORTS = ("math", "json", "itertools", "statistics", "re", "collections", "functools")
_TYPES = ("int", "float", "str", "list[int]", "dict[str, int]", "bool")
_DEFAULTS = {
    "int": lambda r: str(r.randint(0, 99)),
    "float": lambda r: f"{r.randint(0, 99)}.{r.randint(0, 99)}",
    "str": lambda r: repr(r.choice(words.NOUNS)),
    "list[int]": lambda r: "None",
    "dict[str, int]": lambda r: "None",
    "bool": lambda r: r.choice(("True", "False")),
}
_SUMMARIES = (
    "{Verb} the {noun} entries of {arg} and return the {adjective} total.",
    "Return the {noun} for {arg}, {verbed} against the {adjective} limit.",
    "{Verb} {arg} into {small} {noun} groups keyed by their {adjective} value.",
    "Compute a {adjective} {noun} score from {arg} as used by the {project} report.",
)
_DETAILS = (
    "Values above {number} are treated as outliers and dropped before the {noun} is {verbed}.",
    "The {project} rule from {date} applies: every {noun} counts {small} times.",
    "Kept for the {project} importer; new code should call the {adjective} variant instead.",
    "The result is cached per {noun} until the next {project} run ({date}).",
)


def _slots(rng: random.Random) -> dict[str, str]:
    verb = rng.choice(words.VERBS)
    return {
        "verbed": verb + ("d" if verb.endswith("e") else "ed"),  # "merged", "sorted"
        "Verb": verb.capitalize(),
        "noun": rng.choice(words.NOUNS),
        "adjective": rng.choice(words.ADJECTIVES),
        "project": words.place(rng).lower(),
        "number": str(rng.randint(10, 999)),
        "small": str(rng.randint(2, 16)),
        "date": words.iso_date(rng),
    }


def _expression(rng: random.Random, names: list[str]) -> str:
    a, b = rng.choice(names), rng.choice(names)
    pattern = rng.randrange(5)
    if pattern == 0:
        return f"{a} * {rng.randint(2, 97)} + {b}"
    if pattern == 1:
        return f"({a} - {b}) // {rng.randint(2, 31)}"
    if pattern == 2:
        return f"min({a}, {b}, {rng.randint(10, 999)})"
    if pattern == 3:
        return f"abs({a}) % {rng.randint(3, 257)}"
    return f"max({a} << {rng.randint(1, 7)}, {b})"


def _body(rng: random.Random, args: list[str]) -> list[str]:
    """Statements of a function body (indented four spaces) ending in a return."""
    names = [*args]
    lines: list[str] = []
    for _ in range(rng.randint(3, 6)):
        target = words.identifier(rng)
        kind = rng.randrange(4)
        if kind == 0:
            lines.append(f"    {target} = {_expression(rng, names)}")
        elif kind == 1:
            loop = rng.choice("ijk")
            lines.append(f"    {target} = 0")
            lines.append(f"    for {loop} in range({rng.randint(2, 64)}):")
            lines.append(f"        {target} += {loop} * {rng.choice(names)}")
        elif kind == 2:
            lines.append(f"    if {rng.choice(names)} > {rng.randint(0, 99)}:")
            lines.append(f"        {target} = {_expression(rng, names)}")
            lines.append("    else:")
            lines.append(f"        {target} = {rng.randint(-99, 99)}")
        else:
            stamp = f"{rng.choice(words.NOUNS)}-{words.iso_date(rng)}"
            lines.append(f'    {target} = len("{stamp}") + {rng.choice(names)}')
        names.append(target)
    lines.append(f"    return {_expression(rng, names)}")
    return lines


def _docstring(rng: random.Random, args: list[tuple[str, str]]) -> list[str]:
    slots = _slots(rng)
    slots["arg"] = args[0][0]
    lines = [f'    """{rng.choice(_SUMMARIES).format_map(slots)}', ""]
    lines.append(f"    {rng.choice(_DETAILS).format_map(slots)}")
    lines += ["", "    Args:"]
    for name, kind in args:
        detail = _slots(rng)
        lines.append(f"        {name}: the {detail['adjective']} {detail['noun']} ({kind}).")
    returns = _slots(rng)
    lines += [
        "",
        "    Returns:",
        f"        The {returns['adjective']} {returns['noun']}.",
        '    """',
    ]
    return lines


def _function(rng: random.Random) -> list[str]:
    name = f"{rng.choice(words.VERBS)}_{words.identifier(rng)}"
    args: list[tuple[str, str]] = []
    wanted = rng.randint(1, 4)
    while len(args) < wanted:
        arg = words.identifier(rng)
        if arg not in {a for a, _ in args}:
            args.append((arg, rng.choice(_TYPES)))
    signature = []
    for i, (arg, kind) in enumerate(args):
        # Only the last argument may have a default (keeps the signature valid Python).
        default = f" = {_DEFAULTS[kind](rng)}" if i == len(args) - 1 and rng.random() < 0.5 else ""
        annotation = f"{kind} | None" if default == " = None" else kind
        signature.append(f"{arg}: {annotation}{default}")
    head = f"def {name}({', '.join(signature)}) -> int:"
    return [head, *_docstring(rng, args), *_body(rng, [a for a, _ in args])]


def module_text(rng: random.Random) -> str:
    """One module-shaped text of at least :data:`TARGET_WORDS` whitespace words."""
    slots = _slots(rng)
    lines = [f'"""{slots["Verb"]} {slots["noun"]} data for the {slots["project"]} service."""', ""]
    lines += [f"import {name}" for name in sorted(rng.sample(_IMPORTS, rng.randint(1, 3)))]
    lines.append("")
    for _ in range(rng.randint(2, 4)):
        lines.append(
            f"{words.identifier(rng).upper()} = {rng.choice((8, 16, 32, 64, 100, 256, 1024))}"
        )
    while sum(len(line.split()) for line in lines) < TARGET_WORDS:
        lines += ["", "", *_function(rng)]
    return "\n".join(lines) + "\n"
