"""One declaration per option: the checks, the CLI's flags, the pages' widget kinds and
docs/options.md all come from the fields' metadata, and the manual is never stale."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from memprobe_core.attacks import registry
from memprobe_core.attacks.options import AttackOptions, GCGOptions, InteractiveOptions
from memprobe_core.cli import options_doc
from memprobe_core.cli.errors import CLI_FLAGS
from memprobe_core.cli.main import build_parser
from memprobe_core.cli.option_flags import (
    COMMAND_CLASSES,
    FLAG_CLASSES,
    dest_of,
    flag_problem,
    flagged_classes,
    read_flags,
)
from memprobe_core.errors import OptionError
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.option_fields import check_options, option, options_of, range_text, shown_default


@dataclass(frozen=True)
class Sample:
    count: int = option(3, help="a count", low=1, high=10, example="4")
    share: float = option(0.5, help="a share", low=0, low_open=True, high=1)
    mode: str | None = option(None, help="a mode", default_text="chosen later")
    internal: int = 0  # not an option: never checked, never shown

    def __post_init__(self) -> None:
        check_options(self, prefix="sample.")


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"count": 0}, "sample.count=0: give a whole number from 1 to 10, e.g. 4"),
        ({"count": True}, "sample.count=True: give a whole number"),
        ({"share": 0.0}, r"sample.share=0.0: give a number in \(0, 1\]"),
        ({"share": float("nan")}, r"sample.share=nan: give a finite number in \(0, 1\]"),
    ],
)
def test_a_value_outside_its_declaration_is_refused_naming_it(changes, message) -> None:
    with pytest.raises(OptionError, match=message):
        Sample(**changes)


def test_undeclared_fields_and_optional_none_pass() -> None:
    assert Sample(internal=-5, mode=None).internal == -5
    assert [o.name for o in options_of(Sample)] == ["count", "share", "mode"]


def test_every_option_class_declares_help_for_each_option() -> None:
    classes = {*flagged_classes(), *registry.option_sections().values()}
    for cls in classes:
        for opt in options_of(cls):
            assert opt.info.help.strip(), f"{cls.__name__}.{opt.name} has no help"
            if opt.kind in (int, float) and opt.info.flag:
                assert range_text(opt), f"{opt.info.flag} has no range"


def test_each_flag_is_generated_with_the_class_default_and_range() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    audit = sub.choices["audit"]
    flags = {s: a for a in audit._actions for s in a.option_strings}
    for cls in FLAG_CLASSES.values():
        for opt in options_of(cls):
            if opt.info.flag:
                assert opt.info.flag in flags, f"audit has no {opt.info.flag}"
                assert flags[opt.info.flag].default is None or opt.kind is bool
    help_of_steps = flags["--gcg-steps"].help or ""
    assert f"default: {GCGOptions.steps}" in help_of_steps and "from 0 to 10,000" in help_of_steps


def test_other_commands_flags_are_generated_from_their_classes() -> None:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command, classes in COMMAND_CLASSES.items():
        flags = {s: a for a in sub.choices[command]._actions for s in a.option_strings}
        for opt in (o for cls in classes for o in options_of(cls)):
            if opt.info.flag:
                assert opt.info.flag in flags, f"{command} has no {opt.info.flag}"
                assert flags[opt.info.flag].default is None
                assert f"default: {shown_default(opt)}" in (flags[opt.info.flag].help or "")
    args = build_parser().parse_args(["ner", "--pairs", "7", "--metric", "all_pairs"])
    assert read_flags(args, COMMAND_CLASSES["ner"][0]) == {"max_pairs": 7, "metric": "all_pairs"}
    assert flag_problem(build_parser().parse_args(["ner", "--min-words", "21"])) == (
        "--min-words 21: give a whole number from 1 to 20"
    )


def test_flags_read_back_into_the_classes_and_are_checked_right_after_parsing() -> None:
    parser = build_parser()
    args = parser.parse_args(["audit", "--corpus", "--rounds", "2", "--no-pz", "--n", "5"])
    assert read_flags(args, InteractiveOptions) == {"rounds": 2, "n_candidates": 5}
    assert read_flags(args, MeasureOptions) == {"pz": False}
    assert flag_problem(args) is None
    bad = parser.parse_args(["audit", "--corpus", "--pz-top-p", "0"])
    assert flag_problem(bad) == "--pz-top-p 0.0: give a number in (0, 1]"


def test_library_names_of_flagged_options_map_to_their_flags() -> None:
    for cls in FLAG_CLASSES.values():
        for opt in options_of(cls):
            if opt.info.flag and opt.kind is not bool and opt.label() in CLI_FLAGS:
                assert CLI_FLAGS[opt.label()] == opt.info.flag
    assert CLI_FLAGS["n_candidates"] == "--n" and CLI_FLAGS["gcg_steps"] == "--gcg-steps"


def test_dests_are_the_flags_names() -> None:
    (rounds,) = [o for o in options_of(InteractiveOptions) if o.name == "rounds"]
    assert dest_of(rounds) == "rounds"
    assert AttackOptions().seed == 0


def test_docs_options_md_is_current() -> None:
    # memprobe's own methods: an installed plugin's are documented by its package.
    fresh = options_doc.main(["--check", "--built-in"])
    assert fresh == 0, "run: python -m memprobe_core.cli.options_doc --built-in"


def test_a_stale_table_is_found_and_rewritten(tmp_path: Path) -> None:
    page = tmp_path / "options.md"
    fresh = options_doc.DOC.read_text(encoding="utf-8")
    stale = fresh.replace(
        "refinement rounds T", "refinement rounds", 1
    )  # a help text changed in code
    assert stale != fresh
    page.write_text(stale, encoding="utf-8")
    assert options_doc.main(["--check", "--built-in", "--file", str(page)]) == 1
    assert options_doc.main(["--built-in", "--file", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == fresh


def test_a_page_without_a_table_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "options.md"
    page.write_text("# options\n", encoding="utf-8")
    assert options_doc.main(["--check", "--file", str(page)]) == 1
