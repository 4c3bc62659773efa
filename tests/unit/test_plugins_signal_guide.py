"""docs/adding-a-signal.md holds as written: its file blocks, written out, are an installable
plugin package; installed with pip, its signal is listed by ``memprobe plugins`` and measured by
an audit of a tiny model, in the CSV and in the membership table, after the built-in signals."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.guide_blocks import guide_blocks, install_package, write_package
from tests.helpers.tiny_models import tiny_causal_lm

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "adding-a-signal.md"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    """The guide's plugin installed into a target folder, and a tiny model saved to load."""
    tmp = tmp_path_factory.mktemp("signal_guide")
    write_package(GUIDE, tmp / "pkg")
    install_package(tmp / "pkg", tmp / "site")
    model, tokenizer = tiny_causal_lm(seed=0)
    model.save_pretrained(str(tmp / "tiny"))
    tokenizer.save_pretrained(str(tmp / "tiny"))
    return {"tmp": tmp, "site": tmp / "site", "model": tmp / "tiny"}


def memprobe(installed: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m memprobe_core.cli ARGS`` with the plugin on PYTHONPATH and every MEMPROBE_*
    variable pointing into the test's folder (never the user's store or home)."""
    tmp = installed["tmp"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPROBE_")}
    env |= {
        # The plugin, and this checkout's memprobe (the one under test, installed or not).
        "PYTHONPATH": os.pathsep.join([str(installed["site"]), str(ROOT)]),
        "MEMPROBE_STORE": str(tmp / "runs.sqlite"),
        "MEMPROBE_HOME": str(tmp / "home"),
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "memprobe_core.cli", *args],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, f"memprobe {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def test_the_guide_names_every_file_of_its_package() -> None:
    files = guide_blocks(GUIDE.read_text(encoding="utf-8"))
    assert set(files) == {
        "pyproject.toml",
        "memprobe_example_gap/__init__.py",
        "memprobe_example_gap/signal.py",
    }
    assert '[project.entry-points."memprobe.signals"]' in files["pyproject.toml"]


def test_the_installed_plugin_is_listed_with_its_distribution(installed) -> None:
    found = json.loads(memprobe(installed, "plugins", "--json").stdout)
    rows = [r for r in found["registered"] if r["kind"] == "signal"]
    assert rows[-1] == {
        "kind": "signal",
        "name": "gap",
        "label": "Log-prob gap",
        "source": "memprobe-example-gap 0.1.0",
    }
    assert found["failed"] == []
    shown = memprobe(installed, "plugins").stdout
    assert "Log-prob gap" in shown and "memprobe-example-gap 0.1.0" in shown


def test_an_audit_measures_the_plugins_signal(installed) -> None:
    # The guide's commands, on a tiny model saved to a folder (--victim DIR --backend hf).
    memprobe(
        installed,
        *("audit", "--corpus", "--nonmembers", "--per-domain", "1", "--lengths", "40"),
        *("--methods", "signals", "--victim", str(installed["model"]), "--backend", "hf"),
        "--no-pz",
    )
    units = installed["tmp"] / "units.csv"
    memprobe(installed, "report", "1", "--csv", str(units))
    rows = list(csv.DictReader(units.open(encoding="utf-8")))
    assert rows and all(float(r["signal_gap"]) > 0 for r in rows)
    assert all(float(r["signal_loss"]) > 0 for r in rows)  # the built-ins beside it
    report = json.loads(memprobe(installed, "report", "1", "--json").stdout)
    signals = [r["score"] for r in report["membership"] if r["kind"] == "signal"]
    assert signals[-1] == "gap" and signals[0] == "loss"
    gap = next(r for r in report["membership"] if r["score"] == "gap")
    assert gap["score_label"] == "Log-prob gap" and gap["n_members"] > 0
