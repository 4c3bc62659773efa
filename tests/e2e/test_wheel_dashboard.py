"""The wheel holds the dashboard, and ``memprobe dashboard`` serves it from a fresh virtualenv.

The wheel is built from a copy of this checkout's files (what git tracks plus untracked files it
does not ignore: a stale ``build/`` of the checkout cannot leak into it), offline, with this
venv's setuptools. The fresh venv has no pip and no system packages; the wheel goes in with this
venv's pip (``--python``), and memprobe's dependencies come from this venv's site-packages through
a ``.pth`` line. A path added by a ``.pth`` line has its own ``.pth`` files skipped, so the
editable install of this checkout (``__editable__.memprobe-0.1.0.pth``) stays hidden: the only
memprobe the venv imports is the wheel's, which the test checks.

Streamlit answers 200 for any path (``/Nope`` too: the browser picks the page), so the pages are
also opened in Debian's chromium: each must draw its title and no exception.
"""

from __future__ import annotations

import ast
import collections
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.browser_fixtures import (  # noqa: F401 - fixtures used by name
    ARTIFACTS,
    ROOT,
    _free_port,
    _wait_healthy,
    browser_context,
    page,
    publish_screenshot,
    require_chromium,
    wait_idle,
)

pytestmark = pytest.mark.slow

DASHBOARD = "memprobe_dashboard"
TIMEOUT_S = 300


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, check=True, capture_output=True, text=True, timeout=TIMEOUT_S, **kwargs
    )


def _checkout_files() -> list[str]:
    listing = _run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT
    )
    return [name for name in listing.stdout.split("\0") if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip wheel --no-deps --no-build-isolation .`` of a copy of the checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    for name in _checkout_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run(
        [
            *pip,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            str(source),
            "-w",
            str(tmp),
        ]
    )
    (built,) = tmp.glob("memprobe-*.whl")
    return built


def _wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def _page_titles(app: Path) -> list[str]:
    """The titles (= URL paths) in app.py's ``PAGES``, read without running the script."""
    for node in ast.parse(app.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PAGES":
            return [title for _, title, _, _ in ast.literal_eval(node.value)]
    raise AssertionError(f"no PAGES list in {app}")


def test_the_wheel_holds_the_library_the_dashboard_and_its_settings(wheel: Path) -> None:
    names = set(_wheel_names(wheel))
    tree = {name for name in _checkout_files() if name.endswith(".py")}
    library = {n for n in tree if n.startswith(("memprobe_core/", "ui_common/"))}
    assert library and library <= names, sorted(library - names)
    scripts = {n for n in tree if n == "app.py" or n.startswith("pages/")}
    assert {f"{DASHBOARD}/{n}" for n in scripts} <= names
    assert f"{DASHBOARD}/.streamlit/config.toml" in names
    # Only those from the mapped root (not setup.py, README.md, pyproject.toml …).
    dashboard = {n for n in names if n.startswith(f"{DASHBOARD}/")}
    assert dashboard == {f"{DASHBOARD}/{n}" for n in scripts} | {
        f"{DASHBOARD}/.streamlit/config.toml"
    }
    # Nothing else at the top of site-packages: no module `app`, no package `pages`.
    tops = collections.Counter(name.split("/")[0] for name in names)
    print("wheel files per top folder:", dict(tops))
    assert set(tops) == {"memprobe_core", "ui_common", DASHBOARD, "memprobe-0.1.0.dist-info"}


@dataclass
class Venv:
    root: Path
    python: Path
    site: Path


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv holding the wheel; the dependencies come from this venv by a ``.pth`` line."""
    root = tmp_path_factory.mktemp("venv") / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(root)])
    python = root / "bin" / "python"
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
        ).stdout.strip()
    )
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python)]
    _run([*pip, "install", "--no-index", "--no-deps", str(wheel)])
    (site / "memprobe_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return Venv(root, python, site)


def _clean_env(tmp: Path) -> dict[str, str]:
    """This environment without the checkout on the path, the fake default or the user's store
    (MEMPROBE_HOME stays: the embedded models converted once are reused)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MEMPROBE_UI_FAKE")}
    env["MEMPROBE_STORE"] = str(tmp / "runs.sqlite")
    return env


def test_the_venv_imports_the_wheel_not_the_checkout(venv: Venv, tmp_path: Path) -> None:
    probe = (
        "import memprobe_core, ui_common; print(memprobe_core.__file__); print(ui_common.__file__)"
    )
    out = _run([str(venv.python), "-c", probe], cwd=tmp_path, env=_clean_env(tmp_path)).stdout
    for line in out.split():
        assert Path(line).is_relative_to(venv.site), line


@dataclass
class Served:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    store: Path


@pytest.fixture(scope="module")
def served(venv: Venv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``memprobe dashboard --port P`` of the fresh venv, from a folder outside the checkout."""
    tmp = tmp_path_factory.mktemp("served")
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / "streamlit-wheel.log"
    port = _free_port()
    store = tmp / "given.sqlite"  # not the environment's MEMPROBE_STORE: --store wins
    memprobe = str(venv.root / "bin" / "memprobe")
    cmd = [memprobe, "--store", store.name, "dashboard", "--port", str(port)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=tmp,
            env=_clean_env(tmp),
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_default_sigint,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log_path)
        yield Served(url, proc, log_path, store)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


def test_memprobe_dashboard_serves_the_installed_app_on_localhost(
    served: Served, venv: Venv
) -> None:
    assert f"memprobe: the dashboard of {venv.site / DASHBOARD}\n" in served.log.read_text()
    app = venv.site / DASHBOARD / "app.py"
    titles = _page_titles(app)
    assert len(titles) == len(list((venv.site / DASHBOARD / "pages").glob("*.py")))
    for path in ["_stcore/health", "", *titles]:
        with urllib.request.urlopen(f"{served.url}/{path}", timeout=30) as response:
            assert response.status == 200, path


@pytest.mark.browser
def test_every_page_of_the_installed_dashboard_draws_in_a_browser(
    served: Served,
    venv: Venv,
    page,  # noqa: F811 - the fixture
) -> None:
    require_chromium()
    for title in ["", *_page_titles(venv.site / DASHBOARD / "app.py")]:
        page.goto(f"{served.url}/{title}")
        page.get_by_test_id("stSidebar").wait_for(timeout=60_000)
        page.locator("h1").first.wait_for(timeout=60_000)
        wait_idle(page)
        assert page.get_by_test_id("stException").count() == 0, title
        heading = page.locator("h1").first.inner_text()
        assert heading.strip(), title
        if not title:  # Home: the store is the one the command was given
            assert f"Store: {served.store}" in page.locator("body").inner_text()
            shot = ARTIFACTS / "dashboard-from-wheel.png"
            # The top of the page (the rest of the tall test viewport is empty).
            clip = {"x": 0, "y": 0, "width": 1440, "height": 1000}
            page.screenshot(path=str(shot), clip=clip, timeout=90_000)
            publish_screenshot(shot)


def test_a_taken_port_is_bad_usage_naming_the_flag(
    served: Served, venv: Venv, tmp_path: Path
) -> None:
    taken = served.url.rsplit(":", 1)[1]
    cmd = [str(venv.root / "bin" / "memprobe"), "dashboard", "--port", taken]
    done = subprocess.run(
        cmd, cwd=tmp_path, env=_clean_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert f"if port {taken} is taken, choose another with --port" in done.stderr


def test_ctrl_c_stops_the_command_and_its_server(served: Served) -> None:
    served.proc.send_signal(signal.SIGINT)  # the command only: the server must be stopped by it
    assert served.proc.wait(timeout=60) == 130
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{served.url}/_stcore/health", timeout=2)
        except OSError:
            return
        time.sleep(0.5)
    pytest.fail(f"the server still answers after memprobe exited; see {served.log}")


def _default_sigint() -> None:
    """In the child: Ctrl-C's default. A CI runner that starts the suite as a background job
    ignores SIGINT, and a child inherits that (then the Ctrl-C tests would send it in vain)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _setup_done() -> bool:
    """scripts/setup.sh would install nothing: its stamp in .venv matches (CI, after
    scripts/test.sh's set-up). Otherwise sourcing it would pip-install into the checkout's venv."""
    inputs = ("requirements.txt", "requirements-nodeps.txt", "pyproject.toml", "setup.py")
    want = hashlib.sha256(b"".join((ROOT / name).read_bytes() for name in inputs)).hexdigest()
    stamp = ROOT / ".venv" / ".memprobe-installed"
    return stamp.is_file() and stamp.read_text().strip() == want


def test_scripts_run_sh_serves_the_clone_with_the_same_command(tmp_path: Path) -> None:
    if not _setup_done():
        pytest.skip("scripts/setup.sh's stamp is stale: sourcing it would reinstall into .venv")
    port = _free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / "streamlit-run-sh.log"
    cmd = ["bash", str(ROOT / "scripts" / "run.sh"), "--port", str(port)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=tmp_path,
            env=_clean_env(tmp_path),
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_default_sigint,
        )
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", proc, log_path)
        assert f"memprobe: the dashboard of {ROOT}\n" in log_path.read_text()
        proc.send_signal(signal.SIGINT)  # run.sh execs the command: this is memprobe
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
