"""Plugins (memprobe_core/plugins.py): entry points of an installed distribution found and loaded,
where each spec came from, a failing plugin listed without stopping memprobe, ``memprobe
plugins``, built-ins without metadata, and the registries' validation at registration."""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from memprobe_core import plugins
from memprobe_core.attacks import registry
from memprobe_core.attacks.figures import Figure
from memprobe_core.cli.main import main
from memprobe_core.membership import SIGNAL_BY_NAME, SIGNALS, MeasureOptions
from memprobe_core.membership import signals as sig
from memprobe_core.membership import signals_registry as sr
from memprobe_core.membership.options import signals_frame
from memprobe_core.membership.signals_registry import SignalSpec, register_signal
from tests.unit.membership.test_signals import LN2, bigram_victim, piece_of

ROOT = Path(__file__).resolve().parents[2]

# A plugin distribution as pip leaves it in site-packages: its package and its .dist-info.
PLUGIN_FILES = {
    "toyplug/__init__.py": "",
    "toyplug/method.py": """
        from memprobe_core.attacks.figures import Figure
        from memprobe_core.attacks.registry import MethodSpec, register

        def run(split, models, options, *, on_event=None, cancel=None):
            raise NotImplementedError

        register(MethodSpec(name="toy_method", label="Toy method", run=run, roles=("victim",),
                            rank=90, figures=(Figure("toy_chars", "toy chars", "int"),)))
        """,
    "toyplug/signal.py": """
        from memprobe_core.membership.signals_registry import SignalSpec, register_signal

        register_signal(SignalSpec(name="toy_gap", label="Toy gap", higher_is_member=False,
                                   description="max - min", compute=lambda d: max(d.log_probs) - min(d.log_probs)))
        """,
    "toyplug/broken.py": "import a_module_nobody_installed\n",
    "toyplug/tokens_signal.py": """
        from memprobe_core.membership.signals_registry import SignalSpec, register_signal

        register_signal(SignalSpec(name="tokens", label="Tokens", higher_is_member=True))
        """,
    "toyplug/mem_figure.py": """
        from memprobe_core.attacks.figures import Figure
        from memprobe_core.attacks.registry import MethodSpec, register

        register(MethodSpec(name="toy_mem", label="Toy mem", run=print, roles=("victim",),
                            rank=91, figures=(Figure("mem", "my mem", "float"),)))
        """,
    "toy_plugin-0.3.dist-info/METADATA": "Metadata-Version: 2.1\nName: toy-plugin\nVersion: 0.3\n",
    "toy_plugin-0.3.dist-info/entry_points.txt": """
        [memprobe.methods]
        toy = toyplug.method
        broken = toyplug.broken
        mem_figure = toyplug.mem_figure

        [memprobe.signals]
        toy_gap = toyplug.signal
        tokens = toyplug.tokens_signal
        """,
}


def write_plugin(root: Path) -> Path:
    for rel, text in PLUGIN_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return root


@pytest.fixture
def isolated(monkeypatch):
    """The registries and the plugin loader's state as they are, restored after the test."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(sr, "_REGISTRY", dict(sr._REGISTRY))
    monkeypatch.setattr(plugins, "_sources", dict(plugins._sources))
    monkeypatch.setattr(plugins, "_failures", [])
    monkeypatch.setattr(plugins, "_loaded", set())
    monkeypatch.setattr(sr, "_WARNED", set())
    yield
    for name in [m for m in sys.modules if m == "toyplug" or m.startswith("toyplug.")]:
        del sys.modules[name]


@pytest.fixture
def toy_plugin(isolated, tmp_path, monkeypatch):
    """The toy distribution on sys.path, its entry points loaded as at start-up."""
    monkeypatch.syspath_prepend(str(write_plugin(tmp_path)))
    plugins.load_all()


def test_a_plugins_method_and_signal_are_registered_with_their_source(toy_plugin) -> None:
    assert "toy_method" in registry.method_names()
    assert registry.method_source("toy_method") == "toy-plugin 0.3"
    assert registry.method_source("ps_base") == "memprobe (built-in)"
    names = [s.name for s in SIGNALS]
    assert names[-1] == "toy_gap"  # after the built-ins
    assert names[:3] == ["loss", "ppl", "suffix_loss"]
    assert plugins.source_of("signal", "toy_gap") == "toy-plugin 0.3"
    assert SIGNAL_BY_NAME["toy_gap"].column == "signal_toy_gap"


def test_a_failing_plugin_is_listed_with_what_to_do_and_the_others_load(toy_plugin) -> None:
    failed = {f.entry_point: f for f in plugins.failures()}
    assert set(failed) == {
        "broken = toyplug.broken",
        "mem_figure = toyplug.mem_figure",
        "tokens = toyplug.tokens_signal",
    }
    refused = failed["tokens = toyplug.tokens_signal"]
    assert refused.group == "memprobe.signals"
    assert "signal 'tokens' from toy-plugin 0.3" in refused.error
    assert "tokens" not in {s.name for s in SIGNALS}
    broken = failed["broken = toyplug.broken"]
    assert broken.distribution == "toy-plugin 0.3" and broken.group == "memprobe.methods"
    assert "ModuleNotFoundError" in broken.error and "a_module_nobody_installed" in broken.error
    assert "pip uninstall toy-plugin" in broken.message
    assert "toy-plugin 0.3" in broken.message


def test_a_figure_named_mem_is_refused_at_registration_naming_the_plugin(toy_plugin) -> None:
    refused = next(f for f in plugins.failures() if f.entry_point.startswith("mem_figure"))
    assert "toy-plugin 0.3" in refused.error
    assert "figure 'mem' is a column the results frame already has" in refused.error
    assert "toy_mem" not in registry.method_names()


def test_memprobe_plugins_lists_everything_and_exits_0_with_failures(toy_plugin, capsys) -> None:
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "toy_method" in out and "Toy gap" in out and "toy-plugin 0.3" in out
    assert "3 plugin entry point(s) failed to load" in out
    assert "pip uninstall toy-plugin" in out
    assert main(["plugins", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    rows = {(r["kind"], r["name"]): r for r in found["registered"]}
    assert rows[("signal", "toy_gap")]["source"] == "toy-plugin 0.3"
    assert rows[("method", "ps_base")] == {
        "kind": "method",
        "name": "ps_base",
        "label": "P-S-Base",
        "source": "memprobe (built-in)",
    }
    assert rows[("method (measures only)", "signals")]["label"] == "Signals only"
    assert len(found["failed"]) == 3


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPROBE_")}
    return {**env, **extra}


def test_memprobe_starts_with_a_broken_plugin_installed(tmp_path) -> None:
    write_plugin(tmp_path / "site")
    done = subprocess.run(
        [sys.executable, "-m", "memprobe_core.cli", "plugins", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_clean_env(PYTHONPATH=str(tmp_path / "site"), MEMPROBE_HOME=str(tmp_path)),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert ("method", "toy_method") in {(r["kind"], r["name"]) for r in found["registered"]}
    assert {f["entry_point"] for f in found["failed"]} == {
        "broken = toyplug.broken",
        "mem_figure = toyplug.mem_figure",
        "tokens = toyplug.tokens_signal",
    }
    assert "toy-plugin 0.3" in done.stderr  # the warning logged at start-up


def test_the_built_ins_load_without_memprobes_entry_points() -> None:
    # A clone that is not installed has no entry points at all.
    code = (
        "import importlib.metadata as m\n"
        "m.entry_points = lambda **kw: m.EntryPoints(())\n"
        "from memprobe_core.attacks import registry\n"
        "from memprobe_core.membership import SIGNALS\n"
        "print(len(registry.method_names()), len(SIGNALS), registry.method_source('gcg'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_clean_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["9", "14", "memprobe", "(built-in)"]


def test_memprobes_own_entry_points_are_declared_for_every_built_in() -> None:
    from importlib import metadata

    declared = {
        ep.value
        for group in plugins.GROUPS
        for ep in metadata.entry_points(group=group)
        if ep.dist is not None and ep.dist.metadata["Name"] == "memprobe"
    }
    modules = {registry.get_method(n).run.__module__ for n in registry.method_names()}
    modules = {m for m in modules if m.startswith("memprobe_core.")}
    assert modules <= declared  # re-run `pip install -e .` if this fails after adding a method
    assert "memprobe_core.membership.builtin_signals" in declared


# --- validation at registration ------------------------------------------------------------------


def _method(name: str = "toy_v", label: str = "Toy V", figures: tuple = ()) -> registry.MethodSpec:
    return registry.MethodSpec(
        name=name, label=label, run=print, roles=("victim",), rank=95, figures=figures
    )


@pytest.mark.parametrize(
    ("figure", "why"),
    [
        ("mem", "a column the results frame already has"),
        ("lcs_p", "a column the results frame already has"),
        ("objective", "a column the results frame already has"),
        ("extractable", "a column the results frame already has"),
        ("chance_n", "a column the results frame already has"),
        ("signal_loss", "a column the results frame already has"),
        ("acr_bound", "method 'acr''s figure"),
        ("Toy-Chars", "lowercase identifier"),
    ],
)
def test_a_figure_that_would_clash_is_refused(isolated, figure: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"method 'toy_v' from .*figure '{figure}'.*") as err:
        registry.register(_method(figures=(Figure(figure, "x", "int"),)))
    assert why in str(err.value)
    assert "toy_v" not in registry.method_names()


def test_a_method_name_and_label_are_checked(isolated) -> None:
    with pytest.raises(ValueError, match="lowercase identifier"):
        registry.register(_method(name="Toy V"))
    with pytest.raises(ValueError, match="label 'GCG' is method 'gcg''s"):
        registry.register(_method(label="GCG"))
    registry.register(_method(figures=(Figure("toy_v_chars", "x", "int"),)))
    assert "toy_v_chars" in registry.figure_columns()


@pytest.mark.parametrize(
    ("name", "label", "why"),
    [
        ("Gap!", "Gap", "lowercase identifier"),
        ("tokens", "Gap", "a key memprobe records beside the signals"),
        ("loss", "Gap", "the name is taken by 'Loss'"),
        ("toy_label", "Min-K%", "label 'Min-K%' is signal 'min_k''s"),
    ],
)
def test_a_signal_that_would_clash_is_refused(isolated, name: str, label: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"signal '{name}' from ") as err:
        register_signal(SignalSpec(name, label, higher_is_member=True, compute=lambda d: 1.0))
    assert why in str(err.value)


# --- a registered signal computed from the scoring pass --------------------------------------------


def _gap(data: sr.SignalInput) -> float:
    return max(data.log_probs) - min(data.log_probs)


def test_a_registered_signal_is_computed_from_the_victims_pass(isolated) -> None:
    register_signal(SignalSpec("toy_gap", "Toy gap", False, description="spread", compute=_gap))
    sig.clear_cache()
    out = sig.compute_signals(bigram_victim(), piece_of(bigram_victim()), MeasureOptions())
    # ℓ_t / ln2 of "abAAb" are −1, −1, −1, −3, −2 (test_signals.py): the spread is 2 ln 2.
    assert out["toy_gap"] == pytest.approx(2 * LN2)
    assert out["loss"] == pytest.approx(8 * LN2 / 5)  # the built-ins unchanged beside it
    shown = signals_frame(out)
    assert shown.loc[shown["signal"] == "Toy gap", "value"].item() == pytest.approx(2 * LN2)
    sig.clear_cache()


def test_a_signal_that_raises_or_is_not_finite_is_none_and_logged(isolated, caplog) -> None:
    def boom(data: sr.SignalInput) -> float:
        raise RuntimeError("plugin bug")

    register_signal(SignalSpec("toy_boom", "Toy boom", True, compute=boom))
    register_signal(SignalSpec("toy_inf", "Toy inf", True, compute=lambda d: math.inf))
    sig.clear_cache()
    with caplog.at_level(logging.WARNING):
        out = sig.compute_signals(bigram_victim(), piece_of(bigram_victim()), MeasureOptions())
    assert out["toy_boom"] is None and out["toy_inf"] is None
    assert out["loss"] == pytest.approx(8 * LN2 / 5)
    assert "toy_boom" in caplog.text and "plugin bug" in caplog.text
    assert plugins.source_of("signal", "toy_boom") in caplog.text
    sig.clear_cache()


def test_a_signal_needing_a_reference_or_the_weights_waits_for_them(isolated) -> None:
    register_signal(SignalSpec("toy_ref", "Toy ref", False, needs_reference=True, compute=_gap))
    register_signal(SignalSpec("toy_w", "Toy w", True, needs_weights=True, compute=_gap))
    served = SimpleNamespace(log_probs=(-1.0, -3.0), mu=None, sigma=None)  # a server's pass
    values = sr.compute_registered(sr.SignalInput(served, "ab", 1, MeasureOptions()))
    assert "toy_ref" not in values and values["toy_w"] is None
    weighed = SimpleNamespace(log_probs=(-1.0, -3.0), mu=(0.0, 0.0), sigma=(1.0, 1.0))
    data = sr.SignalInput(weighed, "ab", 1, MeasureOptions(), reference_nll=2.0)
    values = sr.compute_registered(data)  # with the toy signals, any a plugin installed adds
    assert {k: v for k, v in values.items() if k.startswith("toy_")} == {
        "toy_ref": 2.0,
        "toy_w": 2.0,
    }
