"""The ``memprobe`` CLI through ``main([...])``: commands, exit codes, bad input, the manual."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys

import pytest

import memprobe_core.models as models_pkg
from memprobe_core.attacks.options import InteractiveOptions
from memprobe_core.cli import build_parser, main
from memprobe_core.models.base import ModelError
from memprobe_core.store import SCHEMA_VERSION, Store
from tests.helpers.scripted_models import parrot

WORDS = " ".join(f"w{i}" for i in range(60))


@pytest.fixture
def fake_models(monkeypatch):
    """``models.load`` gives parrots for names starting with 'test'; anything else is unknown.

    A parrot repeats suffix words w20..w25; it has no tokenizer (snippets are cut by whitespace).
    """
    loaded = []

    def load(name, *, backend=None, **options):
        if not name.startswith("test"):
            raise ModelError(f"model {name!r} is unknown; use an embedded name or a hub id")
        loaded.append(name)
        return parrot(name, "w20 w21 w22 w23 w24 w25")

    monkeypatch.setattr(models_pkg, "load", load, raising=False)
    return loaded


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "runs.sqlite"


MODELS = ["--victim", "test-v", "--base", "test-b", "--attacker", "test-a"]


def write_dataset(tmp_path):
    rows = [
        json.dumps({"id": "good1", "text": WORDS, "domain": "legal"}),
        "{not json at all",
        json.dumps({"id": "empty", "text": "   "}),
        json.dumps({"id": "good2", "text": WORDS, "domain": "code"}),
    ]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_help_is_the_manual():
    out = subprocess.run(
        [sys.executable, "-m", "memprobe_core.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0
    for word in (
        "probe",
        "audit",
        "resume",
        "runs",
        "report",
        "corpus",
        "ner",
        "exit codes",
        "130",
        "--store",
    ):
        assert word in out.stdout


def test_every_option_has_help_text(capsys):
    parser = build_parser()
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)][0]
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or name == "ner":
                continue
            assert action.help, f"{name} {action.dest} has no help"
    assert main(["audit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    # Flags default to None; the default and range shown are the core option class's own.
    assert (
        f"refinement rounds T (interactive; from 0 to 100; default: {InteractiveOptions.rounds})"
        in text
    )
    assert f"(interactive; from 1 to 1,024; default: {InteractiveOptions.n_candidates})" in text
    assert "exit codes" in text


def test_unknown_method_is_bad_usage(store_path, capsys):
    assert main(["--store", str(store_path), "audit", "--corpus", "--methods", "magic"]) == 2
    assert "invalid choice: 'magic'" in capsys.readouterr().err


def test_unknown_model_exits_3_and_records_nothing(store_path, fake_models, capsys):
    code = main(
        [
            "--store",
            str(store_path),
            "audit",
            "--corpus",
            "--limit",
            "1",
            "--victim",
            "no-such-model",
        ]
    )
    assert code == 3
    err = capsys.readouterr().err
    assert "model error" in err and "no-such-model" in err
    assert Store(store_path).list_runs() == []  # failed fast, no empty run left behind


def test_audit_reports_bad_rows_and_audits_the_rest(tmp_path, store_path, fake_models, capsys):
    data = write_dataset(tmp_path)
    code = main(
        [
            "--store",
            str(store_path),
            "audit",
            str(data),
            "--methods",
            "ps_base",
            "ps_inst",
            "--lengths",
            "30",
            "--domain-column",
            "domain",
            "--id-column",
            "id",
            *MODELS,
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "row 2" in captured.err and "row 3" in captured.err  # malformed rows, by number
    assert "Table 1" in captured.out and "P-S-Inst" in captured.out
    store = Store(store_path)
    run = store.list_runs()[0]
    assert (run["kind"], run["status"], run["units_done"], run["units_total"]) == (
        "audit",
        "finished",
        4,
        4,
    )
    assert {r["row"] for r in run["config"]["dataset"]["rejected"]} == {2, 3}
    assert fake_models == ["test-v", "test-b"]  # no attacker: no selected method needs one


def test_failed_units_exit_1_and_resume(tmp_path, store_path, fake_models, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"text": WORDS}) + "\n" + json.dumps({"text": "too short"}) + "\n")
    base = ["--store", str(store_path)]
    assert (
        main([*base, "audit", str(data), "--methods", "ps_inst", "--lengths", "30", *MODELS]) == 1
    )
    assert "Failed units (1)" in capsys.readouterr().out
    run_id = Store(store_path).list_runs()[0]["id"]
    # Resume reloads the models by the names in the run config; errors stay unless retried.
    assert main([*base, "resume", str(run_id)]) == 1
    assert main([*base, "resume", str(run_id), "--retry-errors"]) == 1
    assert "has 2 tokens" in capsys.readouterr().out
    assert main([*base, "resume", "999"]) == 2
    assert "run 999 is not in store" in capsys.readouterr().err


def test_probe_json_and_runs_and_report(tmp_path, store_path, fake_models, capsys):
    base = ["--store", str(store_path)]
    code = main(
        [
            *base,
            "probe",
            WORDS,
            "--method",
            "interactive",
            "--length",
            "30",
            "--rounds",
            "1",
            "--n",
            "3",
            "--json",
            *MODELS,
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out)
    assert result["method"] == "interactive" and len(result["trace"]) == 4
    assert "round 1 — 3 candidate(s)" in captured.err  # live table on stderr under --json
    run_id = result["run_id"]
    assert len(Store(store_path).candidates(run_id)) == 4
    assert main([*base, "runs"]) == 0
    listing = capsys.readouterr().out
    assert "probe" in listing and "finished" in listing and "1/1" in listing
    csv_path = tmp_path / "out.csv"
    assert (
        main(
            [
                *base,
                "report",
                str(run_id),
                "--csv",
                str(csv_path),
                "--candidates-csv",
                str(tmp_path / "cands.csv"),
            ]
        )
        == 0
    )
    assert "Ours (interactive)" in capsys.readouterr().out
    header = csv_path.read_text(encoding="utf-8").splitlines()[0]
    for column in ("victim", "rouge_variant", "alpha", "seed", "mem"):
        assert column in header.split(",")
    assert main([*base, "report", str(run_id), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["table1"][0]["method"] == "interactive"


def test_probe_live_table_on_stdout(store_path, fake_models, capsys):
    assert (
        main(
            [
                "--store",
                str(store_path),
                "probe",
                WORDS,
                "--method",
                "ps_inst",
                "--length",
                "30",
                *MODELS,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Mem 0." in out and "P-S-Inst" in out


def test_unwritable_csv_path_is_bad_usage(tmp_path, store_path, fake_models, capsys):
    base = ["--store", str(store_path)]
    assert main([*base, "probe", WORDS, "--method", "ps_inst", "--length", "30", *MODELS]) == 0
    capsys.readouterr()
    code = main([*base, "report", "1", "--csv", str(tmp_path / "missing" / "x.csv")])
    assert code == 2
    assert "cannot write --csv to" in capsys.readouterr().err


def test_newer_schema_store_is_refused(store_path, capsys):
    Store(store_path).close()
    conn = sqlite3.connect(store_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    assert main(["--store", str(store_path), "runs"]) == 2
    assert "made by a newer memprobe" in capsys.readouterr().err


def test_probe_input_errors(store_path, fake_models, capsys):
    base = ["--store", str(store_path)]
    assert main([*base, "probe", *MODELS]) == 2
    assert "exactly one snippet" in capsys.readouterr().err
    assert main([*base, "probe", "three words only", "--length", "30", *MODELS]) == 2
    assert "has 3 tokens; length 30" in capsys.readouterr().err
    assert main([*base, "probe", "--corpus-id", "nope", *MODELS]) == 2
    assert main([*base, "probe", WORDS, "--alpha", "1.5", *MODELS]) == 2
    assert "--alpha 1.5: give a number in [0, 1]" in capsys.readouterr().err


def test_corpus_lists_ids(store_path, capsys):
    assert main(["--store", str(store_path), "corpus"]) == 0
    out = capsys.readouterr().out
    assert "built-in demo corpus" in out and "legal" in out
    first_id = out.splitlines()[2].split()[0]
    assert main(["--store", str(store_path), "corpus", "--show", first_id]) == 0
    assert len(capsys.readouterr().out.split()) > 100


def test_progress_lines_when_not_a_terminal():
    import io

    from memprobe_core.audit import AuditProgress
    from memprobe_core.cli.output import ProgressBar
    from memprobe_core.store import UnitKey

    out = io.StringIO()
    bar = ProgressBar(out)
    bar(AuditProgress(0, 9, 0, 0.0, None, UnitKey("s0", "ps_base", 200), 0.0))
    bar(AuditProgress(3, 9, 1, 0.01, 600.0, None, 300.0))
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        "[0/9 units] 0 failed · 0.0 units/h · ETA ? · running s0/ps_base/200",
        "[3/9 units] 1 failed · 36.0 units/h · ETA 10m00s",
    ]


def test_txt_mode_blocks_splits_a_txt_dataset(tmp_path, store_path, fake_models, capsys):
    data = tmp_path / "two.txt"
    data.write_text(f"{WORDS}\n\n{WORDS.replace('w', 'x')}\n", encoding="utf-8")
    base = ["--store", str(store_path)]
    audit = [*base, "audit", str(data), "--methods", "ps_base", "--lengths", "30", *MODELS]
    assert main(audit) == 0  # default --txt-mode file: the whole file is one snippet
    assert main([*audit, "--txt-mode", "blocks"]) == 0
    store = Store(store_path)
    blocks_run, file_run = (r["id"] for r in store.list_runs())
    assert len(store.samples(file_run)) == 1
    texts = [s.text for s in store.samples(blocks_run)]
    assert texts == [WORDS, WORDS.replace("w", "x")]
    capsys.readouterr()
    probe = [*base, "probe", "--file", str(data), "--method", "ps_inst", "--length", "30", *MODELS]
    assert main([*probe, "--txt-mode", "blocks"]) == 0
    assert "has 2 snippets; probing the first" in capsys.readouterr().err
    assert main(probe) == 0
    assert "has 2 snippets" not in capsys.readouterr().err
    assert main([*probe, "--txt-mode", "lines"]) == 2
    assert "invalid choice: 'lines'" in capsys.readouterr().err


def test_sigterm_is_an_interrupt_only_while_a_command_runs(store_path, monkeypatch):
    import signal

    from memprobe_core.cli import runs as runs_command

    seen = {}

    def handler_during(args):
        seen["handler"] = signal.getsignal(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            seen["handler"](signal.SIGTERM, None)
        return 0

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(runs_command, "run", handler_during)
    parser_main = main(["--store", str(store_path), "runs"])
    assert parser_main == 0 and seen["handler"] is not before
    assert signal.getsignal(signal.SIGTERM) is before  # put back afterwards


def test_report_fpr_rule_reaches_the_report(tmp_path, monkeypatch, capsys):
    import pandas as pd

    import memprobe_core.cli.report as report_cli
    from memprobe_core.report.build import build_report
    from memprobe_core.store import RESULT_COLUMNS

    seen = {}

    def fake_report(store, run_id, **kwargs):
        seen.update(kwargs)
        return build_report(pd.DataFrame(columns=RESULT_COLUMNS), **kwargs)

    monkeypatch.setattr(report_cli, "report_for_run", fake_report)
    monkeypatch.setattr(report_cli.common, "open_store", lambda args: None)
    assert main(["--store", str(tmp_path / "r.sqlite"), "report", "1", "--fpr-rule", "lt"]) == 0
    assert seen["fpr_rule"] == "lt"
    assert main(["--store", str(tmp_path / "r.sqlite"), "report", "1", "--fpr-rule", "<"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_dtype_flags_reach_the_run_names_per_role(monkeypatch):
    from memprobe_core.cli import common
    from memprobe_core.models import dtypes

    monkeypatch.setattr(dtypes, "default_device", lambda: "cpu")
    monkeypatch.setattr(dtypes, "cpu_has_bf16", lambda: False)
    args = build_parser().parse_args(
        ["probe", "--dtype", "attacker=bfloat16", "--dtype", "victim=float16,base=float32"]
    )
    names = common.model_names(args).resolved()
    assert names.dtypes["attacker"] == names.dtypes["init"] == "bfloat16"
    assert (names.dtypes["victim"], names.dtypes["base"]) == ("float16", "float32")
    every = common.model_names(build_parser().parse_args(["probe", "--dtype", "float16"]))
    assert set(every.resolved().dtypes.values()) == {"float16"}


@pytest.mark.parametrize(
    ("flag", "says"),
    [("critic=float32", "no role 'critic'"), ("attacker=fp8", "unknown dtype 'fp8'")],
)
def test_a_bad_dtype_flag_exits_2_in_one_line_before_anything_is_stored(
    store_path, capsys, flag, says
):
    assert (
        main(
            ["--store", str(store_path), "probe", "--dtype", flag, "--victim", "fake", "some text"]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not store_path.exists()


def test_a_document_command_has_only_the_victim_role(store_path, capsys):
    code = main(
        [
            "--store",
            str(store_path),
            "document",
            "--builtin",
            "apache-2.0",
            "--dtype",
            "attacker=float32",
        ]
    )
    assert code == 2
    assert "this command has no role 'attacker'; its roles are victim" in capsys.readouterr().err


def test_an_interrupted_audit_names_its_store_in_the_resume_hint(
    tmp_path, fake_models, monkeypatch, capsys
):
    from types import SimpleNamespace

    from memprobe_core.cli import audit as audit_cli

    def interrupted(store, run_id, **kwargs):
        return SimpleNamespace(status="interrupted", done=1, total=2)

    monkeypatch.setattr(audit_cli, "run_audit", interrupted)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"text": WORDS}) + "\n")
    store = tmp_path / "other store.sqlite"
    argv = ["--store", str(store), "audit", str(data), "--methods", "ps_inst", *MODELS]
    assert main([*argv, "--lengths", "30"]) == 130
    err = capsys.readouterr().err
    assert f"continue with `memprobe --store '{store}' resume 1`" in err


class _ReaderGone:
    """A stdout whose reader went away: every write and flush is a broken pipe."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")

    def isatty(self):
        return False


GATE_UNITS = [
    (f"s{i}", "member" if i % 2 else "nonmember", 0.1 * i, i == 3, 1.0 + i) for i in range(4)
]


def _gate_argv(tmp_path, limit):
    from tests.unit.release.conftest import add_run

    store = tmp_path / "gate.sqlite"
    run_id = add_run(store, "v", GATE_UNITS)
    policy = tmp_path / f"p{limit}.toml"
    policy.write_text(f"[limits]\nmax_mean_mem = {limit}\n")
    return ["--store", str(store), "gate", str(run_id), "--policy", str(policy)]


@pytest.mark.parametrize(("limit", "code"), [(0.01, 1), (0.99, 0)])
def test_a_reader_going_away_never_changes_the_gates_exit_code(tmp_path, monkeypatch, limit, code):
    argv = _gate_argv(tmp_path, limit)
    assert main(argv) == code  # the verdict with a reader
    monkeypatch.setattr(sys, "stdout", _ReaderGone())
    assert main(argv) == code  # the same verdict with none (a breach exited 0 here)


def test_a_breach_exits_1_when_stdout_is_a_closed_pipe(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # `memprobe gate … | head -n1` after head has gone
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memprobe_core.cli", *_gate_argv(tmp_path, 0.01)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_failed_units_exit_1_when_stdout_is_a_closed_pipe(
    tmp_path, store_path, fake_models, monkeypatch
):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"text": WORDS}) + "\n" + json.dumps({"text": "too short"}) + "\n")
    monkeypatch.setattr(sys, "stdout", _ReaderGone())
    argv = ["--store", str(store_path), "audit", str(data), "--methods", "ps_inst"]
    assert main([*argv, "--lengths", "30", *MODELS]) == 1
