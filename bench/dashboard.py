"""Dashboard vs CLI: does watching a probe in the browser slow the probe down?

The same small probe (the attacker loop, default 1 round × 2 candidates at length 30, on the
embedded models: Gemma-3-270M victim, SmolLM2-135M-Instruct attacker, the first legal corpus
snippet, seed 0) runs

- from the CLI: ``python -m memprobe_core.cli probe ...`` (what ``memprobe probe`` runs), and
- from the dashboard: ``streamlit run app.py`` driven by Debian's chromium through Playwright.
  With ``T`` tabs, every tab is opened and its options set first; tab 1 then starts the
  measured probe, and once it runs tabs 2..T start probes of their own, which wait for the
  model lock, so every tab has a live view polling the server (a tab without a job of its own
  does not poll). ``--open-during`` opens tabs 2..T while the probe runs instead (the
  protocol of the first measurements: their page loads then count against the probe).

Both sides record the run in a private store; the figure compared is the probe's own wall time
(``costs.wall_seconds``: from the job starting to its last score, model loading excluded), and
the ratio is dashboard / CLI of the same code. End-to-end seconds (process start or click to
the end, model loading included) are printed too.

Variants of the dashboard (``--sides``, comma list of ``cli``, ``cli@old`` and ``VARIANT:TABS``):

- ``new``: this tree as shipped.
- ``gc``: this tree with Streamlit's full GC after every script run back on
  (``--runner.postScriptGC true``) and no ``gc.freeze`` (``MEMPROBE_UI_GC_FREEZE=0``): the
  redraw/poll changes alone.
- ``freeze``: ``gc.freeze`` only (postScriptGC back on). ``nogc``: postScriptGC off only.
- ``old``: the tree at ``--baseline REF`` (a temporary git worktree), its CLI for ``cli@old``.
- ``cli+busy`` (not a dashboard): the CLI while another process keeps ``--busy-share`` of one
  core busy, as the browser does: on a 2-core machine this alone shows how much of the
  dashboard's slowdown is the browser sharing the cores (torch's two threads wait for each
  other whenever one is descheduled). ``--busy-share 1`` keeps a whole core busy.
- Torch's threads: a CLI side runs with ``MEMPROBE_THREADS=auto`` (threads chosen from the
  cores free, re-chosen between batches: ``memprobe_core.models.threads``) unless it ends in
  ``@fixedN`` or ``@Nthread`` (``MEMPROBE_THREADS=N``): e.g. ``cli+busy@fixed2`` (torch's
  default on 2 cores) and ``cli@1thread`` (the same probe alone on one thread).

The goal table compares, side by side in one run: one tab / CLI (≤ 1.10), three tabs / CLI
(≤ 1.25), and the CLI beside a busy core with adaptive threads / alone on one thread (≤ 1.2;
fixed at 2 threads shown for comparison). The browser's CPU is printed as a share of one core
over the same span (click to end).

Sides run in the order given, ``--repeat`` times (interleaved), each with a fresh server and
store. CPU time is shared with other work, so read the ratios, not the seconds.

    python bench/dashboard.py                                  # cli, new:1, new:3
    python bench/dashboard.py --baseline 5b45f44 --sides cli,new:3,cli@old,old:3
    python bench/dashboard.py --rounds 1 --n 4 --repeat 2
    python bench/dashboard.py --rounds 1 --n 4 --busy-share 1 \
        --sides cli,new:1,new:3,cli@1thread,cli+busy,cli+busy@fixed2   # the goal table
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from tests.e2e.browser_fixtures import chromium, prepare_probe, serve, start_probe  # noqa: E402 - needs ROOT on sys.path

VARIANTS: dict[str, tuple[list[str], dict[str, str]]] = {
    "new": ([], {}),
    "gc": (["--runner.postScriptGC", "true"], {"MEMPROBE_UI_GC_FREEZE": "0"}),
    "freeze": (["--runner.postScriptGC", "true"], {}),
    "nogc": ([], {"MEMPROBE_UI_GC_FREEZE": "0"}),
    "old": ([], {}),
}


@dataclass
class Outcome:
    """One side's measurement."""

    side: str
    probe_s: float | None  # costs.wall_seconds of the measured run (None: it did not finish)
    end_to_end_s: float
    candidates: int
    status: str
    objective: float | None = None
    snippet: str = ""
    cpu_s: float | None = None  # CPU seconds of the process doing the probe (see _cpu_seconds)
    browser_cpu_s: float | None = None  # CPU seconds of chromium's processes over the same span
    load: float = field(default_factory=lambda: os.getloadavg()[0])
    threads: str = ""  # MEMPROBE_THREADS of a CLI side (auto or a number)


def _store_run(store_path: Path, run_id: int | None = None) -> dict[str, Any] | None:
    """The run ``run_id`` (default: the first) with its candidate count and result, or None."""
    from memprobe_core.store import Store, UnitKey

    if not store_path.exists():
        return None
    store = Store(store_path)
    runs = sorted(store.list_runs(), key=lambda r: r["id"])
    if not runs:
        return None
    run = runs[0] if run_id is None else store.get_run(run_id)
    units = store.units(run["id"])
    if not units:  # created, units not added yet
        return None
    unit = UnitKey(units[0]["snippet_id"], units[0]["method"], int(units[0]["length"]))
    result = store.result(run["id"], unit)
    return {
        "id": run["id"],
        "status": run["status"],
        "result": result,
        "candidates": len(store.candidates_frame(run["id"])),
        "snippet": unit.snippet_id,
    }


def run_cli(args: argparse.Namespace, root: Path, label: str, threads: str = "auto") -> Outcome:
    """The probe from the command line of the tree at ``root`` (``MEMPROBE_THREADS=threads``)."""
    command = ["probe", "--corpus-id", args.snippet, "--length", str(args.length)]
    command += ["--rounds", str(args.rounds), "--n", str(args.n), "--seed", "0"]
    env = {"MEMPROBE_THREADS": threads}
    with cli_run(command, root=root, label=label, timeout=args.timeout, env=env) as (
        store,
        elapsed,
        cpu,
    ):
        run = _store_run(store)
    outcome = _outcome(label, run, elapsed)
    outcome.cpu_s = cpu
    outcome.threads = threads
    return outcome


@contextmanager
def cli_run(
    command: list[str],
    *,
    root: Path,
    label: str,
    timeout: float | None,
    env: dict[str, str] | None = None,
) -> Iterator[tuple[Path, float, float]]:
    """Run ``python -m memprobe_core.cli COMMAND`` from the tree at ``root`` on a private
    store (``env``: more environment variables); yield (the store, wall seconds, the child's
    CPU seconds) while the store exists.

    Raises:
        SystemExit: the command failed (its stderr's tail in the message).
    """
    with tempfile.TemporaryDirectory(prefix="memprobe-bench-cli-") as tmp:
        store = Path(tmp) / "runs.sqlite"
        full_env = {
            **os.environ,
            **(env or {}),
            "MEMPROBE_STORE": str(store),
            "PYTHONPATH": str(root),
        }
        cmd = [sys.executable, "-m", "memprobe_core.cli", *command]
        t0, before = time.perf_counter(), _children_cpu()
        done = subprocess.run(
            cmd,
            cwd=root,
            env=full_env,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
        elapsed, cpu = time.perf_counter() - t0, _children_cpu() - before
        if done.returncode != 0:
            raise SystemExit(f"{label} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        yield store, elapsed, cpu


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds a live process has used (Linux ``/proc``), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _browser_cpu() -> float | None:
    """CPU seconds used so far by chromium's processes (this process's descendants), or None
    without psutil. On 2 cores the browser's rendering competes with the probe for the CPU;
    the server's own CPU seconds do not show that."""
    try:
        import psutil
    except ImportError:
        return None
    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        try:
            if "chrom" in proc.name().lower():
                times = proc.cpu_times()
                total += times.user + times.system
        except psutil.Error:  # a helper process that ended meanwhile
            continue
    return total


def _outcome(label: str, run: dict[str, Any] | None, elapsed: float) -> Outcome:
    if run is None:
        return Outcome(label, None, elapsed, 0, "no run")
    result = run["result"]
    return Outcome(
        label,
        result.costs.wall_seconds if result else None,
        elapsed,
        run["candidates"],
        run["status"],
        result.objective if result else None,
        run["snippet"],
    )


def run_dashboard(args: argparse.Namespace, root: Path, variant: str, tabs: int) -> Outcome:
    """The probe started from the Probe page with ``tabs`` tabs holding a live job each."""
    label = f"dashboard {variant}, {tabs} tab(s)"
    extra_args, extra_env = VARIANTS[variant]
    with (
        tempfile.TemporaryDirectory(prefix="memprobe-bench-ui-") as tmp,
        serve(
            f"bench-{variant}-{tabs}", extra_env, Path(tmp), root=root, extra_args=extra_args
        ) as server,
        chromium() as context,
    ):
        pages = [context.new_page() for _ in range(tabs)]
        size = {"length": args.length, "rounds": args.rounds, "n": args.n}
        if not args.open_during:  # every tab open, its options set, before the probe starts
            for page in pages:
                prepare_probe(page, server.url, **size)
        t0, cpu0, browser0 = time.perf_counter(), _cpu_seconds(server.pid), _browser_cpu()
        _run_probe(pages[0], server.url, size, args.open_during)
        first = _wait_for(lambda: _store_run(server.store), args.timeout, "the probe to start")
        for page in pages[1:]:  # they queue behind the measured probe, their views live
            _run_probe(page, server.url, size, args.open_during)
        deadline = t0 + args.timeout
        run = first
        while time.perf_counter() < deadline:
            run = _store_run(server.store, first["id"])
            if run and run["status"] != "running":
                break
            time.sleep(1.0)
        outcome = _outcome(label, run, time.perf_counter() - t0)
        cpu1 = _cpu_seconds(server.pid)
        # Model loading (first click) and every page run of every tab, from the click to the end.
        outcome.cpu_s = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
        browser1 = _browser_cpu()
        if browser0 is not None and browser1 is not None:
            outcome.browser_cpu_s = browser1 - browser0
        return outcome


def _run_probe(page: Any, url: str, size: dict[str, int], open_first: bool) -> None:
    """Press Run probe in ``page`` (opening the page and setting its options first if asked)."""
    if open_first:
        start_probe(page, url, **size)
    else:
        page.get_by_role("button", name="Run probe").click()


def _wait_for(probe: Any, timeout: float, what: str) -> Any:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


def baseline_tree(ref: str) -> Path:
    """A detached git worktree of ``ref`` in a temporary folder."""
    path = Path(tempfile.mkdtemp(prefix="memprobe-bench-baseline-")) / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), ref],
        check=True,
        capture_output=True,
    )
    return path


def add_side_options(p: argparse.ArgumentParser, *, busy_help: str) -> None:
    """``--busy-share``, ``--timeout`` and ``--json``: what every dashboard-vs-CLI bench takes."""
    p.add_argument("--busy-share", type=float, default=0.2, help=busy_help)
    p.add_argument("--timeout", type=float, default=1800, help="seconds per side")
    p.add_argument("--json", default=None, help="also write the outcomes to this file")


def parse_side_options(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``p``'s arguments, ``--busy-share`` checked (a share of one core)."""
    args = p.parse_args(argv)
    if not 0.0 < args.busy_share <= 1.0:
        p.error(
            f"--busy-share {args.busy_share}: give a share of one core above 0 and at most 1, "
            "e.g. 0.2 (1: a whole core kept busy)"
        )
    return args


def main(argv: list[str] | None = None) -> list[Outcome]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--length", type=int, default=30)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--n", type=int, default=2)
    p.add_argument("--sides", default="cli,new:1,new:3")
    p.add_argument("--baseline", default=None, help="git ref of the 'old' tree (old:T, cli@old)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument(
        "--interleave-cli",
        action="store_true",
        help="run the CLI of the same tree before each dashboard side and once at the "
        "end; each ratio uses the CLI runs on either side of it (load drifts)",
    )
    p.add_argument(
        "--open-during",
        action="store_true",
        help="open tabs 2..T and set their options while the measured probe runs (their page "
        "loads then count against it); default: every tab is open before it starts, so "
        "what is measured is watching, not opening",
    )
    add_side_options(
        p,
        busy_help="side cli+busy: the CLI while another process uses this share of one core "
        "(default 0.2, about what chromium used showing one live tab here)",
    )
    args = parse_side_options(p, argv)
    from memprobe_core.snippets.corpus import demo_corpus

    args.snippet = demo_corpus(domains=["legal"])[0].id  # the Probe page's default snippet
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if args.interleave_cli:
        sides = _interleaved(sides)
    old = baseline_tree(args.baseline) if args.baseline else None
    if old is None and any(s == "cli@old" or s.startswith("old:") for s in sides):
        raise SystemExit("--sides names the old tree: give --baseline REF (e.g. a commit)")
    outcomes = []
    try:
        for _ in range(args.repeat):
            for side in sides:
                outcomes.append(_run_side(args, side, old))
                print(_line(outcomes[-1]), flush=True)
    finally:
        if old is not None:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                check=False,
                capture_output=True,
            )
    _report(outcomes)
    _goal_report(outcomes)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(o) for o in outcomes], indent=2))
    return outcomes


@contextmanager
def _busy(share: float) -> Iterator[None]:
    """Another process using ``share`` of one core (busy ``share`` of every 20 ms, asleep the
    rest), as a browser rendering a page does: what that alone does to the probe."""
    code = (
        "import time\n"
        f"busy, idle = 0.02 * {share}, 0.02 * (1 - {share})\n"
        "while True:\n"
        "    t = time.perf_counter()\n"
        "    while time.perf_counter() - t < busy: pass\n"
        "    time.sleep(idle)\n"
    )
    if share >= 1.0:  # a whole core: never sleeps
        code = "while True:\n    pass\n"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def _interleaved(sides: list[str]) -> list[str]:
    """``new:1,old:3`` -> ``cli,new:1,cli,cli@old,old:3,cli@old`` (a CLI run either side)."""
    out: list[str] = []
    for side in (s for s in sides if s not in ("cli", "cli@old")):
        cli = "cli@old" if side.startswith("old:") else "cli"
        if not out or out[-1] != cli:
            out.append(cli)
        out += [side, cli]
    return out


CLI_SIDE = re.compile(r"cli(?P<busy>\+busy)?(?:@(?:fixed(?P<fixed>\d+)|(?P<n>\d+)threads?))?")


def _run_side(args: argparse.Namespace, side: str, old: Path | None) -> Outcome:
    if side == "cli@old":
        assert old is not None
        return run_cli(args, old, side)
    cli = CLI_SIDE.fullmatch(side)
    if cli:
        threads = cli["fixed"] or cli["n"] or "auto"
        if threads != "auto" and int(threads) < 1:
            raise SystemExit(f"side {side!r}: give at least 1 thread")
        if cli["busy"]:
            with _busy(args.busy_share):
                return run_cli(args, ROOT, side, threads)
        return run_cli(args, ROOT, side, threads)
    variant, _, tabs = side.partition(":")
    if variant not in VARIANTS or not tabs.isdigit():
        raise SystemExit(
            f"unknown side {side!r}: use cli, cli@old, cli+busy, cli[+busy]@fixedN, "
            "cli[+busy]@Nthread or VARIANT:TABS "
            f"with VARIANT one of {', '.join(VARIANTS)}"
        )
    tree = old if variant == "old" else ROOT
    assert tree is not None
    return run_dashboard(args, tree, variant, int(tabs))


def _line(o: Outcome) -> str:
    probe = f"{o.probe_s:7.1f} s" if o.probe_s is not None else "   (unfinished)"
    objective = f"O {o.objective:.3f}" if o.objective is not None else "O -"
    cpu = f"cpu {o.cpu_s:6.1f} s" if o.cpu_s is not None else "cpu -"
    if o.browser_cpu_s is not None:
        cpu += f"  browser cpu {o.browser_cpu_s:6.1f} s ({_browser_share(o):.0%} of a core)"
    if o.threads:
        cpu += f"  threads {o.threads}"
    # Same snippet, seed and options: the objective should match across sides (same work).
    return (
        f"{o.side:28s} probe {probe}  end-to-end {o.end_to_end_s:7.1f} s  {cpu}  "
        f"{o.candidates} candidates  {objective}  {o.status}  {o.snippet}  "
        f"load {o.load:.1f}"
    )


def _browser_share(o: Outcome) -> float:
    """Chromium's CPU seconds over the wall seconds of the same span (click to end): the share
    of one core the browser took from the probe."""
    return (o.browser_cpu_s or 0.0) / o.end_to_end_s if o.end_to_end_s else 0.0


GOALS = [
    ("one tab / CLI", "dashboard new, 1 tab(s)", "cli", 1.10),
    ("three tabs / CLI", "dashboard new, 3 tab(s)", "cli", 1.25),
    ("CLI+busy core, adaptive / alone on 1 thread", "cli+busy", "cli@1thread", 1.2),
    ("CLI+busy core, fixed 2 / alone on 1 thread", "cli+busy@fixed2", "cli@1thread", None),
]


def goal_table(outcomes: list[Outcome]) -> list[tuple[str, float | None, float | None]]:
    """(goal, median ratio of probe seconds, its goal) for each goal whose two sides ran."""

    def median(side: str) -> float | None:
        xs = [o.probe_s for o in outcomes if o.side == side and o.probe_s]
        return statistics.median(xs) if xs else None

    rows = []
    for name, side, ref, goal in GOALS:
        a, b = median(side), median(ref)
        if a is not None or b is not None:
            rows.append((name, a / b if a and b else None, goal))
    return rows


def _goal_report(outcomes: list[Outcome]) -> None:
    rows = goal_table(outcomes)
    if not rows:
        return
    print("\ngoals (median probe seconds, one run side by side)")
    for name, ratio, goal in rows:
        value = f"{ratio:6.2f}×" if ratio is not None else "     -"
        verdict = (
            "" if goal is None or ratio is None else ("  met" if ratio <= goal else "  MISSED")
        )
        target = f"  goal ≤ {goal:.2f}" if goal is not None else "  (comparison)"
        print(f"  {name:46s} {value}{target}{verdict}")
    for o in outcomes:
        if o.browser_cpu_s is not None:
            print(
                f"  browser CPU, {o.side}: {o.browser_cpu_s:.1f} s over {o.end_to_end_s:.1f} s "
                f"(click to end) = {_browser_share(o):.0%} of one core; probe {o.probe_s or 0:.1f} s"
            )


def _report(outcomes: list[Outcome]) -> None:
    """Each dashboard side over the CLI of the same tree: probe seconds and CPU seconds.

    The CLI reference is the mean of the CLI runs right before and after the side when they
    exist (``--interleave-cli``), else the median of that tree's CLI runs.
    """
    print(
        "\ndashboard / CLI of the same tree (goals for probe seconds: 1 tab <= 1.10, 3 tabs <= 1.25)"
    )
    print(f"  {'side':28s} {'probe s':>8s} {'CPU s':>8s}")
    for i, o in enumerate(outcomes):
        if o.side.startswith("cli"):  # CLI sides are references, or in the goal table
            continue
        name = "cli@old" if o.side.startswith("dashboard old") else "cli"
        ref = _reference(outcomes, i, name)
        if ref is None:
            continue
        wall = (
            f"{o.probe_s / ref.probe_s:8.2f}"
            if o.probe_s is not None and ref.probe_s
            else f"> {o.end_to_end_s / (ref.probe_s or 1):.2f}"
        )
        cpu = f"{o.cpu_s / ref.cpu_s:8.2f}" if o.cpu_s and ref.cpu_s else "       -"
        note = (
            ""
            if o.probe_s is not None
            else (f"  (unfinished after {o.end_to_end_s:.0f} s, {o.candidates} candidates)")
        )
        print(f"  {o.side:28s} {wall} {cpu}{note}")


def _reference(outcomes: list[Outcome], i: int, name: str) -> Outcome | None:
    near = [
        outcomes[j]
        for j in (i - 1, i + 1)
        if 0 <= j < len(outcomes) and outcomes[j].side == name and outcomes[j].probe_s
    ]
    pool = near or [o for o in outcomes if o.side == name and o.probe_s]
    if not pool:
        return None
    cpus = [o.cpu_s for o in pool if o.cpu_s is not None]
    if near:
        return Outcome(
            name,
            statistics.mean(o.probe_s for o in pool),
            0.0,
            0,
            "ref",
            cpu_s=statistics.mean(cpus) if cpus else None,
        )
    return Outcome(
        name,
        statistics.median(o.probe_s for o in pool),
        0.0,
        0,
        "ref",
        cpu_s=statistics.median(cpus) if cpus else None,
    )


if __name__ == "__main__":
    main()
