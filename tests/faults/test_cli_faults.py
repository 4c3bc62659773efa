"""Bad input through the ``memprobe`` command: sane sizes, flags a user can type, clean exits."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest

from memprobe_core.attacks.options import AttackOptions
from memprobe_core.cli import main
from memprobe_core.cli.errors import cli_message, cli_text
from memprobe_core.cli.output import terminal_json
from memprobe_core.models import clear_cache, load
from memprobe_core.store import Store
from tests.faults.helpers import CLI_DRIVER, ROOT, one_line_error
from tests.helpers.openai_server import serve

WORDS = " ".join(f"w{i}" for i in range(60))
# A model name that cannot load: a size check that came after loading would exit 3, not 2.
NO_MODEL = ["--victim", "no/such-model", "--base", "no/such-model", "--backend", "hf"]


# --- item 2: every size option has a sane maximum, checked before anything loads -----------------
@pytest.mark.parametrize(
    "argv, flag",
    [
        (["probe", WORDS, "--n", "1000000000", *NO_MODEL], "--n"),
        (["probe", WORDS, "--rounds", "100000", *NO_MODEL], "--rounds"),
        (["probe", WORDS, "--gcg-steps", "-1", *NO_MODEL], "--gcg-steps"),
        (["probe", WORDS, "--length", "100000000", *NO_MODEL], "--length"),
        (["audit", "--corpus", "--lengths", "200", "1", *NO_MODEL], "--lengths"),
        (["audit", "--corpus", "--limit", "0", *NO_MODEL], "--limit"),
        (["audit", "--corpus", "--per-domain", "99999999999", *NO_MODEL], "--per-domain"),
        (["audit", "--corpus", "--max-bytes", "0", *NO_MODEL], "--max-bytes"),
        (["runs", "--limit", "-5"], "--limit"),
        (["ner", "--batch-size", "100000000"], "--batch-size"),
        (["ner", "--pairs", "0"], "--pairs"),
        (["ner", "--templates", "10000000"], "--templates"),
        # Numbers past 64 bits failed deep inside torch or SQLite (OverflowError traceback, or
        # 73 s into a run without naming --seed); a negative bootstrap seed named no flag.
        (["probe", WORDS, "--seed", str(2**64), *NO_MODEL], "--seed"),
        (["probe", WORDS, "--seed", "-1", *NO_MODEL], "--seed"),
        (["audit", "--corpus", "--seed", str(2**63), *NO_MODEL], "--seed"),
        (["ner", "--seed", "99999999999999999999"], "--seed"),
        (["report", "99999999999999999999"], "run id"),
        (["report", "0"], "run id"),
        (["resume", str(2**63)], "run id"),
        (["report", "1", "--ci-seed", "-5"], "--ci-seed"),
        (["ner", "--top", "-1"], "--top"),  # listed all prompts but the last
    ],
)
def test_size_options_out_of_range_are_refused_in_one_line(tmp_path, capsys, argv, flag):
    assert main(["--store", str(tmp_path / "runs.sqlite"), *argv]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith(f"memprobe: error: {flag} ") and "give a whole number from" in line
    assert not (tmp_path / "runs.sqlite").exists()  # refused before the store was opened


@pytest.mark.parametrize(
    "field, value",
    [
        ("n_candidates", 10**9),
        ("rounds", 101),
        ("gcg_steps", 10**6),
        ("gcg_top_k", 0),
        ("gcg_search_width", 10**6),
        ("max_prompt_tokens", 10**6),
        ("reverse_max_new_tokens", 0),
        ("seed", 2**64),
        ("seed", -3),
    ],
)
def test_attack_options_refuse_insane_sizes(field, value):
    # The dashboard builds AttackOptions directly: it gets the same limits as the CLI.
    with pytest.raises(ValueError, match=f"{field}={value}: give a whole number"):
        AttackOptions.from_dict({field: value})  # the flat names a stored config may hold


# --- item 6: unwritable CSV, a closed pipe ---------------------------------------------------------
def test_csv_to_an_unwritable_path_is_one_line_exit_2(tmp_path, capsys):
    store = ["--store", str(tmp_path / "runs.sqlite")]
    assert (
        main(
            [
                *store,
                "probe",
                WORDS,
                "--method",
                "ps_inst",
                "--length",
                "30",
                "--backend",
                "fake",
                "--split-tokenizer",
                "whitespace",
                "--no-stemmer",
            ]
        )
        == 0
    )
    capsys.readouterr()
    for target in (tmp_path / "missing" / "x.csv", tmp_path):
        assert main([*store, "report", "1", "--csv", str(target)]) == 2
        assert "cannot write --csv to" in one_line_error(capsys.readouterr().err)


@pytest.mark.slow
def test_corpus_into_a_closed_pipe_exits_0_quietly():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = f'{sys.executable} -c "$DRIVER" corpus | head -1; exit "${{PIPESTATUS[0]}}"'
    done = subprocess.run(
        ["bash", "-c", script],
        env={**env, "DRIVER": CLI_DRIVER},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("built-in demo corpus") and done.stdout.count("\n") == 1
    assert done.stderr == ""


# --- item 8: messages name flags; the flags exist ----------------------------------------------------
def test_dataset_encoding_flag_and_messages_that_name_flags(tmp_path, capsys):
    data = tmp_path / "data.jsonl"
    data.write_bytes(
        json.dumps({"id": "a", "text": "café " + WORDS}, ensure_ascii=False).encode("latin-1")
        + b"\n"
    )
    base = [
        "--store",
        str(tmp_path / "runs.sqlite"),
        "audit",
        str(data),
        "--methods",
        "ps_inst",
        "--lengths",
        "30",
        "--backend",
        "fake",
        "--split-tokenizer",
        "whitespace",
    ]
    assert main(base) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "--encoding 'latin-1'" in line and "encoding=" not in line
    assert main([*base, "--id-column", "nope", "--encoding", "latin-1"]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "pass --id-column with one of them" in line and "id_column" not in line
    assert main([*base, "--max-bytes", "10"]) == 2
    assert "a larger --max-bytes" in one_line_error(capsys.readouterr().err)
    assert main([*base, "--encoding", "latin-1"]) == 0
    with Store(tmp_path / "runs.sqlite") as store:
        assert store.samples(1)[0].text.startswith("café ")


def test_cli_text_rewrites_library_names_only():
    assert cli_text("rounds=-1: give") == "--rounds -1: give"
    assert cli_text("pass text_column= with one") == "pass --text-column with one"
    assert (
        cli_text("snippet has 3 tokens; length 30 needs more")
        == "snippet has 3 tokens; length 30 needs more"
    )
    assert cli_text("file my_data.csv") == "file my_data.csv"


def test_base_url_and_api_key_env_reach_an_endpoint(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MY_ENDPOINT_KEY", "sk-test-abcdef0123456789")
    echo = load("fake:echo")
    store = tmp_path / "runs.sqlite"
    with serve(echo, "served-model", api_key="sk-test-abcdef0123456789") as server:
        argv = [
            "--store",
            str(store),
            "probe",
            WORDS,
            "--method",
            "ps_inst",
            "--length",
            "30",
            "--split-tokenizer",
            "whitespace",
            "--victim",
            "served-model",
            "--base-url",
            server.base_url,
        ]
        clear_cache()
        assert main(argv) == 3  # the default key variable is unset: the server says 401
        line = one_line_error(capsys.readouterr().err)
        assert "variable OPENAI_API_KEY (or name another with --api-key-env)" in line
        clear_cache()
        assert main([*argv, "--api-key-env", "MY_ENDPOINT_KEY"]) == 0
        assert server.answered >= 1
    with Store(store) as opened:
        config = opened.get_run(2)["config"]
        assert config["models"]["load_options"] == {
            "base_url": server.base_url,
            "api_key_env": "MY_ENDPOINT_KEY",
        }
    assert b"sk-test-abcdef0123456789" not in store.read_bytes()


def test_base_url_with_a_password_is_refused(tmp_path, capsys):
    assert (
        main(
            [
                "--store",
                str(tmp_path / "r.sqlite"),
                "probe",
                WORDS,
                "--victim",
                "m",
                "--base-url",
                "http://user:hunter2@127.0.0.1:9/v1",
            ]
        )
        == 2
    )
    line = one_line_error(capsys.readouterr().err)
    assert "--api-key-env" in line and "hunter2" not in line


# A CR/LF reached httpx (an InvalidURL traceback) after the run was stored as failed.
BROKEN_URLS = [
    "http://127.0.0.1:9/v1\r\nX-Evil: 1",
    "http://127.0.0.1:9/v1\nHost: elsewhere",
    "http://127.0.0.1:9/v\t1",
    "http://127.0.0.1:9/v1\x00",
    "http://127.0.0.1:9/v1\x85next",  # NEL, a C1 line break
    "http://127.0.0.1:9/my models/v1",
    "http://127.0.0.1:9/v1,http://127.0.0.1:10/v\r\n1",  # the second server's URL
]


@pytest.mark.parametrize("url", BROKEN_URLS)
def test_base_url_with_a_line_break_is_refused_before_a_run_is_stored(tmp_path, capsys, url):
    store = tmp_path / "r.sqlite"
    argv = ["--store", str(store), "probe", WORDS, "--length", "20", "--method", "ps_base"]
    assert main([*argv, "--victim", "openai:m", "--base", "openai:m", "--base-url", url]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith("memprobe: error: --base-url holds a line break"), line
    assert not store.exists()


@pytest.mark.parametrize("url", BROKEN_URLS)
def test_the_endpoint_backend_refuses_a_base_url_with_a_line_break(url):
    from memprobe_core.models import ModelError
    from memprobe_core.models.openai import parse_base_urls

    with pytest.raises(ModelError, match="base_url holds a line break"):
        parse_base_urls(url)


def test_option_errors_name_the_flag_on_the_command_line_and_the_option_in_the_library():
    from memprobe_core.errors import OptionError
    from memprobe_core.ner.audit import NerAuditConfig
    from memprobe_core.store.schema import StoreError

    with pytest.raises(OptionError) as caught:
        NerAuditConfig(max_pairs=0)
    assert str(caught.value) == "max_pairs=0: give a whole number from 1 to 1,000,000"
    assert cli_message(caught.value) == "--pairs 0: give a whole number from 1 to 1,000,000"
    # An option the CLI has no flag for keeps its library name.
    assert cli_message(OptionError("attention_pairs", -1, "give 0 or more")).startswith(
        "attention_pairs=-1"
    )
    # Pickled across processes (Ray workers), the parts survive.
    again = pickle.loads(pickle.dumps(caught.value))
    assert (again.option, again.value, again.problem) == ("max_pairs", 0, caught.value.problem)
    assert cli_message(StoreError("store x is damaged")).endswith("(pick it with --store PATH)")


# --- non-finite numbers: "not measured", and strict JSON ------------------------------------------
def _strict_json(text: str):
    def refuse(constant: str):
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_probe_json_of_a_victim_giving_minus_infinity_is_strict_and_says_not_measured(
    tmp_path, capsys
):
    """A server's ``-Infinity`` log-prob was stored as loss = Infinity and printed bare."""
    from tests.helpers.tiny_models import tiny_hf_generator

    with serve(tiny_hf_generator(seed=3), "m", logprob_at={2: float("-inf")}) as server:
        clear_cache()
        argv = ["--store", str(tmp_path / "r.sqlite"), "probe", WORDS, "--method", "ps_inst"]
        argv += ["--length", "30", "--split-tokenizer", "whitespace", "--victim", "m"]
        assert main([*argv, "--base-url", server.base_url, "--json"]) == 0
    got = _strict_json(capsys.readouterr().out)
    signals = got["membership"]
    assert set(signals) == {"not_measured"} and "-inf" in signals["not_measured"]


def test_terminal_json_writes_non_finite_numbers_as_null():
    import numpy as np

    value = {"a": float("-inf"), "b": [np.float64("nan"), 1.5, (2, float("inf"))], "c": "x"}
    assert _strict_json(terminal_json(value)) == {"a": None, "b": [None, 1.5, [2, None]], "c": "x"}


# --- output paths are checked before the work -------------------------------------------------------
@pytest.mark.parametrize(
    "argv, flag, problem",
    [
        (["ner", "--csv", "{dir}"], "--csv", "it is a folder"),  # refused after 385 s of scoring
        (["ner", "--names-csv", "{dir}/no/such/names.csv"], "--names-csv", "does not exist"),
        (["report", "1", "--html", "{dir}"], "--html", "it is a folder"),
        (["report", "1", "--roc-csv", "{dir}/none/roc.csv"], "--roc-csv", "does not exist"),
        (["report", "1", "--candidates-csv", "{dir}"], "--candidates-csv", "it is a folder"),
    ],
)
def test_an_output_path_that_cannot_be_written_is_refused_before_any_work(
    tmp_path, capsys, monkeypatch, argv, flag, problem
):
    import memprobe_core.cli.ner as ner_cli
    import memprobe_core.cli.report as report_cli

    def no_work(*args, **kwargs):
        raise AssertionError("the command started its work before checking its output paths")

    monkeypatch.setattr(ner_cli, "run_ner_audit", no_work)
    monkeypatch.setattr(report_cli, "report_for_run", no_work)
    argv = [part.replace("{dir}", str(tmp_path)) for part in argv]
    assert main(["--store", str(tmp_path / "r.sqlite"), *argv]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith(f"memprobe: error: cannot write {flag} to ") and problem in line, line
    assert not (tmp_path / "r.sqlite").exists()


def test_two_outputs_naming_one_file_are_refused(tmp_path, capsys):
    same = str(tmp_path / "out.csv")
    argv = ["--store", str(tmp_path / "r.sqlite"), "report", "1", "--csv", same]
    assert main([*argv, "--table-csv", str(tmp_path / "." / "out.csv")]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "--csv and --table-csv both name" in line
