"""The hostile trial of issue 51, as run: a symlink loop given as a path to each of the commands
(their real handlers), and the other kinds of path a user can name; each is one line, exit 2,
naming the option, with no run stored (the fuzzer, tests/fuzz/test_fuzz_paths.py, draws every
path option; this keeps the trial's own command lines)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memprobe_core.cli.main import main


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMPROBE_STORE", str(tmp_path / "runs.sqlite"))
    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "text.txt").write_text("a short text of some words\n")
    (tmp_path / "policy.toml").write_text("[limits]\nmax_mean_mem = 0.5\n")
    return tmp_path


# (argv with {loop}, {fifo}, {text}, {policy}; the option the error names)
TRIALS = [
    (["gate", "1", "--policy", "{loop}"], "--policy"),
    (["gate", "1", "--policy", "{policy}", "--junit", "{loop}"], "--junit"),
    (["gate", "1", "--policy", "{policy}", "--json", "--junit", "{fifo}"], "--junit"),
    (["diff", "1", "2", "--csv", "{loop}"], "--csv"),
    (["diff", "1", "2", "--html", "{loop}"], "--html"),
    (["nv-recall", "{loop}", "{text}"], "the reference"),
    (["nv-recall", "{text}", "/dev/zero"], "the generated text"),
    (["document", "{loop}", "--victim", "fake"], "the document"),
    (["document", "/proc/self/environ", "--victim", "fake"], "the document"),
    (["audit", "{loop}", "--victim", "fake"], "the dataset"),
    (["audit", "{fifo}", "--victim", "fake"], "the dataset"),
    (["audit", "--corpus", "--victim", "fake", "--dc-pdd-corpus", "{loop}"], "--dc-pdd-corpus"),
    (["audit", "--corpus", "--victim", "fake", "--policy", "{loop}"], "--policy"),
    (["corpus", "--export", "{loop}"], "--export"),
    (["corpus", "--export", "/proc/version"], "--export"),
    (["infer", "{loop}", "--heldout", "{text}", "--victim", "fake"], "the suspect set"),
    (["probe", "--file", "{loop}", "--victim", "fake"], "--file"),
    (["report", "1", "--html", "{loop}"], "--html"),
    (["ner", "--prompts", "{loop}"], "--prompts"),
    (["--store", "{loop}", "runs"], "--store"),
    (["--store", "{fifo}", "resume", "1"], "--store"),
    (["--store", "/dev/zero", "report", "1"], "--store"),
]


@pytest.mark.parametrize(("argv", "flag"), TRIALS, ids=[" ".join(t[0]) for t in TRIALS])
def test_a_path_that_is_not_a_regular_file_is_one_line_exit_2(argv, flag, place, capsys):
    names = {
        k: str(place / v)
        for k, v in [
            ("loop", "loop"),
            ("fifo", "fifo"),
            ("text", "text.txt"),
            ("policy", "policy.toml"),
        ]
    }
    code = main([part.format(**names) for part in argv])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("memprobe: error: ") and flag in lines[0], lines[0]
    assert "give a regular file" in lines[0], lines[0]
    assert not (place / "runs.sqlite").exists() and not (place / "home" / "runs.sqlite").exists()


def test_the_messages_in_security_md_are_the_ones_shown(tmp_path, monkeypatch, capsys):
    """docs/security.md quotes these two lines."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path / "home"))
    Path("loop.toml").symlink_to("loop.toml")
    Path("loop.xml").symlink_to("loop.xml")
    Path("policy.toml").write_text("[limits]\nmax_mean_mem = 0.5\n")
    assert main(["gate", "1", "--policy", "loop.toml"]) == 2
    assert capsys.readouterr().err == (
        "memprobe: error: --policy loop.toml: a symlink loop; give a regular file\n"
    )
    assert main(["gate", "1", "--policy", "policy.toml", "--junit", "loop.xml"]) == 2
    assert capsys.readouterr().err == (
        "memprobe: error: cannot write --junit to loop.xml: a symlink loop; give a regular file\n"
    )


@pytest.mark.parametrize(
    ("variables", "argv", "says"),
    [
        # HOME a file: the default store's folder ~/.cache/memprobe cannot be made.
        ({"HOME": "{file}"}, ["runs"], "HOME={file}: memprobe's folder {file}/.cache/memprobe"),
        (
            {"MEMPROBE_HOME": "{file}"},
            ["corpus", "nonmembers"],
            "MEMPROBE_HOME={file}: memprobe's folder {file} cannot be made (a file, not a folder, "
            "has that name); set MEMPROBE_HOME to a folder you can write to",
        ),
        (
            {"MEMPROBE_HOME": "{file}/sub"},
            ["runs"],
            "MEMPROBE_HOME={file}/sub: memprobe's folder {file}/sub cannot be made (a file, not a "
            "folder, is on its path); set MEMPROBE_HOME to a folder you can write to",
        ),
        (
            {"MEMPROBE_STORE": "{file}/runs.sqlite"},
            ["runs"],
            "the run store (MEMPROBE_STORE; pick another with --store PATH) {file}/runs.sqlite: "
            "a path through a file that is not a folder",
        ),
    ],
)
def test_a_home_or_store_variable_naming_a_file_is_one_line_naming_the_variable(
    tmp_path, monkeypatch, capsys, variables, argv, says
):
    file = tmp_path / "x.txt"
    file.write_text("not a folder\n")
    monkeypatch.delenv("MEMPROBE_HOME", raising=False)
    monkeypatch.delenv("MEMPROBE_STORE", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value.format(file=file))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says.format(file=file) in err and len(err.splitlines()) == 1, err
