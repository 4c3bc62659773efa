"""Terminal escape sequences in data, titles, model names and model outputs never reach the
terminal raw: every line the ``memprobe`` command prints shows them as visible escapes.

A dataset id such as ``\\x1b]0;pwned\\x07`` would retitle the window, ``\\x1b[2J`` clear the
screen, ``\\x9b31m`` (a one-byte CSI) colour what follows, ``\\u202e`` reverse the line.
"""

from __future__ import annotations

import io
import json
import re

import pytest

import memprobe_core.models as models_pkg
from memprobe_core.audit import AuditProgress
from memprobe_core.cli import main
from memprobe_core.cli.output import ProgressBar, terminal_json, terminal_safe
from memprobe_core.models.base import ModelError
from memprobe_core.store import UnitKey
from tests.helpers.scripted_models import parrot

OSC = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
CSI = "\x9b31m"
RLO = "\u202e"
HOSTILE = f"{OSC}a{CLEAR}b{CSI}c{RLO}d"
WORDS = " ".join(f"w{i}" for i in range(60))

# What must never reach a terminal: C0 but tab and newline, DEL, C1, U+2028/9, bidi controls.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def assert_clean(text: str) -> None:
    found = sorted({f"U+{ord(c):04X}" for c in RAW.findall(text)})
    assert not found, f"raw control characters reached the terminal: {found}"


@pytest.fixture
def hostile_models(monkeypatch):
    """``models.load`` gives parrots that answer with escape sequences, named as asked."""

    def load(name, *, backend=None, **options):
        if not name.startswith("test"):
            raise ModelError(f"model {name!r} is unknown")
        return parrot(name, f"w20 w21 {OSC} w22 {CLEAR} w23 {CSI} w24 {RLO} w25")

    monkeypatch.setattr(models_pkg, "load", load, raising=False)


MODELS = ["--victim", f"test-v{OSC}", "--base", f"test-b{RLO}", "--attacker", f"test-a{CSI}"]


# --- the helper ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw, shown",
    [
        (OSC, r"\x1b]0;pwned\x07"),
        (CLEAR, r"\x1b[2J"),
        (CSI, r"\x9b31m"),
        (RLO, r"\u202e"),
        ("a\u2066b\u2069", r"a\u2066b\u2069"),
        ("line\u2028sep", r"line\u2028sep"),
        ("del\x7f", r"del\x7f"),
        ("cr\roverwrite", r"cr\x0doverwrite"),
        ("tab\tkept", "tab\tkept"),
        ("one\ntwo", r"one\x0atwo"),
        ("plain ünïcode — fine", "plain ünïcode — fine"),
    ],
)
def test_terminal_safe_shows_control_characters(raw, shown):
    assert terminal_safe(raw) == shown


def test_terminal_safe_keeps_the_lines_of_a_block():
    assert terminal_safe(f"a{CLEAR}\r\nb\nc", multiline=True) == "a\\x1b[2J\nb\nc"


def test_terminal_json_is_clean_and_parses_to_the_same_value():
    value = {"id": HOSTILE, "u": "\u2028\x7f é"}
    text = terminal_json(value)
    assert_clean(text)
    assert json.loads(text) == value


def test_progress_line_and_tqdm_bar_are_clean():
    out = io.StringIO()
    bar = ProgressBar(out)
    bar(AuditProgress(0, 2, 0, 0.0, None, UnitKey(HOSTILE, "ps_base", 30), 0.0))
    assert_clean(out.getvalue())
    assert r"\x1b]0;pwned\x07" in out.getvalue()

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Terminal()
    bar = ProgressBar(tty)
    bar(AuditProgress(1, 2, 0, 0.0, None, UnitKey(HOSTILE, "ps_base", 30), 0.0))
    bar.close()
    drawn = tty.getvalue().replace("\r", "")  # tqdm's own redraw
    assert "pwned" in drawn
    assert OSC not in drawn and CSI not in drawn and RLO not in drawn and CLEAR not in drawn


# --- the commands ----------------------------------------------------------------------------------
def test_every_command_prints_hostile_text_escaped(tmp_path, hostile_models, capsys):
    data = tmp_path / f"data{OSC}.jsonl"  # a file name is shown too (rejected rows, notes)
    rows = [
        {"id": f"id{OSC}1", "text": WORDS, "domain": f"dom{RLO}{CLEAR}"},
        {"id": f"id{CSI}2", "text": WORDS, "domain": "legal"},
        {"id": f"id{OSC}3", "text": "   "},  # rejected: its reason is printed
    ]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    base = ["--store", str(tmp_path / "runs.sqlite")]
    seen = []

    def run(argv, code=0):
        assert main([*base, *argv]) == code, capsys.readouterr().err
        captured = capsys.readouterr()
        seen.append(captured.out + captured.err)
        assert_clean(captured.out)
        assert_clean(captured.err)
        return captured

    audit = ["audit", str(data), "--id-column", "id", "--domain-column", "domain"]
    audit += [
        "--methods",
        "ps_base",
        "ps_inst",
        "--lengths",
        "30",
        "--title",
        f"T{HOSTILE}\nforged line",
    ]
    got = run([*audit, *MODELS])
    assert r"id\x1b]0;pwned\x071" in got.out + got.err  # still recognisable
    assert r"data\x1b]0;pwned\x07.jsonl: row 3 skipped" in got.err
    got = run(["runs"])
    assert r"T\x1b]0;pwned\x07a\x1b[2Jb\x9b31mc\u202ed\x0aforged line" in got.out  # one line
    run(["runs", "--json"])
    got = run(["report", "1"])
    assert r"test-v\x1b]0;pwned\x07" in got.out
    got = run(["report", "1", "--json"])
    json.loads(got.out)
    run(["resume", "1"])
    # probe: a file's first snippet (the note names it), the live table, the result lines
    probe = ["probe", "--file", str(data), "--domain", f"d{RLO}", "--length", "30"]
    got = run([*probe, "--method", "interactive", "--rounds", "1", "--n", "2", *MODELS])
    assert r"data\x1b]0;pwned\x07.jsonl has 2 snippets" in got.err
    assert r"w22 \x1b[2J w23" in got.out  # the model's output, shown escaped
    got = run([*probe, "--method", "ps_inst", "--json", *MODELS])
    result = json.loads(got.out)
    assert OSC in result["output"]  # JSON keeps the exact text, escaped as \u001b
    assert all("pwned" in text for text in seen)


def test_corpus_show_of_a_hostile_snippet_is_escaped(tmp_path, capsys, monkeypatch):
    from memprobe_core.cli import corpus
    from memprobe_core.snippets.split import Snippet

    hostile = Snippet(id=f"x{OSC}", text=f"line one {CLEAR}\nline two {RLO}", domain=f"d{CSI}")
    monkeypatch.setattr(corpus, "demo_corpus", lambda domains=None: [hostile])
    monkeypatch.setattr(corpus, "_set_line", lambda: f"set {OSC}")
    assert main(["corpus"]) == 0
    out = capsys.readouterr().out
    assert_clean(out)
    assert r"x\x1b]0;pwned\x07" in out and r"d\x9b31m" in out
    assert main(["corpus", "--show", f"x{OSC}"]) == 0
    out = capsys.readouterr().out
    assert_clean(out)
    assert out == "line one \\x1b[2J\nline two \\u202e\n"  # the block keeps its lines


def test_the_error_line_and_log_lines_show_control_characters_escaped(
    tmp_path, monkeypatch, capsys
):
    import logging

    from memprobe_core.cli import main as cli_main
    from memprobe_core.cli import runs as runs_command
    from memprobe_core.errors import UsageError

    def hostile(args):
        logging.getLogger("memprobe_core.runs.unit").warning("unit \x1b]0;pwned\x07/x failed")
        raise UsageError("snippet '\x1b[2Jid\u202e' is bad")

    monkeypatch.setattr(runs_command, "run", hostile)
    assert cli_main(["--store", str(tmp_path / "s.sqlite"), "runs"]) == 2
    err = capsys.readouterr().err
    assert not set(err) & {"\x1b", "\x07", "\u202e"}
    assert "\\x1b]0;pwned\\x07" in err  # the warning, shown
    assert "\\x1b[2Jid\\u202e" in err  # the error line, shown
