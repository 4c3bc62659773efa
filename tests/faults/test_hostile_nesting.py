"""Inputs nested deeper than memprobe reads, through the ``memprobe`` command: a gate policy, a
JSONL dataset and an endpoint's answer are refused in one line naming the limit, before any
parser recurses (``memprobe_core.bounded``; docs/security.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprobe_core.bounded import MAX_DEPTH
from memprobe_core.cli import main
from memprobe_core.models import clear_cache, load
from memprobe_core.store import Store
from tests.faults.helpers import one_line_error
from tests.helpers.openai_server import serve
from tests.unit.release.conftest import add_run

WORDS = " ".join(f"w{i}" for i in range(60))
LIMIT = f"memprobe reads at most {MAX_DEPTH} levels"
# The two policies of issue 51: 2 KB of nested arrays, 2,000 nested inline tables.
HOSTILE_POLICIES = {
    "arrays": ("[limits]\nmax_mean_mem = " + "[" * 1000 + "]" * 1000 + "\n", 1000),
    "inline tables": ("[limits]\nmax_mean_mem = " + "{a=" * 2000 + "1" + "}" * 2000 + "\n", 2000),
    "dotted keys": ("[limits]\nmax_auroc." + ".".join(f"k{i}" for i in range(300)) + " = 1\n", 301),
}
FAKE_AUDIT = ["audit", "--corpus", "--per-domain", "1", "--lengths", "40", "--methods", "ps_base"]
FAKE_AUDIT += ["--victim", "fake", "--base", "fake", "--no-signals"]


@pytest.mark.parametrize("kind", sorted(HOSTILE_POLICIES))
@pytest.mark.parametrize("command", ["gate", "gate --json", "audit --policy"])
def test_a_deep_policy_is_one_line_and_exit_2(tmp_path: Path, capsys, kind: str, command: str):
    text, depth = HOSTILE_POLICIES[kind]
    policy = tmp_path / "policy.toml"
    policy.write_text(text, encoding="utf-8")
    store = tmp_path / "runs.sqlite"
    if command.startswith("gate"):
        run = add_run(store, "v", [("s1", None, 0.1, False, None)])
        argv = ["gate", str(run), "--policy", str(policy), *command.split()[1:]]
    else:
        argv = [*FAKE_AUDIT, "--policy", str(policy)]
    assert main(["--store", str(store), *argv]) == 2
    captured = capsys.readouterr()
    line = one_line_error(captured.err)
    assert line == (
        f"memprobe: error: policy file 'policy.toml' nests {depth:,} levels deep; {LIMIT}: a "
        "policy needs 2 ([limits] holding a per-signal table: max_auroc = { … })"
    )
    assert captured.out == ""
    if command.startswith("audit"):  # refused before the audit ran
        assert not store.exists() or Store(store).list_runs() == []


def test_a_deep_jsonl_row_is_rejected_naming_the_limit(tmp_path: Path, capsys) -> None:
    data = tmp_path / "deep.jsonl"
    data.write_text('{"text": "' + WORDS + '", "meta": ' + "[" * 1000 + "]" * 1000 + "}\n")
    store = ["--store", str(tmp_path / "runs.sqlite")]
    assert main([*store, *FAKE_AUDIT[:1], str(data), *FAKE_AUDIT[4:]]) == 2
    err = capsys.readouterr().err
    line = one_line_error(err)
    assert line.startswith("memprobe: error: the dataset has no usable snippet"), line
    assert f"line 1: JSON nested 1,001 levels deep; {LIMIT}: a row needs 1" in err


def test_a_deep_endpoint_answer_is_a_model_error_naming_the_limit(tmp_path: Path, capsys):
    answer = b'{"choices": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    with serve(load("fake:echo"), "m", raw_body=answer) as server:
        clear_cache()
        argv = ["--store", str(tmp_path / "r.sqlite"), "probe", WORDS, "--method", "ps_inst"]
        argv += ["--length", "30", "--split-tokenizer", "whitespace", "--victim", "m"]
        code = main([*argv, "--base-url", server.base_url, "--no-signals"])
    line = one_line_error(capsys.readouterr().err)
    # An endpoint that answers badly is a model error (exit 3), as every malformed answer is.
    assert code == 3, line
    assert "answered with JSON nested 5,001 levels deep" in line and LIMIT in line, line
    assert server.base_url in line


def test_a_policy_within_the_limit_is_read(tmp_path: Path, capsys) -> None:
    # Brackets inside strings and comments are not nesting: a policy that has them is read.
    policy = tmp_path / "policy.toml"
    policy.write_text("# [[[[[[[[\n[limits]\nmax_mean_mem = 1  # ]]]] {{{{\n", encoding="utf-8")
    store = tmp_path / "runs.sqlite"
    run = add_run(store, "v", [("s1", None, 0.1, False, None)])
    assert main(["--store", str(store), "gate", str(run), "--policy", str(policy), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True


def test_a_policy_over_1_mib_is_refused_before_it_is_read(tmp_path: Path, capsys) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("[limits]\nmax_mean_mem = 1\n# " + "x" * 2**20 + "\n", encoding="utf-8")
    store = tmp_path / "runs.sqlite"
    run = add_run(store, "v", [("s1", None, 0.1, False, None)])
    assert main(["--store", str(store), "gate", str(run), "--policy", str(policy)]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line == "memprobe: error: policy file 'policy.toml' is over 1024 KiB: not a policy"
