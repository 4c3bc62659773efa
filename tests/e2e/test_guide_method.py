"""docs/adding-a-method.md works as written: its file blocks, written out and pip-installed as a
package of their own, are a method that the CLI lists, audits and reports (its figure a column
of the per-unit CSV and of the HTML report); the package's own test passes; and memprobe's
registry-dependent tests pass with it installed, with no other edit.

Everything runs in subprocesses whose ``PYTHONPATH`` puts the installed plugin first, so nothing
of this process's registry or imports leaks in, and whose every ``MEMPROBE_*`` variable is
dropped and the memprobe home pointed into the test's folder, so nothing reaches the user's
store. The victim is ``fake:victim`` (any victim does; the embedded one is minutes on a CPU):
what is checked is the path from an installed module to every view.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from memprobe_core.store import Store
from tests.helpers.guide_blocks import install_package, write_package

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "adding-a-method.md"
METHOD = "example_echo"

# memprobe's tests that read the registry (its lists, docs, contract, option fields, reports and
# the dashboard's method pickers): each must hold for whatever methods are installed.
REGISTRY_TESTS = [
    "tests/unit/attacks/test_registry.py",
    "tests/unit/test_docs_methods.py",
    "tests/unit/attacks/test_methods_contract.py",
    "tests/unit/test_option_fields.py",
    "tests/unit/report",
    "tests/app/test_registry_toy_method.py",
    "tests/app/test_app_pages.py::test_compare_runs_the_methods_side_by_side",
    "tests/app/test_app_pages.py::test_compare_offers_reverse_lm_only_with_a_reverse_model",
    "tests/app/test_app_pages.py::test_audit_runs_and_reports",
]


@dataclass(frozen=True)
class Plugin:
    files: dict[str, Path]  # the guide's blocks, by path inside the package
    source: Path  # the package folder the blocks were written to
    target: Path  # where pip installed it (first on the subprocesses' PYTHONPATH)
    home: Path  # the memprobe home of every subprocess


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Plugin:
    """The guide's package, written from its blocks alone and pip-installed into a folder."""
    root = tmp_path_factory.mktemp("guide")
    source, target = root / "memprobe-example-echo", root / "site"
    files = write_package(GUIDE, source)
    install_package(source, target)
    return Plugin(files, source, target, root / "home")


def isolated_env(plugin: Plugin) -> dict[str, str]:
    """This environment less every ``MEMPROBE_*`` variable (a user's store, threads, ...), with
    the memprobe home in the test's folder and the installed plugin on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPROBE_")}
    path = [str(plugin.target), str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    return {
        **env,
        "PYTHONPATH": os.pathsep.join(path),
        "MEMPROBE_HOME": str(plugin.home),
        "HF_HUB_OFFLINE": "1",
    }


def python(
    plugin: Plugin, *args: str, cwd: Path, timeout: int = 600, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**isolated_env(plugin), **(extra or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def memprobe(plugin: Plugin, *args: str) -> subprocess.CompletedProcess[str]:
    return python(plugin, "-m", "memprobe_core.cli", *args, cwd=plugin.home.parent)


def audit_echo(plugin: Plugin, *extra: str) -> subprocess.CompletedProcess[str]:
    """The guide's audit: the demo corpus, one snippet a domain, length 40, the guide's method."""
    corpus = ("--corpus", "--per-domain", "1", "--lengths", "40")
    method = ("--methods", METHOD, "--victim", "fake:victim")
    return memprobe(plugin, "audit", *corpus, *method, *extra)


def stored_output(plugin: Plugin, row: dict[str, str]) -> str:
    """The unit's output as the store keeps it (the CSV may have escaped it)."""
    with Store(plugin.home / "runs.sqlite") as store:
        (unit,) = [u for u in store.units(1, status="done") if u["snippet_id"] == row["snippet_id"]]
    return str(unit["output"])


def test_adding_a_method_is_the_files_of_its_own_package(plugin):
    # What the guide has a contributor write: the package's metadata, the module, its test.
    assert sorted(plugin.files) == [
        "memprobe_example_echo.py",
        "pyproject.toml",
        "tests/test_example_echo.py",
    ]
    meta = tomllib.loads(plugin.files["pyproject.toml"].read_text(encoding="utf-8"))
    points = meta["project"]["entry-points"]["memprobe.methods"]
    assert points == {METHOD: "memprobe_example_echo"}


def test_memprobe_finds_the_installed_method(plugin):
    done = memprobe(plugin, "audit", "--help")
    assert done.returncode == 0, done.stderr
    assert METHOD in done.stdout and "Example echo" in done.stdout
    listed = memprobe(plugin, "plugins")
    assert listed.returncode == 0, listed.stderr
    assert METHOD in listed.stdout and "memprobe-example-echo" in listed.stdout


def test_the_guide_method_audits_and_its_figure_reaches_the_csv_and_html(plugin, monkeypatch):
    # A user's own store, named in this environment: the subprocesses never see it.
    users = plugin.home.parent / "users-store.sqlite"
    monkeypatch.setenv("MEMPROBE_STORE", str(users))
    audit = audit_echo(plugin, "--no-signals", "--method-option", f"{METHOD}.repeat=2")
    assert audit.returncode == 0, audit.stderr + audit.stdout
    assert "Echo chars" in audit.stdout  # Table 1 of the printed report
    assert not users.exists() and (plugin.home / "runs.sqlite").exists()
    units, html = plugin.home.parent / "units.csv", plugin.home.parent / "report.html"
    report = memprobe(plugin, "report", "1", "--csv", str(units), "--html", str(html))
    assert report.returncode == 0, report.stderr
    with units.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["method"] == METHOD for r in rows)
    # The CSV is formula-safe: an output starting like a formula is written with a leading '.
    assert all(int(r["echo_chars"]) == len(stored_output(plugin, r)) for r in rows)
    assert "Echo characters (mean)" in html.read_text(encoding="utf-8")
    assert rows[0]["prompt"].count(rows[0]["prefix"]) == 2  # repeat=2 reached the method


# The dashboard's pages with the plugin installed (fake models, as the app tests run them).
PAGES = """
from tests.app.conftest import open_page
compare = open_page("pages/2_Compare.py")
picker = compare.multiselect(key="cmp_methods")
assert "Example echo" in picker.options
picker.set_value([*picker.value, "example_echo"]).run()  # ticked: its options get widgets
repeat = compare.number_input(key="cmp_example_echo_repeat")
assert "prefix repeats" in repeat.label.lower() and repeat.value == 1, (repeat.label, repeat.value)
audit = open_page("pages/3_Audit.py")
assert "Example echo" in audit.multiselect(key="audit_methods").options
print("offered")
"""


def test_the_compare_and_audit_pages_offer_it_with_its_option(plugin):
    done = python(plugin, "-c", PAGES, cwd=ROOT, extra={"MEMPROBE_UI_FAKE": "1"})
    assert done.returncode == 0 and "offered" in done.stdout, done.stderr[-3000:]


def test_a_bad_option_of_the_guide_method_exits_2_naming_it(plugin):
    done = audit_echo(plugin, "--method-option", f"{METHOD}.repeat=0")
    assert done.returncode == 2 and f"{METHOD}.repeat" in done.stderr


def test_the_packages_own_test_passes(plugin):
    done = python(
        plugin, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=plugin.source
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


@pytest.mark.slow
def test_memprobes_registry_dependent_tests_pass_with_the_plugin_installed(plugin):
    # -v: each test's id, so the plugin's own parameters are seen to have run.
    args = ("-m", "pytest", "-v", "-p", "no:cacheprovider", *REGISTRY_TESTS)
    done = python(plugin, *args, cwd=ROOT, timeout=850)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    for test in (
        "test_methods_contract.py::test_result_is_complete_and_consistent",
        "test_registry.py::test_a_method_is_not_offered_without_a_model_it_declares",
    ):
        assert f"{test}[{METHOD}] PASSED" in done.stdout, test
