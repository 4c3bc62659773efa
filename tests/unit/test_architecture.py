"""The package structure holds: no import cycle between memprobe's modules, every import pointing
down the declared layers (:data:`LAYERS`; every import counted: function-level and type-checking
ones too), the core never imports Streamlit, and never a plugin's module by name: plugin modules
(loaded through the ``memprobe.methods`` / ``memprobe.signals`` entry points) sit above every
layer, so they may import any of memprobe, and memprobe reaches them only through
``memprobe_core.plugins``."""

from __future__ import annotations

import ast
from importlib import metadata
from pathlib import Path

import networkx as nx

from memprobe_core.plugins import GROUPS

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "memprobe_core"
UI = ROOT / "ui_common"

# memprobe's layers, lowest first: a module may import from its own layer and the layers below,
# never from one above. An entry names a module or a package (with everything in it); a module
# belongs to its longest entry, so a package can hand one of its modules to a lower layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    # Facts every layer reads: errors, the bounded parsing of outside JSON and TOML, paths, the
    # scoring config, redaction, PII patterns, the shared statistical conventions, the option
    # declarations, the machine's load, and the root package (version, logger name).
    (
        "memprobe_core",
        "memprobe_core.errors",
        "memprobe_core.bounded",
        "memprobe_core.option_fields",
        "memprobe_core.records",
        "memprobe_core.paths",
        "memprobe_core.user_paths",
        "memprobe_core.config",
        "memprobe_core.secrets",
        "memprobe_core.pii",
        "memprobe_core.stats",
        "memprobe_core.machine_load",
        # plugins: finds and imports entry points by name, importing no memprobe module itself.
        "memprobe_core.plugins",
    ),
    # Whole documents' pure parts: reading a file, nv-recall (and its block finder), token
    # windows, Best-of-N.
    (
        "memprobe_core.metrics",
        "memprobe_core.documents.reading",
        "memprobe_core.documents.nv_recall",
        "memprobe_core.documents.word_matching",
        "memprobe_core.documents.windows",
        "memprobe_core.documents.perturb",
        "memprobe_core.documents.builtin",
    ),
    ("memprobe_core.highlight", "memprobe_core.snippets"),
    ("memprobe_core.models",),
    # What is measured beside each result: ``MeasureOptions`` is part of every run's options
    # (``AttackOptions.measure``), so it and the pure scores whose parameters it holds (DC-PDD,
    # PAC, the sampler) sit below the methods, in a package of their own: ``membership`` reads
    # the methods' results and is above them, whole (no module of it handed to a lower layer).
    ("memprobe_core.measuring",),
    # Continuation extraction of a whole document queries a victim (``models.base``), as a method
    # does; the rest of ``documents`` (nv-recall, the Best-of-N perturbations) is pure text.
    ("memprobe_core.attacks", "memprobe_core.documents.continuation"),
    # What reads the methods' results: membership evaluation and the measurement of each result,
    # the chance level of Mem, the NER audit.
    ("memprobe_core.membership", "memprobe_core.chance", "memprobe_core.ner"),
    ("memprobe_core.store",),
    ("memprobe_core.report",),
    # Whole documents' runs: the extraction map and continuation, scored by the victim, stored
    # unit by unit, reported with the report's formula-safe CSV.
    ("memprobe_core.documents",),
    # Model against model and release gates: read runs through the store and the report's
    # statistics.
    ("memprobe_core.release",),
    ("memprobe_core.runs",),
    ("memprobe_core.executors",),
    ("memprobe_core.audit",),
    ("memprobe_core.cli",),
    ("ui_common",),
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(*packages: Path) -> dict[str, Path]:
    return {_module_name(p): p for package in packages or (CORE,) for p in package.rglob("*.py")}


def _imports(path: Path, name: str, known: set[str], *, parents: bool = True) -> set[str]:
    """The memprobe modules ``path`` imports anywhere in its body (resolved to modules).

    ``parents``: also the packages whose ``__init__`` such an import runs first (a cycle through
    one is a real cycle); the layer check leaves them out, as it checks each ``__init__``'s own
    imports.
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import sub` imports the module pkg.sub when there is one.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for target in targets:
            if target.split(".")[0] not in _PACKAGES:
                continue
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            # Importing a.b.c from outside package a.b first runs a.b's __init__: count it.
            parent = target.rpartition(".")[0] if parents else ""
            while parent and not name.startswith(parent + ".") and parent != name:
                found.add(parent)
                parent = parent.rpartition(".")[0]
            found.add(target)
    found.discard(name)
    return found


_PACKAGES = {"memprobe_core", "ui_common"}


def _graph(*packages: Path, parents: bool = True) -> nx.DiGraph:
    modules = _modules(*packages)
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for target in _imports(path, name, set(modules), parents=parents):
            graph.add_edge(name, target)
    return graph


def _plugin_packages() -> set[str]:
    """Top-level packages of the modules installed plugins declare under memprobe's entry-point
    groups (memprobe's own built-ins, ``memprobe_core`` modules, left out)."""
    return {
        ep.module.split(".")[0]
        for group in GROUPS
        for ep in metadata.entry_points(group=group)
        if ep.module.split(".")[0] not in _PACKAGES
    }


def _layer(
    module: str,
    layers: tuple[tuple[str, ...], ...] = LAYERS,
    plugins: frozenset[str] = frozenset(),
) -> int | None:
    """The index in ``layers`` of ``module``'s longest entry (``None``: no entry names it). The
    root package's entry is the root module alone, not everything under it. A module of one of
    the ``plugins`` packages is above every layer (``len(layers)``)."""
    if module.split(".")[0] in plugins:
        return len(layers)
    best: tuple[int, int] | None = None  # (entry length, layer)
    for index, entries in enumerate(layers):
        for entry in entries:
            covers = module == entry or (entry != CORE.name and module.startswith(entry + "."))
            if covers and (best is None or len(entry) > best[0]):
                best = (len(entry), index)
    return None if best is None else best[1]


def _upward_imports(
    graph: nx.DiGraph,
    layers: tuple[tuple[str, ...], ...] = LAYERS,
    plugins: frozenset[str] = frozenset(),
) -> list[str]:
    """Each import of a higher layer, as ``"importer (layer i) -> imported (layer j)"``."""
    found = []
    for importer, imported in sorted(graph.edges):
        low, high = _layer(importer, layers, plugins), _layer(imported, layers, plugins)
        if low is not None and high is not None and high > low:
            found.append(f"{importer} (layer {low}) -> {imported} (layer {high})")
    return found


def test_no_import_cycle_between_modules() -> None:
    graph = _graph()
    # A package's __init__ re-exporting its own submodules is not a cycle: Python has the
    # package half-built while they load, and they never read it back.
    inner = [(a, b) for a, b in graph.edges if a.startswith(b + ".")]
    graph.remove_edges_from(inner)
    cycles = list(nx.simple_cycles(graph))
    assert cycles == [], f"import cycles: {sorted(cycles, key=len)[:5]}"


def test_the_cycle_check_sees_a_cycle_through_a_function_level_import(tmp_path: Path) -> None:
    known = {"memprobe_core.a", "memprobe_core.b"}
    a = tmp_path / "a.py"
    a.write_text("from memprobe_core import b\n")
    b = tmp_path / "b.py"
    b.write_text("def f():\n    from memprobe_core.a import thing\n")
    graph = nx.DiGraph()
    graph.add_edges_from(("memprobe_core.a", t) for t in _imports(a, "memprobe_core.a", known))
    graph.add_edges_from(("memprobe_core.b", t) for t in _imports(b, "memprobe_core.b", known))
    assert list(nx.simple_cycles(graph))


def test_every_module_has_a_layer() -> None:
    graph = _graph(CORE, UI)
    assert [m for m in sorted(graph.nodes) if _layer(m) is None] == []


def test_imports_point_down_the_layers() -> None:
    upward = _upward_imports(_graph(CORE, UI, parents=False))
    assert upward == [], "imports of a higher layer:\n" + "\n".join(upward)


def test_the_layer_check_sees_hidden_upward_imports(tmp_path: Path) -> None:
    """An import inside a function, or under ``if TYPE_CHECKING:``, counts as any other."""
    layers = (("memprobe_core.low",), ("memprobe_core.high",))
    known = {"memprobe_core.low", "memprobe_core.high"}
    hidden = {
        "in a function": "def f():\n    from memprobe_core.high import thing\n",
        "type-checking only": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from memprobe_core import high\n"
        ),
    }
    for how, source in hidden.items():
        low = tmp_path / "low.py"
        low.write_text(source)
        graph = nx.DiGraph()
        graph.add_edges_from(
            ("memprobe_core.low", t) for t in _imports(low, "memprobe_core.low", known)
        )
        assert _upward_imports(graph, layers) == [
            "memprobe_core.low (layer 0) -> memprobe_core.high (layer 1)"
        ], how


def _plugin_imports(path: Path, name: str, plugins: frozenset[str]) -> set[str]:
    """The modules of ``plugins`` packages that ``path`` names anywhere in its body: imported,
    or given to ``importlib.import_module`` / ``__import__`` as a literal string."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            targets = [node.module]
        elif isinstance(node, ast.Call) and node.args:
            func, first = node.func, node.args[0]
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(first, ast.Constant):
                targets = [str(first.value)]
        found.update(t for t in targets if t.split(".")[0] in plugins)
    return found


def _plugin_graph(plugins: frozenset[str], *packages: Path) -> nx.DiGraph:
    graph = nx.DiGraph()
    for name, path in _modules(*packages).items():
        graph.add_edges_from((name, target) for target in _plugin_imports(path, name, plugins))
    return graph


def test_the_core_never_imports_a_plugin_module_by_name() -> None:
    """Plugins are found through their entry points (``memprobe_core.plugins``) only: any other
    import of one would tie memprobe to a package it does not ship."""
    plugins = frozenset(_plugin_packages())
    upward = _upward_imports(_plugin_graph(plugins, CORE, UI), plugins=plugins)
    assert upward == [], "imports of a plugin module:\n" + "\n".join(upward)


def test_plugin_packages_are_the_entry_points_outside_memprobe(monkeypatch) -> None:
    declared = {
        "memprobe.methods": [
            metadata.EntryPoint("gcg", "memprobe_core.attacks.gcg", "memprobe.methods"),
            metadata.EntryPoint("echo", "memprobe_echo.method", "memprobe.methods"),
        ],
        "memprobe.signals": [
            metadata.EntryPoint("ttr", "memprobe_ttr.signal", "memprobe.signals"),
        ],
    }
    monkeypatch.setattr(metadata, "entry_points", lambda group: declared.get(group, []))
    assert _plugin_packages() == {"memprobe_echo", "memprobe_ttr"}


def test_the_plugin_check_sees_an_import_of_a_plugin_module(tmp_path: Path) -> None:
    """A plugin's module imported, or imported by a literal name, is above every layer; the
    plugin itself may import memprobe (any layer)."""
    plugins = frozenset({"memprobe_echo"})
    hidden = {
        "imported": "def f():\n    from memprobe_echo.method import run\n",
        "by name": "import importlib\nimportlib.import_module('memprobe_echo.method')\n",
    }
    low = "memprobe_core.attacks.low"  # a module of a real layer
    for how, source in hidden.items():
        (tmp_path / "low.py").write_text(source)
        graph = nx.DiGraph()
        graph.add_edges_from((low, t) for t in _plugin_imports(tmp_path / "low.py", low, plugins))
        graph.add_edge("memprobe_echo.method", "memprobe_core.attacks.registry")  # allowed
        assert _upward_imports(graph, plugins=plugins) == [
            f"{low} (layer {_layer(low)}) -> memprobe_echo.method (layer {len(LAYERS)})"
        ], how


def test_a_module_belongs_to_its_longest_entry() -> None:
    layers = (("memprobe_core", "memprobe_core.pkg.low"), ("memprobe_core.pkg",))
    assert _layer("memprobe_core", layers) == 0
    assert _layer("memprobe_core.pkg.low", layers) == 0
    assert _layer("memprobe_core.pkg", layers) == 1
    assert _layer("memprobe_core.pkg.other", layers) == 1
    assert _layer("memprobe_core.elsewhere", layers) is None  # the root is not a prefix


def test_the_core_never_imports_streamlit() -> None:
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n.split(".")[0] == "streamlit" for n in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
