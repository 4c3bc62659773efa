"""The generated tables of ``docs/options.md`` and ``docs/method.md``, from the declarations.

Each generated table sits between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``;
the prose around them is written by hand. The option tables are generated from the option
classes, one ``KEY-fields`` table per registered method's options section, and docs/method.md
§3's ``methods`` table has a row per registered method (:mod:`memprobe_core.attacks.registry`),
so a method needs no line here. ``python -m memprobe_core.cli.options_doc`` rewrites the tables
in place; ``--check`` exits 1 when a page is stale or when a registered method (an installed
plugin's too) has options with no table or no row in §3 (a test runs it with ``--built-in``:
memprobe's own methods, which its own pages document), so a help text, default or range changed
in code shows up in the manual too, and a new method cannot go undocumented.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path

from memprobe_core import plugins
from memprobe_core.attacks import registry
from memprobe_core.attacks.options import BUILT_IN_CLASSES, AttackOptions
from memprobe_core.cli.option_flags import switch_text, switches_off
from memprobe_core.config import ScoringConfig
from memprobe_core.documents.continuation import ContinuationOptions
from memprobe_core.documents.map_near_verbatim import MapBoundOptions
from memprobe_core.documents.nv_recall import NvRecallOptions
from memprobe_core.documents.windows import MapOptions
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.ner.audit import NerAuditConfig
from memprobe_core.option_fields import OptionField, options_of, range_text, shown_default
from memprobe_core.runs.unit import SplitSpec

DOCS = Path(__file__).resolve().parents[2] / "docs"
DOC = DOCS / "options.md"
METHOD_DOC = DOCS / "method.md"

_BLOCK = re.compile(r"(<!-- generated: (\S+) -->\n).*?(<!-- end generated -->)", re.S)


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _meaning(opt: OptionField, about: str = "") -> str:
    only = f"{', '.join(opt.info.commands)} only" if opt.info.commands else ""
    return _cell(opt.described(about, range_text(opt), only))


def _flag_cell(opt: OptionField) -> str:
    assert opt.info.flag is not None
    if opt.choices is not None:
        return f"`{opt.info.flag} {{{','.join(map(str, opt.choices))}}}`"
    if opt.kind is bool:
        return f"`{opt.info.flag}`"
    return f"`{opt.info.flag} {opt.info.metavar or 'VALUE'}`"


def _default_cell(opt: OptionField) -> str:
    shown = shown_default(opt)
    if opt.info.default_text or opt.kind is bool:
        return _cell(shown)
    return f"`{shown}`"


def flags_table(*classes: tuple[str, type]) -> str:
    """``| flag | default | meaning |`` of the flags of ``classes`` ((about, class) pairs)."""
    rows = ["| flag | default | meaning |", "|---|---|---|"]
    for about, cls in classes:
        for opt in options_of(cls):
            if not opt.info.flag:
                continue
            if switches_off(opt):
                meaning = _cell(switch_text(opt))
                rows.append(f"| {_flag_cell(opt)} | {_default_cell(opt)} | {meaning} |")
            else:
                rows.append(
                    f"| {_flag_cell(opt)} | {_default_cell(opt)} | {_meaning(opt, about)} |"
                )
    return "\n".join(rows)


def fields_table(cls: type) -> str:
    """``| field [CLI flag] | default | meaning |`` of every declared option of ``cls``."""
    rows = ["| field [CLI flag] | default | meaning |", "|---|---|---|"]
    for opt in options_of(cls):
        name = f"`{opt.name}`" + (f" [`{opt.info.flag}`]" if opt.info.flag else "")
        rows.append(f"| {name} | {_default_cell(opt)} | {_meaning(opt)} |")
    return "\n".join(rows)


def _models_cell(spec: registry.MethodSpec) -> str:
    """The roles a method needs, each marked with what its model must have."""

    def role(name: str) -> str:
        needs = [
            w
            for w, roles in (("white box", spec.white_box_roles), ("chat", spec.chat_roles))
            if name in roles
        ]
        return name + (f" ({', '.join(needs)})" if needs else "")

    return ", ".join(role(r) for r in registry.ROLES if r in spec.roles)


def methods_table(specs: list[registry.MethodSpec]) -> str:
    """docs/method.md §3: ``| method (CLI name) | models | answers | what it does |``."""
    rows = ["| method (CLI name) | models | answers | what it does |", "|---|---|---|---|"]
    for spec in specs:
        answers = "sampled" if spec.samples else "greedy" if spec.extracts else "none"
        summary = _cell(spec.summary or spec.label)
        rows.append(
            f"| {spec.label} (`{spec.name}`) | {_models_cell(spec)} | {answers} | {summary} |"
        )
    return "\n".join(rows)


def built_in(spec: registry.MethodSpec) -> bool:
    """Whether memprobe itself registers ``spec`` (its own pages document it; a plugin's
    documentation is the plugin's)."""
    return plugins.source_of("method", spec.name) == plugins.BUILTIN


def documented_specs(*, only_built_in: bool = False) -> list[registry.MethodSpec]:
    """The methods the pages must document: every registered one, or memprobe's own."""
    return [s for s in registry.specs() if built_in(s) or not only_built_in]


def method_field_tables(specs: list[registry.MethodSpec]) -> dict[str, Callable[[], str]]:
    """``KEY-fields`` of each options section of ``specs`` (two methods may share one)."""
    sections = {s.options_key: s.options_class for s in specs if s.options_key and s.options_class}
    return {f"{key}-fields": functools.partial(fields_table, cls) for key, cls in sections.items()}


# The options page's tables that no method owns: their name in the markers → how it is written.
TABLES: dict[str, Callable[[], str]] = {
    "method-flags": lambda: flags_table(
        ("", AttackOptions), *((key, cls) for key, cls in BUILT_IN_CLASSES.items())
    ),
    "scoring-flags": lambda: flags_table(("", ScoringConfig)),
    "measurement-flags": lambda: flags_table(("", MeasureOptions)),
    "split-flags": lambda: flags_table(("", SplitSpec)),
    "scoring-fields": lambda: fields_table(ScoringConfig),
    "measure-fields": lambda: fields_table(MeasureOptions),
    "split-fields": lambda: fields_table(SplitSpec),
    "ner-flags": lambda: flags_table(("", NerAuditConfig)),
    "ner-fields": lambda: fields_table(NerAuditConfig),
    "nv-recall-flags": lambda: flags_table(("", NvRecallOptions)),
    "document-flags": lambda: flags_table(("", MapOptions), ("", MapBoundOptions)),
    "continue-flags": lambda: flags_table(("", ContinuationOptions)),
}


def page_tables(page: str, specs: list[registry.MethodSpec]) -> dict[str, Callable[[], str]]:
    """The tables ``page`` (``options`` or ``method``) must hold for ``specs``."""
    if page == "method":
        return {"methods": lambda: methods_table(specs)}
    return {**TABLES, **method_field_tables(specs)}


def render(text: str, tables: dict[str, Callable[[], str]]) -> str:
    """``text`` with every generated table rewritten.

    Raises:
        KeyError: a marker names a table ``tables`` does not know.
    """

    def table(match: re.Match[str]) -> str:
        return f"{match.group(1)}{tables[match.group(2)]()}\n{match.group(3)}"

    return _BLOCK.sub(table, text)


def missing_tables(text: str, tables: dict[str, Callable[[], str]]) -> list[str]:
    """The tables of ``tables`` that ``text`` has no markers for."""
    present = {match.group(2) for match in _BLOCK.finditer(text)}
    return [name for name in tables if name not in present]


def missing_rows(text: str, specs: list[registry.MethodSpec]) -> list[str]:
    """The methods of ``specs`` with no row in the page's ``methods`` table."""
    block = next((m.group(0) for m in _BLOCK.finditer(text) if m.group(2) == "methods"), "")
    return [s.name for s in specs if f"(`{s.name}`) |" not in block]


def _owner(table: str, specs: list[registry.MethodSpec]) -> str:
    """`` (options of method NAME, from SOURCE)`` for a method's table, else ``""``."""
    owner = next((s for s in specs if f"{s.options_key}-fields" == table), None)
    if owner is None:
        return ""
    return f" (options of method {owner.name}, from {plugins.source_of('method', owner.name)})"


def _problems(
    path: Path, page: str, text: str, specs: list[registry.MethodSpec], *, check: bool
) -> list[str]:
    """What is missing from ``page``: a table's markers, or (``check``: the page is read as it
    is, not rewritten) a method's row in §3."""
    problems = [
        f"{path}: no <!-- generated: {name} --> table{_owner(name, specs)}"
        for name in missing_tables(text, page_tables(page, specs))
    ]
    if check and page == "method" and not problems:
        problems += [
            f"{path}: §3's methods table has no row for method {name} "
            f"(from {plugins.source_of('method', name)})"
            for name in missing_rows(text, specs)
        ]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    parser.add_argument("--file", type=Path, default=DOC, help="the options page to update")
    parser.add_argument(
        "--method-file", type=Path, default=METHOD_DOC, help="the methods page (§3) to update"
    )
    parser.add_argument(
        "--built-in",
        action="store_true",
        help="document memprobe's own methods only (not those of installed plugins)",
    )
    args = parser.parse_args(argv)
    specs = documented_specs(only_built_in=args.built_in)
    # Every registered method's tables render (a page may document a plugin); the scope only
    # decides which must be there.
    known = {page: page_tables(page, registry.specs()) for page in ("options", "method")}
    known["method"] = page_tables("method", specs)
    pages = {"options": args.file, "method": args.method_file}
    texts = {page: path.read_text(encoding="utf-8") for page, path in pages.items()}
    problems = [
        p
        for page, path in pages.items()
        for p in _problems(path, page, texts[page], specs, check=args.check)
    ]
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print(
            "add each missing table's <!-- generated: NAME --> and <!-- end generated --> "
            "lines where it belongs, then run python -m memprobe_core.cli.options_doc",
            file=sys.stderr,
        )
        return 1
    fresh = {page: render(texts[page], known[page]) for page in pages}
    if args.check:
        stale = [str(pages[page]) for page in pages if fresh[page] != texts[page]]
        if stale:
            print(
                f"{', '.join(stale)} stale: run python -m memprobe_core.cli.options_doc",
                file=sys.stderr,
            )
            return 1
        return 0
    for page, path in pages.items():
        if fresh[page] != texts[page]:
            path.write_text(fresh[page], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
