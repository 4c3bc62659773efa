"""Terminal output of the ``memprobe`` command: the live round table, the audit progress bar and
the plain-text listings (a probe's result, the run list, the corpus).

These write to the stream they are given (stdout or stderr): they are the CLI's user interface,
so printing is their job; library modules log instead.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, TextIO

from memprobe_core.attacks.events import (
    AttackEvent,
    CandidateScored,
    RoundFinished,
    RoundStarted,
    SearchStep,
)
from memprobe_core.attacks.registry import method_label
from memprobe_core.attacks.result import AttackResult
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import RunRecord


def duration(seconds: float) -> str:
    """``3725`` → ``1h02m``; ``75`` → ``1m15s``; ``9`` → ``9s``."""
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def short(text: str, width: int = 70) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``width`` with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class LiveTable:
    """Prints each method event as a row: the terminal's live round table."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, event: AttackEvent) -> None:
        out = self.out
        if isinstance(event, RoundStarted):
            print(f"round {event.round} — {event.n} candidate(s)", file=out)
            print(f"  {'#':>3} {'Mem':>6} {'LCS_P':>6} {'obj':>7}  prompt", file=out)
        elif isinstance(event, CandidateScored):
            c = event.candidate
            flags = f" [{','.join(c.flags)}]" if c.flags else ""
            print(
                f"  {c.index:>3} {c.mem:6.3f} {c.lcs_p:6.3f} {c.objective:7.3f}  "
                f"{short(c.prompt)}{flags}",
                file=out,
            )
        elif isinstance(event, RoundFinished):
            print(
                f"  best of round {event.round}: #{event.best.index} objective "
                f"{event.best.objective:.3f}",
                file=out,
            )
        elif isinstance(event, SearchStep):
            print(
                f"  step {event.step}/{event.steps}: loss {event.loss:.4f}  "
                f"{short(event.best_prompt)}",
                file=out,
            )
        self.out.flush()


class ProgressBar:
    """Audit progress on stderr: a tqdm bar on a terminal (when installed), else a plain text
    line per update (readable in log files, where a redrawn bar is not)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._bar: Any = None
        self._tqdm: Any = None
        if getattr(out, "isatty", lambda: False)():
            try:
                from tqdm import tqdm
            except ImportError:
                pass
            else:
                self._tqdm = tqdm

    def __call__(self, progress: Any) -> None:
        current = str(progress.current) if progress.current else ""
        if self._tqdm is not None:
            if self._bar is None:
                self._bar = self._tqdm(
                    total=progress.total,
                    initial=progress.done,
                    unit="unit",
                    file=self.out,
                    dynamic_ncols=True,
                )
            self._bar.n = progress.done
            self._bar.set_postfix_str(f"errors={progress.errors} {current}".strip(), refresh=True)
            return
        eta = "?" if progress.eta_s is None else duration(progress.eta_s)
        doing = f" · running {current}" if current else ""
        print(
            f"[{progress.done}/{progress.total} units] {progress.errors} failed · "
            f"{progress.rate * 3600:.1f} units/h · ETA {eta}{doing}",
            file=self.out,
            flush=True,
        )

    def close(self) -> None:
        """Close the tqdm bar, if one was drawn."""
        if self._bar is not None:
            self._bar.close()


def print_result(run_id: int, result: AttackResult, out: TextIO | None = None) -> None:
    """A probe's final scores, costs, prompt and output (``out``: stdout by default)."""
    dis = "–" if result.dis is None else f"{result.dis:.3f}"
    c = result.costs
    lines = [
        f"\nrun {run_id} · {method_label(result.method)} on "
        f"{result.snippet_id} ({result.domain}, length {result.length}, α {result.alpha})",
        f"Mem {result.mem:.3f} · LCS_P {result.lcs_p:.3f} · Dis {dis} · objective "
        f"{result.objective:.3f}",
        f"cost: {c.victim_queries} victim / {c.attacker_queries} attacker queries, "
        f"{c.generated_tokens} tokens, {c.wall_seconds:.1f} s",
        f"prompt: {short(result.prompt, 200)}",
        f"output: {short(result.output, 200)}",
    ]
    print("\n".join(lines), file=out)


def print_runs(runs: list[RunRecord], out: TextIO | None = None) -> None:
    """The run list as a table: id, kind, status, units done/total, failed, updated, title."""
    print(
        f"{'id':>4}  {'kind':<7} {'status':<11} {'units':>9} {'failed':>6}  {'updated':<16}  title",
        file=out,
    )
    for run in runs:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run["updated"]))
        units = f"{run['units_done']}/{run['units_total']}"
        print(
            f"{run['id']:>4}  {run['kind']:<7} {run['status']:<11} {units:>9} "
            f"{run['units_error']:>6}  {when:<16}  {run['title']}",
            file=out,
        )


def print_corpus(
    summary: dict[str, int], snippets: Iterable[Snippet], out: TextIO | None = None
) -> None:
    """The demo corpus: counts per domain, then one line per snippet (id, domain, words)."""
    print("built-in demo corpus: " + ", ".join(f"{d} {n}" for d, n in summary.items()), file=out)
    print(f"{'id':<40} {'domain':<8} {'words':>6}  source", file=out)
    for snippet in snippets:
        print(
            f"{snippet.id:<40} {snippet.domain:<8} {len(snippet.text.split()):>6}  "
            f"{short(snippet.source, 40)}",
            file=out,
        )
