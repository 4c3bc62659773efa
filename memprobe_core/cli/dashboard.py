"""``memprobe dashboard``: start the Streamlit dashboard of this memprobe, installed or cloned.

The dashboard's scripts are found beside the ``memprobe_core`` package: in an installed wheel
they are the folder ``memprobe_dashboard/`` (``app.py``, ``pages/``, ``.streamlit/config.toml``;
pyproject.toml says why that layout), in a clone the repository's top level. The server is
``python -m streamlit run app.py`` in a child process, given every setting of that folder's
``.streamlit/config.toml`` as a flag: the one place for the settings (``scripts/run.sh`` runs
this command too), applied from any working directory and by any Streamlit version the
``dashboard`` extra admits (Streamlit itself reads a config file from the working directory and
the home folder, and only in recent versions beside the script). ``--host`` and ``--port``
override the file's address and Streamlit's port.

memprobe_core never imports Streamlit: here it is only looked up, so a missing one is a message
naming the extra that installs it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import memprobe_core
from memprobe_core.cli import common
from memprobe_core.cli.errors import EPILOG_EXIT_CODES, EXIT_OK
from memprobe_core.errors import UsageError

# The extra of pyproject.toml's [project.optional-dependencies] that installs Streamlit
# (tests/unit/cli/test_cli_dashboard.py checks the two agree).
DASHBOARD_EXTRA = "dashboard"
INSTALL_LINE = f"pip install 'memprobe[{DASHBOARD_EXTRA}]'"
# The folder the wheel installs the scripts into, beside memprobe_core (pyproject.toml).
INSTALLED_FOLDER = "memprobe_dashboard"
CONFIG = Path(".streamlit") / "config.toml"
DEFAULT_PORT = 8501  # Streamlit's own default, the README's address
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
# Seconds the server gets to stop after Ctrl-C or SIGTERM before it is killed.
STOP_TIMEOUT_S = 15.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = common.add_command(
        sub,
        "dashboard",
        "start the dashboard (Streamlit) on this machine; stop it with Ctrl-C",
        epilog=EPILOG_EXIT_CODES,
    )
    parser.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help="port to listen on (1 to 65535)"
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on; the pages show the texts you probe, which may hold personal "
        "data: give another (0.0.0.0: every interface) only on purpose",
    )
    parser.set_defaults(handler=run)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give a number from 1 to 65535")
    return port


def run(args: argparse.Namespace) -> int:
    """Serve the dashboard until it stops; Ctrl-C or SIGTERM stops the server too."""
    if importlib.util.find_spec("streamlit") is None:
        raise UsageError(f"the dashboard needs Streamlit, which is not installed: {INSTALL_LINE}")
    folder = app_folder()
    warning = exposure_warning(args.host)
    if warning:
        print(warning, file=sys.stderr)
    print(f"memprobe: the dashboard of {folder}", file=sys.stderr)
    command = streamlit_command(folder, host=args.host, port=args.port)
    server = subprocess.Popen(command, env=server_env(os.environ, args.store))
    try:
        code = server.wait()
    finally:  # Ctrl-C (the server got it too) or SIGTERM (only we did): stop the server
        _stop(server)
    if code != 0:
        raise UsageError(
            f"the dashboard server stopped with exit code {code} (its messages are above); if "
            f"port {args.port} is taken, choose another with --port"
        )
    return EXIT_OK


def exposure_warning(host: str) -> str | None:
    """A warning when ``host`` is reachable from other machines (``None`` for this one only)."""
    if host in LOCAL_HOSTS:
        return None
    return (
        f"memprobe: warning: the dashboard listens on {host}: whoever reaches this machine "
        "there sees the texts and outputs it shows (docs/security.md)"
    )


def app_folder() -> Path:
    """The folder holding ``app.py``, ``pages/`` and ``.streamlit/config.toml``.

    Raises:
        UsageError: neither an installed ``memprobe_dashboard`` nor a clone's top level has them.
    """
    beside = Path(memprobe_core.__file__).resolve().parent.parent
    candidates = [beside / INSTALLED_FOLDER, beside]  # a wheel's site-packages; a clone
    for folder in candidates:
        if (folder / "app.py").is_file() and (folder / CONFIG).is_file():
            return folder
    raise UsageError(
        f"the dashboard's files (app.py, {CONFIG}) are in none of "
        f"{', '.join(map(str, candidates))}: reinstall memprobe ({INSTALL_LINE})"
    )


def streamlit_command(folder: Path, *, host: str, port: int) -> list[str]:
    """``python -m streamlit run app.py`` with the folder's config as flags, address and port."""
    with (folder / CONFIG).open("rb") as file:
        settings = config_flags(tomllib.load(file))
    settings["server.address"] = host
    settings["server.port"] = str(port)
    flags = [part for name, value in settings.items() for part in (f"--{name}", value)]
    return [sys.executable, "-m", "streamlit", "run", str(folder / "app.py"), *flags]


def config_flags(config: Mapping[str, Any]) -> dict[str, str]:
    """``{"server.address": "127.0.0.1", …}``: a Streamlit config file's settings as flags."""
    return {
        f"{section}.{name}": _flag_value(value)
        for section, values in config.items()
        for name, value in values.items()
    }


def _flag_value(value: object) -> str:
    if isinstance(value, bool):  # TOML's true/false, as Streamlit's flags spell them
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise ValueError(f"{value!r}: a dashboard setting of a kind memprobe cannot pass as a flag")


def server_env(environ: Mapping[str, str], store: Path | None) -> dict[str, str]:
    """The server's environment: offline unless said otherwise, and ``--store`` as the store."""
    env = dict(environ)
    # As scripts/setup.sh does: the embedded models need no hub; HF_HUB_OFFLINE=0 lifts it.
    env.setdefault("HF_HUB_OFFLINE", "1")
    if store is not None:  # the pages read the store from MEMPROBE_STORE (memprobe_core.paths)
        env["MEMPROBE_STORE"] = str(store.expanduser().resolve())
    return env


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is not None:
        return
    server.terminate()
    try:
        server.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
