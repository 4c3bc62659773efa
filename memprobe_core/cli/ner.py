"""``memprobe ner``: NER memorization (M-MEM of prompts on in-train vs out-of-train names).

The options and the run live in :mod:`memprobe_core.ner.cli` (with the NER core); this module
only wires them into the ``memprobe`` parser.
"""

from __future__ import annotations

import argparse

from memprobe_core.ner.cli import add_ner_parser, run_ner_command


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_ner_parser(sub).set_defaults(handler=run_ner_command)
