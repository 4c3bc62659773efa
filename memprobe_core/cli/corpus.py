"""``memprobe corpus``: the built-in demo corpus and the generated non-member set.

``memprobe corpus`` lists the members (domains and snippet ids) and one line about the non-member
set; ``memprobe corpus nonmembers`` lists the non-members; ``--build`` (re)generates them, which
``scripts/setup.sh`` does at install time with a fresh seed. ``--export FILE`` writes either set
as JSON Lines, ready for ``memprobe infer`` (members as the suspect set, non-members held out).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memprobe_core.cli import common
from memprobe_core.cli.errors import EXIT_OK
from memprobe_core.cli.output import echo, print_corpus, short, terminal_safe
from memprobe_core.errors import UsageError
from memprobe_core.report.export import write_output
from memprobe_core.snippets import nonmembers as generated
from memprobe_core.snippets.corpus import corpus_summary, demo_corpus, nonmember_summary, to_jsonl
from memprobe_core.snippets.split import MEMBER, NONMEMBER, Snippet

# A build larger than this is a typo, not a use (each text is ~5 kB).
MAX_BUILD_PER_DOMAIN = 10_000


def add_parser(sub: argparse._SubParsersAction) -> None:
    corpus = common.add_command(
        sub,
        "corpus",
        "show the built-in demo corpus (domains and snippet ids) and the generated non-member set",
    )
    corpus.add_argument(
        "set",
        nargs="?",
        choices=("members", "nonmembers"),
        default="members",
        help="members: the demo corpus (licences, standard-library sources and docstrings); "
        "nonmembers: the texts generated on this machine that no model can have seen "
        "(legal and code domains; built on first use)",
    )
    corpus.add_argument("--domain", help="only this domain (default: all)")
    corpus.add_argument("--show", metavar="ID", help="print the text of one snippet")
    corpus.add_argument(
        "--export",
        type=Path,
        metavar="FILE",
        help="write the set (with --domain: that domain's texts) to FILE as JSON Lines (id, "
        "text, domain, source, label), the format `memprobe infer`, `memprobe audit` and the "
        "dashboard's uploads read: `memprobe infer members.jsonl --heldout nonmembers.jsonl`",
    )
    group = corpus.add_argument_group("building the non-member set (with `nonmembers`)")
    group.add_argument(
        "--build",
        action="store_true",
        help="generate the non-member set and write it to <memprobe home>/nonmembers.json, "
        "replacing the old one (scripts/setup.sh runs this at install time)",
    )
    group.add_argument(
        "--seed",
        type=int,
        help="--build: rebuild exactly the set of this seed (the seed is listed by "
        "`memprobe corpus`) (default: a fresh random seed)",
    )
    group.add_argument(
        "--count",
        type=int,
        default=generated.DEFAULT_PER_DOMAIN,
        help="--build: texts per domain",
    )
    corpus.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.show and args.export is not None:
        raise UsageError("--show prints one snippet and --export writes a set: give one of them")
    if args.set == "nonmembers":
        return _nonmembers(args)
    if args.build or args.seed is not None:
        raise UsageError(
            "--build and --seed apply to the non-member set: memprobe corpus nonmembers --build"
        )
    snippets = demo_corpus(domains=[args.domain] if args.domain else None)
    if args.show:
        return _show(args.show, snippets)
    if args.export is not None:
        return _export(snippets, args.export, MEMBER, "member")
    print_corpus(corpus_summary(), snippets)
    echo(_set_line())
    return EXIT_OK


def _nonmembers(args: argparse.Namespace) -> int:
    if args.seed is not None and not args.build:
        raise UsageError(
            "--seed only applies with --build: memprobe corpus nonmembers --build --seed N"
        )
    if not 1 <= args.count <= MAX_BUILD_PER_DOMAIN:
        raise UsageError(f"--count {args.count}: give 1 to {MAX_BUILD_PER_DOMAIN} texts per domain")
    if args.build:
        made = generated.build(seed=args.seed, per_domain=args.count)
        echo(
            f"non-member set built: {len(made.snippets)} texts (seed {made.seed}, generator "
            f"v{made.version}) in {made.path}",
            sys.stderr,
        )
    else:
        made = generated.ensure()
    if args.domain and args.domain not in generated.NONMEMBER_DOMAINS:
        raise UsageError(
            f"--domain {terminal_safe(args.domain)}: the non-member set has "
            f"{list(generated.NONMEMBER_DOMAINS)}"
        )
    snippets = [s for s in made.snippets if not args.domain or s.domain == args.domain]
    if args.show:
        return _show(args.show, snippets)
    if args.export is not None:
        return _export(snippets, args.export, NONMEMBER, "non-member", f"; seed {made.seed}")
    if not args.build:
        _print_set(snippets)
    echo(_set_line())
    return EXIT_OK


def _export(snippets: list[Snippet], path: Path, label: str, what: str, note: str = "") -> int:
    """Write ``snippets`` as JSON Lines, each labelled ``label``; say where on stderr."""
    target = write_output(to_jsonl(snippets, label=label), path, "--export")
    counts: dict[str, int] = {}
    for snippet in snippets:
        counts[snippet.domain] = counts.get(snippet.domain, 0) + 1
    by_domain = ", ".join(f"{d} {n}" for d, n in counts.items()) or "none"
    echo(
        f"{len(snippets)} {what} texts ({by_domain}{note}) written to "
        f"{terminal_safe(str(target))} as JSON Lines",
        sys.stderr,
    )
    return EXIT_OK


def _show(snippet_id: str, snippets: list[Snippet]) -> int:
    for snippet in snippets:
        if snippet.id == snippet_id:
            echo(snippet.text, multiline=True)
            return EXIT_OK
    raise UsageError(
        f"corpus id {snippet_id!r} not found; `memprobe corpus` lists the member ids, "
        "`memprobe corpus nonmembers` the non-member ids"
    )


def _print_set(snippets: list[Snippet]) -> None:
    echo(f"{'id':<32} {'domain':<8} {'words':>6}  source")
    for snippet in snippets:
        words = len(snippet.text.split())
        echo(
            f"{terminal_safe(snippet.id):<32} {terminal_safe(snippet.domain):<8} {words:>6}  "
            f"{short(snippet.source, 60)}"
        )


def _set_line() -> str:
    """One line on the non-member set: counts, seed, version, creation time and file."""
    info = nonmember_summary()
    if info is None:
        return (
            f"generated non-member set: not built yet ({generated.default_path()}); built on "
            "first use, or now with `memprobe corpus nonmembers --build`"
        )
    counts = ", ".join(f"{d} {n}" for d, n in info["counts"].items())
    return (
        f"generated non-member set: {counts} (seed {info['seed']}, generator v{info['version']}, "
        f"created {info['created']}) in {info['file']}"
    )
