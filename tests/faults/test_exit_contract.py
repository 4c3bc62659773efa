"""The exit-code contract of ``memprobe`` (``memprobe_core.cli.errors``): an unexpected exception
is one line and exit 70, never 1 (a gate's breach, an audit's failed units); the traceback only
with ``--verbose``. ``tests/fuzz/test_fuzz_exit_codes.py`` injects faults along every command."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from memprobe_core.cli import main
from memprobe_core.cli import release as release_cli
from memprobe_core.cli.errors import CONTRACT, EXIT_INTERNAL
from tests.faults.helpers import ROOT, one_line_error
from tests.unit.release.conftest import add_run

CLI_MAIN = sys.modules["memprobe_core.cli.main"]  # the module (the package exports the function)
INTERNAL = "(a bug in memprobe, not a verdict; --verbose shows the traceback)"


@pytest.fixture
def gate_argv(tmp_path) -> list[str]:
    store = tmp_path / "runs.sqlite"
    run = add_run(store, "v", [("s1", None, 0.1, False, None)])
    policy = tmp_path / "policy.toml"
    policy.write_text("[limits]\nmax_mean_mem = 1\n", encoding="utf-8")
    return ["--store", str(store), "gate", str(run), "--policy", str(policy)]


@pytest.mark.parametrize(
    "fault",
    [RecursionError("maximum recursion depth exceeded"), RuntimeError("Symlink loop"), KeyError(3)],
)
def test_a_bug_in_the_gate_is_one_line_and_exit_70(gate_argv, monkeypatch, capsys, fault):
    def run_gate(*args, **kwargs):
        raise fault

    monkeypatch.setattr(release_cli, "run_gate", run_gate)
    assert main(gate_argv) == EXIT_INTERNAL == 70
    captured = capsys.readouterr()
    line = one_line_error(captured.err)
    assert line == f"memprobe: internal error: {type(fault).__name__}: {fault} {INTERNAL}"
    assert captured.out == ""  # no verdict printed


def test_verbose_shows_the_traceback(gate_argv, monkeypatch, capsys) -> None:
    def run_gate(*args, **kwargs):
        raise AssertionError("an invariant \x1b[2J did not hold")

    monkeypatch.setattr(release_cli, "run_gate", run_gate)
    assert main(["-v", *gate_argv]) == 70
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in run_gate" in err
    last = err.strip().splitlines()[-1]
    # Terminal-safe: the escape shows as text, it is not sent to the terminal.
    assert last == (
        "memprobe: internal error: AssertionError: an invariant \\x1b[2J did not hold "
        "(a bug in memprobe, not a verdict)"
    )


@pytest.mark.parametrize(("returned", "shown"), [(5, "exit code 5"), (None, "TypeError")])
def test_a_code_outside_the_contract_becomes_70(gate_argv, monkeypatch, capsys, returned, shown):
    parser = CLI_MAIN.build_parser

    def build():  # a gate handler that returns a code outside the contract
        built = parser()
        (sub,) = [a for a in built._actions if isinstance(a, argparse._SubParsersAction)]
        sub.choices["gate"].set_defaults(handler=lambda args: returned)
        return built

    monkeypatch.setattr(CLI_MAIN, "build_parser", build)
    assert main(gate_argv) == 70
    assert shown in one_line_error(capsys.readouterr().err)


@pytest.mark.parametrize("code", [1, 3, "text"])
def test_a_system_exit_from_a_command_is_not_passed_on(gate_argv, monkeypatch, capsys, code):
    def run_gate(*args, **kwargs):
        sys.exit(code)

    monkeypatch.setattr(release_cli, "run_gate", run_gate)
    assert main(gate_argv) == 70
    assert one_line_error(capsys.readouterr().err).startswith(
        "memprobe: internal error: SystemExit"
    )


def test_interrupts_and_a_reader_gone_keep_their_codes(gate_argv, monkeypatch, capsys) -> None:
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(release_cli, "run_gate", interrupted)
    assert main(gate_argv) == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def test_argparse_exits_only_0_or_2(capsys) -> None:
    assert main(["--help"]) == 0
    assert main(["gate"]) == 2  # RUN and --policy missing
    assert main(["no-such-command"]) == 2


def test_a_fault_outside_the_commands_handlers_still_exits_70() -> None:
    # In a real process (Python would exit 1 for an exception leaving main): the parser fails.
    driver = (
        "import sys\nimport memprobe_core.cli\nm = sys.modules['memprobe_core.cli.main']\n"
        "def broken():\n    raise RecursionError('maximum recursion depth exceeded')\n"
        "m.build_parser = broken\nsys.exit(m.main(['runs']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", driver], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 70, done.stderr
    assert done.stderr == (
        "memprobe: internal error: RecursionError outside a command "
        "(a bug in memprobe, not a verdict)\n"
    )


def test_the_help_documents_code_70(capsys) -> None:
    for argv in (["--help"], ["gate", "--help"], ["diff", "--help"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "70   internal error: a bug in memprobe, not a verdict" in out, argv
    assert main(["gate", "--help"]) == 0
    assert "0 and 1 only come from a policy that was checked" in " ".join(
        capsys.readouterr().out.split()
    )
    assert sorted(CONTRACT) == [0, 1, 2, 3, 70, 130]
