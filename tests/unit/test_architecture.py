"""The package structure holds: no import cycle between memprobe's modules (every import counted:
function-level and type-checking ones too), and the core never imports Streamlit."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "memprobe_core"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in CORE.rglob("*.py")}


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The memprobe modules ``path`` imports anywhere in its body (resolved to modules)."""
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
            if not target.startswith("memprobe_core"):
                continue
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            # Importing a.b.c from outside package a.b first runs a.b's __init__: count it.
            parent = target.rpartition(".")[0]
            while parent and not name.startswith(parent + ".") and parent != name:
                found.add(parent)
                parent = parent.rpartition(".")[0]
            found.add(target)
    found.discard(name)
    return found


def _graph() -> nx.DiGraph:
    modules = _modules()
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for target in _imports(path, name, set(modules)):
            graph.add_edge(name, target)
    return graph


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
