"""``memprobe dashboard`` without starting a server: its remedy, settings, address and store.

The server itself, from an installed wheel, is tests/e2e/test_wheel_dashboard.py.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from memprobe_core.cli import build_parser, dashboard, main
from memprobe_core.cli.errors import EXIT_USAGE

ROOT = Path(__file__).resolve().parents[3]


def _pyproject() -> dict:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def test_the_install_line_names_the_extra_that_installs_streamlit() -> None:
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    with_streamlit = [
        name for name, reqs in extras.items() if any(r.startswith("streamlit") for r in reqs)
    ]
    assert with_streamlit == [dashboard.DASHBOARD_EXTRA]
    assert f"pip install '{project['name']}[{dashboard.DASHBOARD_EXTRA}]'" == dashboard.INSTALL_LINE


def test_without_streamlit_the_command_exits_2_with_the_install_line(monkeypatch, capsys) -> None:
    # A None entry is how Python marks a module that cannot be imported: find_spec gives None.
    monkeypatch.setitem(sys.modules, "streamlit", None)
    assert main(["dashboard"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "the dashboard needs Streamlit, which is not installed" in err
    assert "pip install 'memprobe[dashboard]'" in err


def test_it_listens_on_this_machine_on_streamlits_port_unless_told() -> None:
    args = build_parser().parse_args(["dashboard"])
    assert (args.host, args.port) == ("127.0.0.1", 8501)
    assert [dashboard.exposure_warning(h) for h in ("127.0.0.1", "localhost", "::1")] == [None] * 3
    warning = dashboard.exposure_warning("0.0.0.0")
    assert warning and "listens on 0.0.0.0" in warning


@pytest.mark.parametrize("port", ["0", "65536", "http", "-1"])
def test_a_port_out_of_range_is_bad_usage(port: str, capsys) -> None:
    assert main(["dashboard", "--port", port]) == EXIT_USAGE
    assert "give a number from 1 to 65535" in capsys.readouterr().err


def test_in_a_clone_the_app_is_the_repository_top_level() -> None:
    assert dashboard.app_folder() == ROOT


def test_the_server_gets_every_setting_of_the_config_file_as_a_flag() -> None:
    command = dashboard.streamlit_command(ROOT, host="10.0.0.5", port=8600)
    assert command[:5] == [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py")]
    flags = dict(zip(command[5::2], command[6::2]))
    with (ROOT / ".streamlit" / "config.toml").open("rb") as file:
        config = tomllib.load(file)
    names = {f"--{section}.{name}" for section, values in config.items() for name in values}
    assert names | {"--server.port"} == set(flags)
    assert flags["--server.fileWatcherType"] == "none"
    assert flags["--runner.postScriptGC"] == "false"
    assert flags["--server.maxUploadSize"] == "50"
    # --host and --port win over the file's address.
    assert (flags["--server.address"], flags["--server.port"]) == ("10.0.0.5", "8600")


def test_the_server_is_offline_unless_said_and_reads_the_given_store(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = dashboard.server_env({"PATH": "/bin"}, Path("runs.sqlite"))
    assert env == {
        "PATH": "/bin",
        "HF_HUB_OFFLINE": "1",
        "MEMPROBE_STORE": str(tmp_path / "runs.sqlite"),
    }
    assert dashboard.server_env({"HF_HUB_OFFLINE": "0"}, None) == {"HF_HUB_OFFLINE": "0"}


def test_the_options_page_lists_the_flags_with_their_defaults() -> None:
    text = (ROOT / "docs" / "options.md").read_text()
    section = text.split("## `memprobe dashboard`", 1)[1].split("\n## ", 1)[0]
    rows = {
        row.split("|")[1].strip(): row.split("|")[2].strip()
        for row in section.splitlines()
        if row.startswith("| `--")
    }
    args = build_parser().parse_args(["dashboard"])
    assert rows == {"`--port N`": str(args.port), "`--host H`": args.host}
