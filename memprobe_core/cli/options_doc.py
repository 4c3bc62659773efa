"""The option tables of ``docs/options.md``, generated from the option classes' declarations.

Each generated table sits between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``;
the prose around them is written by hand. ``python -m memprobe_core.cli.options_doc`` rewrites
the tables in place; ``--check`` exits 1 when the file is stale (a test runs it), so a help text,
default or range changed in code shows up in the manual too.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from memprobe_core.attacks import registry
from memprobe_core.attacks.options import BUILT_IN_CLASSES, AttackOptions
from memprobe_core.cli.option_flags import switch_text, switches_off
from memprobe_core.config import ScoringConfig
from memprobe_core.documents.continuation import ContinuationOptions
from memprobe_core.documents.nv_recall import NvRecallOptions
from memprobe_core.documents.windows import MapOptions
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.ner.audit import NerAuditConfig
from memprobe_core.option_fields import OptionField, options_of, range_text, shown_default
from memprobe_core.runs.unit import SplitSpec

DOC = Path(__file__).resolve().parents[2] / "docs" / "options.md"

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


def _method_class(name: str) -> type:
    spec = registry.get_method(name)
    assert spec.options_class is not None
    return spec.options_class


# Every generated table: its name in the markers → how it is written.
TABLES: dict[str, Callable[[], str]] = {
    "method-flags": lambda: flags_table(
        ("", AttackOptions), *((key, cls) for key, cls in BUILT_IN_CLASSES.items())
    ),
    "scoring-flags": lambda: flags_table(("", ScoringConfig)),
    "measurement-flags": lambda: flags_table(("", MeasureOptions)),
    "split-flags": lambda: flags_table(("", SplitSpec)),
    "scoring-fields": lambda: fields_table(ScoringConfig),
    "interactive-fields": lambda: fields_table(BUILT_IN_CLASSES["interactive"]),
    "gcg-fields": lambda: fields_table(BUILT_IN_CLASSES["gcg"]),
    "reverse-fields": lambda: fields_table(BUILT_IN_CLASSES["reverse"]),
    "ps-fields": lambda: fields_table(BUILT_IN_CLASSES["ps"]),
    "acr-fields": lambda: fields_table(_method_class("acr")),
    "divergence-fields": lambda: fields_table(_method_class("divergence")),
    "measure-fields": lambda: fields_table(MeasureOptions),
    "split-fields": lambda: fields_table(SplitSpec),
    "ner-flags": lambda: flags_table(("", NerAuditConfig)),
    "ner-fields": lambda: fields_table(NerAuditConfig),
    "nv-recall-flags": lambda: flags_table(("", NvRecallOptions)),
    "document-flags": lambda: flags_table(("", MapOptions)),
    "continue-flags": lambda: flags_table(("", ContinuationOptions)),
}


def render(text: str) -> str:
    """``text`` with every generated table rewritten.

    Raises:
        KeyError: a marker names a table :data:`TABLES` does not know.
    """

    def table(match: re.Match[str]) -> str:
        return f"{match.group(1)}{TABLES[match.group(2)]()}\n{match.group(3)}"

    return _BLOCK.sub(table, text)


def missing_tables(text: str) -> list[str]:
    """The tables of :data:`TABLES` that ``text`` has no markers for."""
    present = {match.group(2) for match in _BLOCK.finditer(text)}
    return [name for name in TABLES if name not in present]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    parser.add_argument("--file", type=Path, default=DOC, help="the options page to update")
    args = parser.parse_args(argv)
    text = args.file.read_text(encoding="utf-8")
    missing = missing_tables(text)
    if missing:
        print(f"{args.file}: no markers for {', '.join(missing)}", file=sys.stderr)
        return 1
    fresh = render(text)
    if args.check:
        if fresh != text:
            print(
                f"{args.file} is stale: run python -m memprobe_core.cli.options_doc",
                file=sys.stderr,
            )
            return 1
        return 0
    args.file.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
