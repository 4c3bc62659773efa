r"""Terminal output of the ``memprobe`` command: the live round table, the audit progress bar and
the plain-text listings (a probe's result, the run list, the corpus).

These write to the stream they are given (stdout or stderr): they are the CLI's user interface,
so printing is their job; library modules log instead.

Everything the CLI prints passes through :func:`terminal_safe` (via :func:`echo`, or
:func:`terminal_json` for ``--json``): snippet ids, domains, titles, model names and outputs come
from data, models and users, and a terminal obeys the escape sequences in them (retitle the
window, clear the screen, hide or reorder text). Control characters are shown as visible escapes
(``\x1b``, ``\u202e``) instead.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
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
from memprobe_core.documents.stored import units_text
from memprobe_core.highlight import BIDI_CONTROLS, show_controls
from memprobe_core.measuring.bracket import describe_bracket, has_bounds
from memprobe_core.models.live import LiveBatch, LiveTap
from memprobe_core.report import leakage
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import RunRecord

# What json.dumps(ensure_ascii=False) leaves raw (it escapes only C0, quote and backslash).
_UNSAFE_IN_JSON = re.compile(f"[\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}]")


def terminal_safe(text: object, *, multiline: bool = False) -> str:
    r"""``text`` with every character a terminal would act on shown as a visible escape.

    ``"\x1b]0;pwned\x07"`` becomes the literal text ``\x1b]0;pwned\x07``; ``"\u202e"`` becomes
    ``\u202e``. Tabs stay. ``multiline``: newlines stay too (a block meant to span lines, such as
    the report), and ``\r\n`` line ends become ``\n``; otherwise a newline is shown as ``\x0a``,
    so one value cannot forge a line of its own.
    """
    return show_controls(text if isinstance(text, str) else str(text), multiline=multiline)


def echo(
    text: object = "", file: TextIO | None = None, *, multiline: bool = False, flush: bool = False
) -> None:
    """Print ``text`` (one line, or a block with ``multiline``) made :func:`terminal_safe`."""
    print(terminal_safe(text, multiline=multiline), file=file or sys.stdout, flush=flush)


def show_with_files(shown: str, written: Iterable[object]) -> None:
    """Print a command's result (a report as text or JSON) and then, on stderr, the files it
    wrote."""
    echo(shown, multiline=True)
    for path in written:
        echo(f"wrote {path}", sys.stderr)


def terminal_json(value: Any) -> str:
    r"""``value`` as indented, strict JSON that is safe on a terminal and still parses to the same
    value (NaN and ±Infinity, which JSON cannot hold, as ``null``).

    ``json.dumps`` escapes C0 controls (ESC as ``\u001b``) but, with ``ensure_ascii=False``,
    leaves DEL, C1 controls and bidi overrides raw; those become ``\u…`` escapes too.
    """
    text = json.dumps(_finite(value), ensure_ascii=False, indent=2, default=str, allow_nan=False)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _finite(value: Any) -> Any:
    """``value`` with NaN and ±Infinity as ``None``: JSON has no such numbers (``json.dumps``
    writes bare ``NaN``/``Infinity``, which strict parsers such as ``jq`` refuse), and in our
    results a non-finite number means "not measured", which is what ``null`` says."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


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
    """Prints each method event as a row: the terminal's live round table.

    On a terminal, with a ``tap`` (:mod:`memprobe_core.models.live`), a block under the table
    also shows the batch being written, redrawn every ``refresh_s`` seconds by a thread of its
    own: each row's last words, its tokens and running scores. The block is erased before a
    scored row is printed and when the table closes, so the scrollback keeps only the rows. Not
    on a terminal (a pipe, a log file) nothing but the rows is printed. Use it as a context
    manager so the thread stops.
    """

    def __init__(self, out: TextIO, tap: LiveTap | None = None, *, refresh_s: float = 0.5) -> None:
        self.out = out
        self._tap = tap if getattr(out, "isatty", lambda: False)() else None
        self._refresh_s = refresh_s
        self._lock = threading.Lock()  # the rows (job thread) and the block (refresher) share out
        self._block_lines = 0
        self._drawn_seq: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LiveTable:
        if self._tap is not None:
            self._thread = threading.Thread(target=self._refresh, name="memprobe-live", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._erase()
            self.out.flush()

    def __call__(self, event: AttackEvent) -> None:
        with self._lock:
            self._erase()
            self._row(event)
            self.out.flush()

    def _row(self, event: AttackEvent) -> None:
        out = self.out
        if isinstance(event, RoundStarted):
            echo(f"round {event.round} — {event.n} candidate(s)", out)
            echo(f"  {'#':>3} {'Mem':>6} {'LCS_P':>6} {'obj':>7}  prompt", out)
        elif isinstance(event, CandidateScored):
            c = event.candidate
            flags = f" [{','.join(c.flags)}]" if c.flags else ""
            echo(
                f"  {c.index:>3} {c.mem:6.3f} {c.lcs_p:6.3f} {c.objective:7.3f}  "
                f"{short(c.prompt)}{flags}",
                out,
            )
        elif isinstance(event, RoundFinished):
            echo(
                f"  best of round {event.round}: #{event.best.index} objective "
                f"{event.best.objective:.3f}",
                out,
            )
        elif isinstance(event, SearchStep):
            echo(
                f"  step {event.step}/{event.steps}: loss {event.loss:.4f}  "
                f"{short(event.best_prompt)}",
                out,
            )

    # --- the block of text being written (terminal only) ---------------------------------------
    def _refresh(self) -> None:
        while not self._stop.wait(self._refresh_s):
            self.draw()

    def draw(self) -> None:
        """Redraw the block from the tap's current batch (nothing when none is being written)."""
        assert self._tap is not None
        batch = self._tap.snapshot()
        with self._lock:
            if batch is None or batch.closed:
                self._erase()
            elif batch.seq != self._drawn_seq:
                self._erase()
                size = shutil.get_terminal_size()
                lines = writing_lines(batch, width=size.columns, height=max(3, size.lines // 2))
                for line in lines:
                    self.out.write(line + "\n")
                self._block_lines, self._drawn_seq = len(lines), batch.seq
            self.out.flush()

    def _erase(self) -> None:
        if self._block_lines:
            # Up to the block's first line, then clear to the end of the screen.
            self.out.write(f"\x1b[{self._block_lines}F\x1b[J")
            self._block_lines, self._drawn_seq = 0, None


def writing_lines(batch: LiveBatch, *, width: int, height: int) -> list[str]:
    """The block's lines (terminal-safe, each at most ``width`` columns): a headline, then one
    line per row ("#  tokens  scores  …last words"), at most ``height`` lines in all."""
    ended = f", {batch.rows_done} ended" if batch.rows_done else ""
    head = f"  … {batch.role} writing {len(batch.rows)} row(s){ended}, up to {batch.max_new_tokens} tokens each"
    lines = [terminal_safe(head)[:width]]
    shown = batch.rows[: max(0, height - 2)]
    for index, row in enumerate(shown):
        scores = " ".join(f"{k} {v:.3f}" for k, v in batch.scores(index).items())
        lead = f"  {index:>3} {row.tokens:>4} tok {scores} "
        room = max(10, width - len(lead) - 1)
        tail = terminal_safe(" ".join(row.text.split()))
        tail = tail if len(tail) <= room else "…" + tail[-(room - 1) :]
        lines.append((lead + tail)[:width])
    if len(shown) < len(batch.rows):
        lines.append(f"  … and {len(batch.rows) - len(shown)} more row(s)"[:width])
    return lines


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
        # The unit key holds a snippet id from the dataset.
        current = terminal_safe(progress.current) if progress.current else ""
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
        echo(
            f"[{progress.done}/{progress.total} units] {progress.errors} failed · "
            f"{progress.rate * 3600:.1f} units/h · ETA {eta}{doing}",
            self.out,
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
        "",
        f"run {run_id} · {method_label(result.method)} on "
        f"{result.snippet_id} ({result.domain}, length {result.length}, α {result.alpha})",
        f"Mem {result.mem:.3f} · LCS_P {result.lcs_p:.3f} · Dis {dis} · objective "
        f"{result.objective:.3f}",
        f"cost: {c.victim_queries} victim / {c.attacker_queries} attacker queries, "
        f"{c.generated_tokens} tokens, {c.wall_seconds:.1f} s",
        f"prompt: {short(result.prompt, 200)}",
        f"output: {short(result.output, 200)}",
    ]
    lines += leakage.describe(result.verbatim)
    if has_bounds(result.verbatim):  # the bounds around p_z, in words (docs/method.md §14)
        lines.append(describe_bracket(result.verbatim))
    for line in lines:  # one line each: a newline inside a value is shown, not obeyed
        echo(line, out)


def print_runs(runs: list[RunRecord], out: TextIO | None = None) -> None:
    """The run list as a table: id, kind, status, units done/total, failed, updated, title."""
    kind_width = max([7, *(len(run["kind"]) for run in runs)])  # "document" is 8 wide
    echo(
        f"{'id':>4}  {'kind':<{kind_width}} {'status':<11} {'units':>9} {'failed':>6}  "
        f"{'updated':<16}  title",
        out,
    )
    for run in runs:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run["updated"]))
        echo(
            f"{run['id']:>4}  {run['kind']:<{kind_width}} {run['status']:<11} "
            f"{units_text(run):>9} {run['units_error']:>6}  {when:<16}  {run['title']}",
            out,
        )


def print_corpus(
    summary: dict[str, int], snippets: Iterable[Snippet], out: TextIO | None = None
) -> None:
    """The demo corpus: counts per domain, then one line per snippet (id, domain, words)."""
    echo("built-in demo corpus: " + ", ".join(f"{d} {n}" for d, n in summary.items()), out)
    echo(f"{'id':<40} {'domain':<8} {'words':>6}  source", out)
    for snippet in snippets:
        echo(
            f"{terminal_safe(snippet.id):<40} {terminal_safe(snippet.domain):<8} "
            f"{len(snippet.text.split()):>6}  {short(snippet.source, 40)}",
            out,
        )


# Every path option of every command is one of these three (argparse dest → how a message names
# it); tests/fuzz/test_fuzz_paths.py finds the path options in the parser's declarations and fails
# on one that is in none of them. All are checked by check_output_paths (memprobe_core.user_paths)
# before the command does any work, so a refused path leaves no run and no store behind.

# Every option naming a file a command writes.
OUTPUT_FLAGS: dict[str, str] = {
    "csv": "--csv",  # report, ner, diff, document
    "table_csv": "--table-csv",
    "membership_csv": "--membership-csv",
    "controls_csv": "--controls-csv",
    "roc_csv": "--roc-csv",
    "candidates_csv": "--candidates-csv",
    "html": "--html",
    "names_csv": "--names-csv",  # ner
    "export": "--export",  # corpus
    "changed_csv": "--changed-csv",  # diff
    "junit": "--junit",  # gate, audit
}


# Every option naming a file a command reads: an output must not be one of them (`diff --html
# runs.sqlite` replaced the run store; `gate --junit policy.toml` the policy).
INPUT_FLAGS: dict[str, str] = {
    "store": "--store",  # read and written: checked as a store (created when missing)
    "policy": "--policy",
    "dataset": "the dataset",
    "file": "--file",  # probe
    "heldout": "--heldout",
    "suspect": "the suspect set",
    "dc_pdd_corpus": "--dc-pdd-corpus",
    "reference": "the reference",  # nv-recall
    "generated": "the generated text",  # nv-recall
    "document": "the document",
    "in_names": "--in-names",  # ner
    "out_names": "--out-names",
    "in_conll": "--in-conll",
    "prompts": "--prompts",
}
# Inputs that may name a folder instead of a file (a CoNLL-2003 folder of split files).
INPUT_FOLDERS_TOO: frozenset[str] = frozenset({"in_conll"})


def check_output_paths(args: Any) -> str | None:
    """The first path option of ``args`` that cannot be used, as a message (``None``: all fine):
    an input that is not a readable regular file, a store that cannot be one, an output that
    cannot be written (:mod:`memprobe_core.user_paths`: a symlink loop, a pipe, a device, a
    folder, a /proc file, a missing folder …), an output naming the same file as another output,
    or an output naming a file the command reads (the run store, a policy, a dataset).

    Checked up front: ``ner --csv DIR`` was refused only after 385 s of scoring, and a symlink
    loop given as any path was a traceback.
    """
    from memprobe_core.paths import default_store_path
    from memprobe_core.report.export import ExportError, writable_target
    from memprobe_core.user_paths import message, reading_problem, store_problem

    seen: dict[str, str] = {}
    for dest, flag in INPUT_FLAGS.items():
        path = getattr(args, dest, None)
        given = path is not None
        if dest == "store" and path is None and hasattr(args, "command"):
            path = default_store_path()  # the store every command opens by default
        if not isinstance(path, (str, Path)):
            continue
        if dest == "store":
            problem = store_problem(path)
        else:
            problem = reading_problem(path, folder=dest in INPUT_FOLDERS_TOO)
        if problem:
            named = flag if given else _default_store_named()
            return message(named, path, problem)
        seen[os.path.realpath(path)] = flag
        if dest == "store" or _is_sqlite(path):
            # SQLite keeps a store's pending writes and locks in files beside it: writing one
            # corrupts the store (`report 1 --csv runs.sqlite-wal` while an audit writes).
            for suffix in SQLITE_SIDECARS:
                side = f"the SQLite {suffix} file of {flag if given else 'the run store'}"
                seen[os.path.realpath(path) + suffix] = side
                seen[os.path.realpath(os.path.abspath(path) + suffix)] = side
    inputs = dict(seen)
    for dest, flag in OUTPUT_FLAGS.items():
        path = getattr(args, dest, None)
        if path is None:
            continue
        try:
            target = writable_target(path, flag)
        except ExportError as exc:
            return str(exc)
        real = os.path.realpath(target)
        same = seen.get(real)
        if same and real in inputs:
            return f"{flag} {target} is {same}, which this command reads; write elsewhere"
        if same:
            return f"{same} and {flag} both name {target}; give each output its own file"
        seen[real] = flag
    return None


# The files SQLite writes beside a database named NAME: NAME-wal, NAME-shm, NAME-journal.
SQLITE_SIDECARS: tuple[str, ...] = ("-wal", "-shm", "-journal")


def _is_sqlite(path: str | Path) -> bool:
    """Whether ``path`` (an input already checked as a readable regular file, or a folder)
    starts with SQLite's header."""
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _default_store_named() -> str:
    """How a message names the store a command opens when no ``--store`` is given."""
    if os.environ.get("MEMPROBE_STORE"):
        return "the run store (MEMPROBE_STORE; pick another with --store PATH)"
    return "the default run store (pick another with --store PATH)"
