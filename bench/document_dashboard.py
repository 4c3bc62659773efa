"""Document page vs CLI: is an extraction map started from the dashboard slower than from the CLI?

The same map (the built-in Apache License 2.0 text on the embedded Gemma-3-270M, the default
windows: 50 + 50 tokens, batches of 16) runs

- ``cli``: ``python -m memprobe_core.cli --store TMP/runs.sqlite document --builtin apache-2.0``
  (the map mode is the default), a private store;
- ``cli+busy``: the same while another process keeps ``--busy-share`` of one core busy
  (``bench/dashboard.py``'s ``_busy``: about what a browser showing one live tab uses);
- ``page:T``: ``streamlit run app.py`` (a fresh server and store, ``bench/dashboard.py``'s
  ``serve``) driven by Debian's chromium through Playwright: ``T`` tabs are opened on the
  Document page first (every page load done before anything is measured), then tab 1 presses
  "Map the document" with the page's defaults (the built-in document, map mode, the sidebar's
  embedded victim); the other tabs stay open on the page, without a job of their own;
- ``page+busy:T``: ``page:T`` while ``_busy`` runs as well.

The figure compared is the map's own time, read from its stored run: the sum over its windows of
``costs.wall_seconds`` (each batch's teacher-forced pass, shared out over the batch's windows:
the scoring, model loading and store writes excluded). Also printed: the span from the run's
creation (after the model is loaded) to its last window's commit (``units.finished``), i.e. the
scoring with the store writes and progress updates in between, and end to end (process start
or click to the run's status ``finished``, model loading included). Every side's map must give
the same summary (windows, extractable windows, longest stretch); the script stops with an
error when one differs. Sides run in the order given, ``--repeat`` times (interleaved). The
seconds are shared with whatever else the machine runs: read the ratios, and no time is
asserted.

    python bench/document_dashboard.py
    python bench/document_dashboard.py --sides cli,page:2 --repeat 3 --busy-share 0.3

Last line: ``document map: cli A s, cli+busy B s, page:1 C s, page:2 D s, page+busy:2 E s;
page:2 / cli R`` (medians over the repeats; every side's ratio to ``cli`` after the first).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import dashboard  # noqa: E402 - bench/dashboard.py: serve, chromium, _busy, CPU seconds

from tests.e2e.browser_fixtures import wait_idle  # noqa: E402 - needs ROOT on sys.path

BUILTIN = "apache-2.0"
BUTTON = "Map the document"


@dataclass
class Outcome:
    """One side's measurement of one map."""

    side: str
    map_s: float | None  # sum of the windows' costs.wall_seconds (None: no finished map)
    span_s: float | None  # run created -> last window committed
    end_to_end_s: float
    status: str
    summary: tuple[int, int, int] | None = None  # windows, extractable, longest stretch
    cpu_s: float | None = None  # CPU seconds of the CLI process or of the streamlit server
    browser_cpu_s: float | None = None  # chromium's CPU seconds over the same span
    load: float = field(default_factory=lambda: os.getloadavg()[0])


def _stored_map(store_path: Path) -> dict[str, Any] | None:
    """The store's (only) document run: status, timings and summary, or None before it exists."""
    from memprobe_core.documents.map_run import read_map
    from memprobe_core.store import Store

    if not store_path.exists():
        return None
    store = Store(store_path)
    runs = sorted(store.list_runs(kind="document"), key=lambda r: r["id"])
    if not runs:
        return None
    run = store.get_run(runs[0]["id"])
    units = store.units(run["id"])
    done = [u for u in units if u["status"] == "done"]
    finished = [u["finished"] for u in done if u["finished"] is not None]
    record: dict[str, Any] = {
        "id": run["id"],
        "status": run["status"],
        "map_s": sum(float(u["costs"].get("wall_seconds") or 0.0) for u in done) if done else None,
        "span_s": max(finished) - run["created"] if finished else None,
        "summary": None,
    }
    if run["status"] == "finished":
        s = read_map(store, run["id"]).summary
        record["summary"] = (s.windows, s.extractable, s.longest_stretch)
    return record


def _outcome(side: str, run: dict[str, Any] | None, elapsed: float) -> Outcome:
    if run is None:
        return Outcome(side, None, None, elapsed, "no run")
    return Outcome(side, run["map_s"], run["span_s"], elapsed, run["status"], run["summary"])


def run_cli(args: argparse.Namespace, side: str) -> Outcome:
    """The map from the command line, a private store."""
    command = ["document", "--builtin", BUILTIN]
    with dashboard.cli_run(command, root=ROOT, label=side, timeout=args.timeout) as run:
        store, elapsed, cpu = run
        outcome = _outcome(side, _stored_map(store), elapsed)
    outcome.cpu_s = cpu
    return outcome


def run_page(args: argparse.Namespace, side: str, tabs: int) -> Outcome:
    """The map started from tab 1 of ``tabs`` tabs open on the Document page."""
    with (
        tempfile.TemporaryDirectory(prefix="memprobe-bench-doc-ui-") as tmp,
        dashboard.serve(f"bench-document-{tabs}", {}, Path(tmp)) as server,
        dashboard.chromium() as context,
    ):
        browser: Any = context  # chromium() yields Playwright's BrowserContext as object
        pages = [browser.new_page() for _ in range(tabs)]
        for page in pages:  # every tab open before the map starts: watching, not opening
            page.goto(f"{server.url}/Document")
            page.locator("h1").first.wait_for(timeout=120_000)
            wait_idle(page, timeout_s=300)
            page.get_by_role("button", name=BUTTON).wait_for(timeout=120_000)
        t0 = time.perf_counter()
        cpu0, browser0 = dashboard._cpu_seconds(server.pid), dashboard._browser_cpu()
        pages[0].get_by_role("button", name=BUTTON).click()
        first = dashboard._wait_for(
            lambda: _stored_map(server.store), args.timeout, "the map to start"
        )
        run = first
        deadline = t0 + args.timeout
        while time.perf_counter() < deadline:
            run = _stored_map(server.store)
            if run and run["status"] != "running":
                break
            time.sleep(0.5)
        outcome = _outcome(side, run, time.perf_counter() - t0)
        cpu1, browser1 = dashboard._cpu_seconds(server.pid), dashboard._browser_cpu()
        # Model loading (the click) and every script run of every tab, click to the end.
        outcome.cpu_s = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
        if browser0 is not None and browser1 is not None:
            outcome.browser_cpu_s = browser1 - browser0
        errors = sum(p.get_by_test_id("stException").count() for p in pages)
        if errors:
            raise SystemExit(f"{side}: {errors} exception(s) shown on the page; see {server.log}")
        return outcome


def run_side(args: argparse.Namespace, side: str) -> Outcome:
    if side == "cli":
        return run_cli(args, side)
    if side == "cli+busy":
        with dashboard._busy(args.busy_share):
            return run_cli(args, side)
    variant, _, tabs = side.partition(":")
    if variant not in ("page", "page+busy") or not tabs.isdigit() or int(tabs) < 1:
        raise SystemExit(f"unknown side {side!r}: use cli, cli+busy, page:T or page+busy:T")
    if variant == "page+busy":
        with dashboard._busy(args.busy_share):
            return run_page(args, side, int(tabs))
    return run_page(args, side, int(tabs))


def _s(value: float | None) -> str:
    return f"{value:6.1f} s" if value is not None else "     -  "


def _line(o: Outcome) -> str:
    cpu = f"cpu {o.cpu_s:6.1f} s" if o.cpu_s is not None else "cpu -"
    if o.browser_cpu_s is not None:
        cpu += f"  browser cpu {o.browser_cpu_s:6.1f} s"
    summary = (
        f"{o.summary[1]}/{o.summary[0]} windows extractable, longest {o.summary[2]}"
        if o.summary
        else "no summary"
    )
    return (
        f"{o.side:12s} map {_s(o.map_s)}  span {_s(o.span_s)}  end-to-end {_s(o.end_to_end_s)}  "
        f"{cpu}  {summary}  {o.status}  load {o.load:.1f}"
    )


def _check_same(outcomes: list[Outcome]) -> None:
    """Every side mapped the same windows to the same verdicts, or stop."""
    seen = {o.summary for o in outcomes}
    if len(seen) != 1 or None in seen:
        lines = "\n".join(f"  {o.side}: {o.summary} ({o.status})" for o in outcomes)
        raise SystemExit(f"the sides' maps differ (windows, extractable, longest):\n{lines}")


def _median(outcomes: list[Outcome], side: str) -> float | None:
    values = [o.map_s for o in outcomes if o.side == side and o.map_s is not None]
    return statistics.median(values) if values else None


def report(outcomes: list[Outcome], sides: list[str]) -> str:
    """``document map: cli A s, ...; page:2 / cli R, ...`` (medians over the repeats)."""
    medians = {side: _median(outcomes, side) for side in sides}
    figures = ", ".join(
        f"{side} {value:.1f} s" if value is not None else f"{side} -"
        for side, value in medians.items()
    )
    ref = medians.get("cli")
    ratios = [
        f"{side} / cli {value / ref:.2f}"
        for side, value in medians.items()
        if side != "cli" and value is not None and ref
    ]
    ratios.sort(key=lambda r: not r.startswith("page:2 "))  # the asked ratio first
    return f"document map: {figures}" + (f"; {', '.join(ratios)}" if ratios else "")


def main(argv: list[str] | None = None) -> list[Outcome]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sides", default="cli,cli+busy,page:1,page:2,page+busy:2")
    p.add_argument("--repeat", type=int, default=1)
    dashboard.add_side_options(
        p,
        busy_help="sides cli+busy and page+busy:T: another process uses this share of one "
        "core (default 0.2, as bench/dashboard.py)",
    )
    args = dashboard.parse_side_options(p, argv)
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    outcomes = []
    for _ in range(args.repeat):
        for side in sides:
            outcomes.append(run_side(args, side))
            print(_line(outcomes[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(o) for o in outcomes], indent=2))
    _check_same(outcomes)
    print(report(outcomes, sides))
    return outcomes


if __name__ == "__main__":
    main()
