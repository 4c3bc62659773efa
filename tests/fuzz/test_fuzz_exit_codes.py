"""The exit-code contract under injected faults: every ``memprobe`` command, an exception raised
at a call Hypothesis draws along its path, exits with a code of the contract (0, 1, 2, 3, 70,
130; ``memprobe_core.cli.errors``), and ``gate`` exits 0 or 1 only once it has checked the
policy (a crash is never a verdict).

The commands are those of ``build_parser()``'s sub-parsers, so a new command fails
:func:`test_every_command_has_cheap_arguments` until it is given arguments here. The fault is
injected with :func:`sys.settrace`: every call into a ``memprobe_core`` function is counted, and
the N-th raises the drawn exception as it starts (N drawn as a share of the calls a clean run makes,
plus one for no fault at all). Counts of examples, faults that fired and codes seen are
printed at the end of the module (``pytest -s``), and Hypothesis's own with
``--hypothesis-show-statistics``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memprobe_core
from memprobe_core.cli import dashboard as dashboard_cli
from memprobe_core.cli import main
from memprobe_core.cli import release as release_cli
from memprobe_core.cli.errors import CONTRACT
from memprobe_core.cli.main import build_parser
from memprobe_core.errors import UsageError
from memprobe_core.models import clear_cache
from memprobe_core.models.base import ModelError
from memprobe_core.store.schema import StoreError
from tests.helpers.ner_models import tiny_ner
from tests.unit.release.conftest import add_run

PACKAGE = str(Path(memprobe_core.__file__).parent)
MAIN_FILE = str(Path(memprobe_core.__file__).parent / "cli" / "main.py")
WORDS = " ".join(f"w{i}" for i in range(60))
UNITS = [(f"s{i}", "member" if i % 2 else "nonmember", 0.1 * i, i == 3, 1.0 + i) for i in range(4)]
# Raised at the drawn call: bugs (built-in errors), memprobe's own errors, and the interrupts.
FAULTS: list[Callable[[], BaseException]] = [
    lambda: RecursionError("maximum recursion depth exceeded"),
    lambda: MemoryError(),
    lambda: RuntimeError("Symlink loop from '/tmp/x'"),
    lambda: AssertionError("an invariant did not hold"),
    lambda: KeyError("missing"),
    lambda: TypeError("unsupported operand"),
    lambda: AttributeError("'NoneType' object has no attribute 'x'"),
    lambda: ZeroDivisionError("division by zero"),
    lambda: ValueError("a bad value"),
    lambda: OSError(28, "No space left on device"),
    lambda: BrokenPipeError(32, "Broken pipe"),
    lambda: sqlite3.OperationalError("database is locked"),
    lambda: UsageError("injected usage error"),
    lambda: ModelError("injected model error"),
    lambda: StoreError("injected store error"),
    lambda: KeyboardInterrupt(),
    lambda: SystemExit(1),
    lambda: StopIteration(),
    lambda: GeneratorExit(),
]
EXAMPLES = max(4, settings.default.max_examples // 4)  # per command: 10 in the short profile
TALLY: Counter[str] = Counter()


def _commands() -> list[str]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


class _StoppedServer:
    """A dashboard server that has already stopped, cleanly (no Streamlit process started)."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.command = command

    def wait(self, timeout: float | None = None) -> int:
        return 0

    def poll(self) -> int:
        return 0


@pytest.fixture(scope="module", autouse=True)
def no_dashboard_server() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        stand_in = SimpleNamespace(Popen=_StoppedServer, TimeoutExpired=subprocess.TimeoutExpired)
        patch.setattr(dashboard_cli, "subprocess", stand_in)
        yield


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a store (two finished labelled audits of the same units), a policy, a
    dataset, two texts, a document and a tiny NER model: every command's inputs."""
    folder = tmp_path_factory.mktemp("contract")
    store = folder / "runs.sqlite"
    add_run(store, "a", UNITS)
    add_run(store, "b", UNITS)
    (folder / "policy.toml").write_text(
        "[limits]\nmax_mean_mem = 0.2\n[increase]\nmean_mem = 0.1\n"
    )
    for name, mark in (("data.jsonl", "x"), ("held.jsonl", "y")):  # infer needs 8 texts a set
        rows = [json.dumps({"text": f"{mark}{i} {WORDS}"}) for i in range(8)]
        (folder / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    (folder / "one.jsonl").write_text(json.dumps({"text": WORDS}) + "\n", encoding="utf-8")
    (folder / "ref.txt").write_text(WORDS + "\n", encoding="utf-8")
    (folder / "gen.txt").write_text(WORDS[:80] + " other words\n", encoding="utf-8")
    (folder / "doc.txt").write_text((WORDS + ".\n\n") * 3, encoding="utf-8")
    ner = tiny_ner()
    ner.model.save_pretrained(folder / "ner")
    ner.tokenizer.save_pretrained(folder / "ner")
    (folder / "in.txt").write_text("john smithson\nanna lee\nkim park\n", encoding="utf-8")
    (folder / "out.txt").write_text("maria\npark kim\nlee anna\n", encoding="utf-8")
    return folder


def _argv(command: str, d: Path) -> list[str]:
    """Cheap arguments of ``command`` in folder ``d`` (fake models, tiny inputs)."""
    fake = ["--victim", "fake", "--base", "fake", "--no-signals"]
    table = {
        "probe": ["probe", WORDS, "--method", "ps_base", "--length", "30", *fake],
        "audit": ["audit", str(d / "one.jsonl"), "--methods", "ps_base", "--lengths", "30", *fake],
        "resume": ["resume", "1"],
        "infer": ["infer", str(d / "data.jsonl"), "--heldout", str(d / "held.jsonl")]
        + ["--lengths", "30", "--victim", "fake", "--split-tokenizer", "whitespace"],
        "runs": ["runs"],
        "report": ["report", "1", "--csv", str(d / "report.csv")],
        "diff": ["diff", "1", "2", "--resamples", "100", "--html", str(d / "diff.html")],
        "gate": ["gate", "2", "--policy", str(d / "policy.toml"), "--resamples", "100"]
        + ["--baseline", "1", "--junit", str(d / "gate.xml")],
        "nv-recall": ["nv-recall", str(d / "ref.txt"), str(d / "gen.txt")],
        "document": ["document", str(d / "doc.txt"), "--victim", "fake", "--mode", "continue"]
        + ["--max-turns", "2", "--opening-words", "20", "--heldback-words", "20"],
        "corpus": ["corpus", "--export", str(d / "corpus.jsonl")],
        "ner": ["ner", "--model", str(d / "ner"), "--in-names", str(d / "in.txt")]
        + ["--out-names", str(d / "out.txt"), "--device", "cpu", "--pairs", "2"],
        "plugins": ["plugins", "--json"],
        # The server is a stand-in that stops at once (module fixture below): the faults land in
        # memprobe's own path around it (the folder, the flags, the environment, the stop).
        "dashboard": ["dashboard", "--port", "8599"],
    }
    return ["--store", str(d / "runs.sqlite"), *table[command]]


class _Injector:
    """Counts calls into ``memprobe_core`` (the command's own ``main`` frame excepted) and
    raises ``fault`` as the ``at``-th one starts (``at`` 0: count only)."""

    def __init__(self, at: int, fault: BaseException | None) -> None:
        self.at, self.fault, self.calls, self.fired = at, fault, 0, False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(PACKAGE):
            return None
        if code.co_filename == MAIN_FILE and code.co_name == "main":
            return None
        self.calls += 1
        if self.calls == self.at and self.fault is not None:
            self.fired = True
            sys.settrace(None)  # one fault a run; the exception unwinds untraced
            raise self.fault
        return None


def _run(argv: list[str], injector: _Injector) -> int:
    clear_cache()  # a fault while a model loaded must not leave a half-made one for the next
    previous = sys.gettrace()
    # main() points stdout at /dev/null after a BrokenPipeError (the reader went away): put it
    # back, or an injected one silences the rest of the session.
    stdout = os.dup(1)
    sys.settrace(injector)
    try:
        return main(argv)
    finally:
        sys.settrace(previous)
        os.dup2(stdout, 1)
        os.close(stdout)


@pytest.fixture(scope="module")
def clean_calls(template: Path) -> Iterator[dict[str, int]]:
    """How many memprobe_core calls each command makes on a clean run (and that it succeeds)."""
    calls, seconds = {}, {}
    for command in _commands():
        work = template.parent / f"clean-{command}"
        shutil.copytree(template, work)
        injector = _Injector(0, None)
        started = time.monotonic()
        code = _run(_argv(command, work), injector)
        assert code in (0, 1), f"{command} failed without a fault: exit {code}"
        calls[command] = injector.calls
        seconds[command] = round(time.monotonic() - started, 2)
    yield calls
    print(f"\nexit-code contract: clean calls per command {calls}, seconds {seconds}")
    print(f"exit-code contract: {dict(sorted(TALLY.items()))}")


def test_every_command_has_cheap_arguments(template: Path) -> None:
    for command in _commands():
        assert _argv(command, template)  # a KeyError names a command without arguments here


@pytest.mark.parametrize("command", _commands())
def test_an_injected_fault_exits_within_the_contract(
    command: str, template: Path, clean_calls: dict[str, int], tmp_path_factory
) -> None:
    evaluated: list[bool] = []
    original = release_cli.run_gate

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        evaluated.append(True)  # run_gate returned: the policy was checked
        return result

    calls = clean_calls[command]

    # A share of the clean run's calls, so faults land all along the path (integers drawn
    # directly crowd at the start: in building the parser); the last value is no fault at all.
    @settings(max_examples=EXAMPLES)
    @given(share=st.floats(0.0, 1.0), fault=st.sampled_from(FAULTS))
    def check(share: float, fault: Callable[[], BaseException]) -> None:
        at = 1 + round(share * calls)
        work = tmp_path_factory.mktemp(command)
        shutil.rmtree(work)
        shutil.copytree(template, work)
        evaluated.clear()
        injector = _Injector(at, fault())
        code = _run(_argv(command, work), injector)
        TALLY["examples"] += 1
        TALLY[f"fired {injector.fired}"] += 1
        TALLY[f"exit {code}"] += 1
        TALLY[f"{command} examples"] += 1
        assert code in CONTRACT, (command, at, repr(injector.fault), code)
        if command == "gate" and code in (0, 1):
            assert evaluated, (at, repr(injector.fault), code)  # a verdict without a check

    release_cli.run_gate = spy  # type: ignore[assignment]
    before = TALLY[f"{command} examples"]
    try:
        check()
    finally:
        release_cli.run_gate = original  # type: ignore[assignment]
    # docs/testing.md counts them: 10 a command in the short profile, 750 in the long one.
    assert TALLY[f"{command} examples"] - before == EXAMPLES
