"""``memprobe nv-recall REFERENCE GENERATED``: how much of a reference text a generated text
reproduces in long verbatim runs (docs/method.md §18), for text obtained anywhere."""

from __future__ import annotations

import argparse
from pathlib import Path

from memprobe_core.cli import common, option_flags
from memprobe_core.cli.errors import EXIT_OK
from memprobe_core.cli.output import echo, terminal_json
from memprobe_core.documents.nv_recall import NvRecall, NvRecallOptions, nv_recall
from memprobe_core.documents.reading import read_document

EPILOG = """exit codes:
  0    done
  2    a file that is not a readable text document, or a bad threshold"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``memprobe nv-recall``."""
    parser = common.add_command(
        sub,
        "nv-recall",
        "score a generated text against a reference: the share of the reference's words it "
        "reproduces in long verbatim runs (Ahmed et al. 2026)",
        EPILOG,
    )
    parser.add_argument("reference", type=Path, help="the reference text (UTF-8 .txt or .md)")
    parser.add_argument("generated", type=Path, help="the generated text (UTF-8)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the figures as JSON: nv_recall, matched_words, reference_words, "
        "generated_words, missing, additional, blocks, longest_block, block_ranges",
    )
    option_flags.add_flags(parser.add_argument_group("merge thresholds"), NvRecallOptions)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print nv-recall of the two files."""
    reference = read_document(args.reference, "reference")
    generated = read_document(args.generated, "generated text")
    options = NvRecallOptions(**option_flags.read_flags(args, NvRecallOptions))
    found = nv_recall(reference, generated, options)
    shown = terminal_json(found.to_dict()) if args.json else describe(found, options)
    echo(shown, multiline=True)
    return EXIT_OK


def describe(found: NvRecall, options: NvRecallOptions) -> str:
    """Two lines for people (a third when no block was long enough to count)."""
    text = (
        f"nv-recall {found.nv_recall:.4f}: {found.matched_words:,} of {found.reference_words:,} "
        f"reference words in {len(found.blocks):,} block(s), the longest {found.longest_block:,} "
        f"words\ngenerated {found.generated_words:,} words: {found.additional:,} not matched; "
        f"{found.missing:,} reference words missing"
    )
    if not found.blocks:
        text += (
            f"\nno run of {options.min_words_2} or more matched words (--min-words-2; "
            f"{options.min_words_1} before the second merge, --min-words-1): shorter matches "
            "never count"
        )
    return text
