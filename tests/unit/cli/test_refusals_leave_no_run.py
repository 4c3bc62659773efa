"""A refusal never leaves a stored run behind: every flag combination a command refuses is
refused before it stores a run (the store's run count is unchanged), with one line naming the
flag. The cases are generated from the parsers: every Ray flag of every command that offers
one, given without ``--executor ray``; and the document command's own conflicts (Ray for a
continuation, audit-only Ray flags on a map, endpoint flags on a resume)."""

from __future__ import annotations

import argparse
import importlib

import pytest

import memprobe_core.models as models_pkg
from memprobe_core.cli import main as run_cli
from memprobe_core.store import Store
from tests.helpers.tiny_models import tiny_hf_generator
from tests.unit.documents.test_continuation import BOOK, chat_victim

# The module (the package exports its `main` function under the same name).
cli_main = importlib.import_module("memprobe_core.cli.main")
RAY_GROUP = "where units run"
SHORT = " ".join(["the licence of this work is granted to any person who asks for a copy"] * 12)
SMALL = ["--prefix-tokens", "8", "--suffix-tokens", "8", "--stride", "8", "--batch-windows", "4"]


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli_main.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _ray_flags(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """``(flag, a value it accepts)`` of the parser's Ray options (not --executor itself)."""
    groups = [g for g in parser._action_groups if g.title == RAY_GROUP]
    found = []
    for group in groups:
        for action in group._group_actions:
            flag = action.option_strings[0]
            if flag != "--executor":
                found.append((flag, "auto" if action.type is None else "2"))
    return found


PARSERS = _subcommands()
RAY_CASES = [
    (command, flag, value)
    for command, parser in sorted(PARSERS.items())
    for flag, value in _ray_flags(parser)
]


@pytest.fixture
def models(monkeypatch):
    """``tiny``: a tiny random Llama (a map's white-box victim); ``scripted``: a chat victim."""
    tiny = tiny_hf_generator(seed=7, adds_bos=True)

    def load(name, *, backend=None, **options):
        if name == "tiny":
            return tiny
        if name == "scripted":
            return chat_victim()
        raise models_pkg.ModelError(f"model {name!r} is unknown")

    monkeypatch.setattr(models_pkg, "load", load, raising=False)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "book.txt").write_text(BOOK, encoding="utf-8")
    (tmp_path / "short.txt").write_text(SHORT, encoding="utf-8")
    for name in ("a", "b"):
        texts = [f"text {name} number {i} of a set of eight" for i in range(8)]
        (tmp_path / f"{name}.txt").write_text("\n\n".join(texts), encoding="utf-8")
    store = Store(tmp_path / "runs.sqlite")
    store.create_run("audit", config={}, title="already there")
    return tmp_path


def _least(command: str, where) -> list[str]:
    """Arguments that make ``command`` go as far as it can with the stand-in models."""
    return {
        "audit": [str(where / "a.txt"), "--victim", "tiny"],
        "infer": [
            *[str(where / "a.txt"), "--heldout", str(where / "b.txt")],
            *["--txt-mode", "blocks", "--victim", "tiny"],
        ],
        "resume": ["1"],
        "document": [str(where / "short.txt"), "--victim", "tiny", *SMALL],
    }[command]


def _refused(where, argv, flag, capsys) -> None:
    code = run_cli(["--store", str(where / "runs.sqlite"), *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and flag.lstrip("-").split("-")[0] in lines[0], err
    assert len(Store(where / "runs.sqlite").list_runs()) == 1  # nothing stored


def test_every_command_with_ray_flags_is_covered():
    assert {c for c, _, _ in RAY_CASES} == {"audit", "infer", "resume", "document"}


@pytest.mark.parametrize(("command", "flag", "value"), RAY_CASES)
def test_a_ray_flag_without_the_ray_executor_stores_no_run(
    command, flag, value, files, models, capsys
):
    _refused(files, [command, *_least(command, files), flag, value], flag, capsys)


def test_the_map_those_flags_were_given_to_is_stored_without_them(files, models, capsys):
    # The same command without the refused flag does store a run: the refusal is the flag's.
    argv = ["--store", str(files / "runs.sqlite"), "document", *_least("document", files)]
    assert run_cli(argv) == 0
    assert len(Store(files / "runs.sqlite").list_runs()) == 2


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--mode", "continue", "--executor", "ray"], "--executor"),
        (["--switch-endpoint"], "--switch-endpoint"),
        (["--switch-endpoint", "--base-url", "http://127.0.0.1:9/v1"], "--switch-endpoint"),
    ],
)
def test_a_document_s_refused_flags_store_no_run(argv, flag, files, models, capsys):
    doc = [str(files / "book.txt"), "--victim", "scripted"]
    _refused(files, ["document", *doc, *argv], flag, capsys)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--base-url", "http://127.0.0.1:9/v1"], "--base-url"),
        (["--backend", "openai"], "--backend"),
        (["--switch-endpoint"], "--switch-endpoint"),
    ],
)
def test_a_resume_s_endpoint_flags_are_refused_before_anything(argv, flag, files, models, capsys):
    store = Store(files / "runs.sqlite")
    store.create_run("document", config={"mode": "continue"})
    code = run_cli(["--store", str(files / "runs.sqlite"), "document", "--resume", "2", *argv])
    err = capsys.readouterr().err
    assert code == 2 and flag in err and len(err.strip().splitlines()) == 1, err
    assert len(store.list_runs()) == 2


@pytest.mark.parametrize("flag", ["--base-url", "--backend"])
def test_show_refuses_endpoint_flags(flag, files, capsys):
    value = "http://127.0.0.1:9/v1" if flag == "--base-url" else "openai"
    code = run_cli(["--store", str(files / "runs.sqlite"), "document", "--show", "1", flag, value])
    err = capsys.readouterr().err
    assert code == 2 and f"{flag} does not apply to --show: nothing is asked" in err


def test_a_map_has_no_endpoint_to_switch(files, capsys):
    store = Store(files / "runs.sqlite")
    run_id = store.create_run("document", config={"mode": "map", "victim": "tiny"})
    before = store.get_run(run_id)
    argv = ["--resume", str(run_id), "--switch-endpoint", "--base-url", "http://127.0.0.1:9/v1"]
    assert run_cli(["--store", str(files / "runs.sqlite"), "document", *argv]) == 2
    err = capsys.readouterr().err
    assert "is an extraction map, scored on the victim's own weights: it has no endpoint" in err
    assert store.get_run(run_id)["config"] == before["config"]
