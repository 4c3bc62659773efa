"""Helpers of the fault-injection suite: a slowed fake backend, CLI runs in a process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# `memprobe` in a fresh interpreter, its fake backend slowed by SLOW_FAKE_S per generate call so a
# signal can land while a unit is in flight (the fake backend is instant otherwise).
CLI_DRIVER = r"""
import os, sys, time
from memprobe_core.models import fake
delay = float(os.environ.get("SLOW_FAKE_S", "0"))
original = fake.FakeGenerator._generate
def slowed(self, *args, **kwargs):
    time.sleep(delay)
    return original(self, *args, **kwargs)
fake.FakeGenerator._generate = slowed
from memprobe_core.cli import main
sys.exit(main(sys.argv[1:]))
"""


def cli_process(args: list[str], *, slow_s: float = 0.0, **popen: object) -> subprocess.Popen:
    """Start ``memprobe ARGS`` (fake backend slowed by ``slow_s``) in a new Python process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLOW_FAKE_S": str(slow_s)}
    return subprocess.Popen(
        [sys.executable, "-c", CLI_DRIVER, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )  # type: ignore[call-overload]


def wait_for(
    condition: Callable[[], bool], *, timeout_s: float = 60.0, what: str = "condition"
) -> None:
    """Poll ``condition`` until true (a generous bound: the CI machine may be busy)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout_s} s")
        time.sleep(0.05)


def one_line_error(err: str) -> str:
    """The error of a failed command: one ``memprobe:`` line, last, no traceback; returns it.

    Progress lines an audit printed before the fault may precede it.
    """
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    errors = [line for line in lines if line.startswith("memprobe:")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    return errors[0]


def read_request(conn: socket.socket) -> bool:
    """Read one HTTP request from ``conn``: its headers and its Content-Length of body, so a
    raw-socket test server's reply follows it. False when the client hung up first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        body += chunk
    return True
