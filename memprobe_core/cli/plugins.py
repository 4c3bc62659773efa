"""``memprobe plugins``: every method and membership signal, where each came from, and the
plugins that could not be loaded (docs/adding-a-method.md, docs/adding-a-signal.md)."""

from __future__ import annotations

import argparse
from typing import Any

from memprobe_core import plugins
from memprobe_core.attacks import registry
from memprobe_core.cli import common
from memprobe_core.cli.errors import EXIT_OK
from memprobe_core.cli.output import echo, terminal_json
from memprobe_core.membership.signals_registry import signal_specs

HELP = (
    "list every extraction method and membership signal with its label and where it came "
    "from (memprobe or an installed plugin's distribution), then the plugins that failed to "
    "load, with what to do; exits 0 even when some failed"
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = common.add_command(sub, "plugins", HELP)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run)


def _kind(spec: registry.MethodSpec) -> str:
    return "method" if spec.extracts else "method (measures only)"


def listing() -> dict[str, list[dict[str, Any]]]:
    """``{"registered": [...], "failed": [...]}``: one row per method then per signal (kind,
    name, label, source), and one per failed entry point (with its message)."""
    plugins.load_all()
    rows = [
        {
            "kind": _kind(spec),
            "name": spec.name,
            "label": spec.label,
            "source": registry.method_source(spec.name),
        }
        for spec in registry.specs()
    ]
    rows += [
        {
            "kind": "signal",
            "name": spec.name,
            "label": spec.label,
            "source": plugins.source_of("signal", spec.name),
        }
        for spec in signal_specs()
    ]
    failed = [
        {
            "group": f.group,
            "entry_point": f.entry_point,
            "distribution": f.distribution,
            "error": f.error,
            "message": f.message,
        }
        for f in plugins.failures()
    ]
    return {"registered": rows, "failed": failed}


def _table(rows: list[dict[str, Any]]) -> str:
    keys = ("kind", "name", "label", "source")
    widths = {k: max(len(k), *(len(str(r[k])) for r in rows)) for k in keys}
    lines = ["  ".join(k.ljust(widths[k]) for k in keys).rstrip()]
    lines += ["  ".join(str(r[k]).ljust(widths[k]) for k in keys).rstrip() for r in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    found = listing()
    if args.json:
        echo(terminal_json(found), multiline=True)
        return EXIT_OK
    echo(_table(found["registered"]), multiline=True)
    failed = found["failed"]
    if failed:
        echo(f"\n{len(failed)} plugin entry point(s) failed to load:")
        for row in failed:
            echo(f"- {row['message']}")
    return EXIT_OK
