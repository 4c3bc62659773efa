"""docs/adding-a-method.md works as written: its one Python block, copied into a fresh copy of
the package at the path its first line names and nothing else changed, is a method that the CLI
lists, audits and reports, its figure a column of the per-unit CSV and of the HTML report.

The copy is a fresh folder (the package and pyproject.toml, no caches), run as a subprocess with
that folder first on the path, so nothing of this process's registry or imports leaks in. The
victim is ``fake:victim`` (any victim does; the embedded one is minutes on a CPU): what is
checked is the path from a dropped-in module to every view.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memprobe_core.store import Store

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "adding-a-method.md"
FIRST_LINE = "# memprobe_core/attacks/example_echo.py"


def guide_module() -> str:
    """The guide's one fenced Python block."""
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, f"the guide has {len(blocks)} Python blocks; it promises one"
    return blocks[0]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A fresh copy of the package with the guide's module dropped in."""
    root = tmp_path_factory.mktemp("fresh")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "memprobe_core", root / "memprobe_core", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    module = guide_module()
    assert module.splitlines()[0] == FIRST_LINE
    (root / FIRST_LINE.removeprefix("# ")).write_text(module, encoding="utf-8")
    return root


def memprobe(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(checkout),
        "MEMPROBE_HOME": str(checkout / "home"),
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "memprobe_core.cli", *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def stored_output(checkout: Path, row: dict[str, str]) -> str:
    """The unit's output as the store keeps it (the CSV may have escaped it)."""
    with Store(checkout / "home" / "runs.sqlite") as store:
        (unit,) = [u for u in store.units(1, status="done") if u["snippet_id"] == row["snippet_id"]]
    return str(unit["output"])


def audit_echo(checkout: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The guide's audit: the demo corpus, one snippet a domain, length 40, the guide's method."""
    corpus = ("--corpus", "--per-domain", "1", "--lengths", "40")
    method = ("--methods", "example_echo", "--victim", "fake:victim")
    return memprobe(checkout, "audit", *corpus, *method, *extra)


def test_the_guide_module_is_the_fresh_copy_that_runs(checkout):
    done = memprobe(checkout, "audit", "--help")
    assert done.returncode == 0, done.stderr
    assert "example_echo" in done.stdout and "Example echo" in done.stdout


def test_the_guide_method_audits_and_its_figure_reaches_the_csv_and_html(checkout):
    audit = audit_echo(checkout, "--no-signals", "--method-option", "example_echo.repeat=2")
    assert audit.returncode == 0, audit.stderr + audit.stdout
    assert "Echo chars" in audit.stdout  # Table 1 of the printed report
    units, html = checkout / "units.csv", checkout / "report.html"
    report = memprobe(checkout, "report", "1", "--csv", str(units), "--html", str(html))
    assert report.returncode == 0, report.stderr
    with units.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["method"] == "example_echo" for r in rows)
    # The CSV is formula-safe: an output starting like a formula is written with a leading '.
    assert all(int(r["echo_chars"]) == len(stored_output(checkout, r)) for r in rows)
    text = html.read_text(encoding="utf-8")
    assert "Echo characters (mean)" in text
    prompt = rows[0]["prompt"]
    assert prompt.count(rows[0]["prefix"]) == 2  # repeat=2 reached the method


def test_a_bad_option_of_the_guide_method_exits_2_naming_it(checkout):
    done = audit_echo(checkout, "--method-option", "example_echo.repeat=0")
    assert done.returncode == 2 and "example_echo.repeat" in done.stderr
