"""``memprobe corpus``: the built-in demo corpus (domains and snippet ids, or one text)."""

from __future__ import annotations

import argparse

from memprobe_core.cli import common
from memprobe_core.cli.errors import EXIT_OK
from memprobe_core.cli.output import print_corpus
from memprobe_core.corpus import corpus_summary, demo_corpus
from memprobe_core.errors import UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    corpus = common.add_command(
        sub, "corpus", "show the built-in demo corpus (domains and snippet ids)"
    )
    corpus.add_argument("--domain", help="only this domain (default: all)")
    corpus.add_argument("--show", metavar="ID", help="print the text of one snippet")
    corpus.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    snippets = demo_corpus(domains=[args.domain] if args.domain else None)
    if args.show:
        for snippet in snippets:
            if snippet.id == args.show:
                print(snippet.text)
                return EXIT_OK
        raise UsageError(f"corpus id {args.show!r} not found; `memprobe corpus` lists the ids")
    print_corpus(corpus_summary(), snippets)
    return EXIT_OK
