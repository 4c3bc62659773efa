"""The docs follow the registry: docs/method.md §3's methods table and docs/options.md's tables of
each method's options are generated for every registered method, ``options_doc --check`` names
one that has none (an installed plugin's included), and the README names memprobe's methods."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memprobe_core.attacks import registry
from memprobe_core.cli import options_doc
from memprobe_core.option_fields import option

ROOT = Path(__file__).resolve().parents[2]


def _section_3() -> str:
    text = (ROOT / "docs" / "method.md").read_text(encoding="utf-8")
    return text[text.index("## 3. Methods compared") : text.index("### Algorithm 1")]


def test_method_md_section_3_has_a_row_for_every_built_in_method() -> None:
    built_in = options_doc.documented_specs(only_built_in=True)
    assert built_in, "no built-in method registered"
    assert "<!-- generated: methods -->" in _section_3()
    assert options_doc.missing_rows(_section_3(), built_in) == []
    for spec in built_in:
        assert f"| {spec.label} (`{spec.name}`) |" in _section_3(), spec.name


@dataclass(frozen=True)
class _PluginOptions:
    depth: int = option(2, help="how deep the plugin digs", low=1, high=9)


# Registered from outside memprobe, as an installed plugin's method is.
PLUGIN = registry.MethodSpec(
    name="docs_plugin",
    label="Docs plugin",
    run=print,
    roles=("victim",),
    rank=88,
    options_key="docs_plugin",
    options_class=_PluginOptions,
    summary="a method memprobe's own pages do not document",
)


@pytest.fixture
def plugin() -> Iterator[registry.MethodSpec]:
    registry.register(PLUGIN)
    yield PLUGIN
    registry.unregister(PLUGIN.name)


def test_check_names_a_registered_method_without_its_table_or_row(plugin, capsys) -> None:
    assert not options_doc.built_in(plugin)
    assert options_doc.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "no <!-- generated: docs_plugin-fields --> table" in err
    assert "options of method docs_plugin" in err
    assert "§3's methods table has no row for method docs_plugin" in err
    # memprobe's own pages document memprobe's own methods.
    assert options_doc.main(["--check", "--built-in"]) == 0


def test_a_registered_method_with_its_markers_gets_its_tables(plugin, tmp_path) -> None:
    options = tmp_path / "options.md"
    # A marker for each installed plugin's options too (this one, and any other installed).
    sections = {
        s.options_key for s in registry.specs() if s.options_key and not options_doc.built_in(s)
    }
    markers = "".join(f"<!-- generated: {k}-fields -->\n<!-- end generated -->\n" for k in sections)
    options.write_text(options_doc.DOC.read_text(encoding="utf-8") + markers, encoding="utf-8")
    method = tmp_path / "method.md"
    method.write_text(options_doc.METHOD_DOC.read_text(encoding="utf-8"), encoding="utf-8")
    pages = ["--file", str(options), "--method-file", str(method)]
    assert options_doc.main(pages) == 0
    assert options_doc.main(["--check", *pages]) == 0
    assert "| `depth` | `2` | how deep the plugin digs (from 1 to 9) |" in options.read_text()
    assert "| Docs plugin (`docs_plugin`) | victim | greedy |" in method.read_text()


def test_a_built_in_method_whose_table_is_gone_is_named(tmp_path, capsys) -> None:
    page = tmp_path / "options.md"
    text = options_doc.DOC.read_text(encoding="utf-8")
    page.write_text(text.replace("<!-- generated: acr-fields -->", ""), encoding="utf-8")
    assert options_doc.main(["--check", "--built-in", "--file", str(page)]) == 1
    assert "acr-fields --> table (options of method acr" in capsys.readouterr().err


def test_the_readme_names_every_built_in_method() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # "**Methods**", no count: a count spelled here would go stale with the first plugin.
    found = re.search(r"^- \*\*Methods\*\*.*?(?=^- )", readme, re.S | re.M)
    assert found, "the README's methods bullet is gone"
    bullet = found.group(0)
    short = [s.label.split(" (")[0] for s in options_doc.documented_specs(only_built_in=True)]
    assert not [label for label in short if label not in bullet], bullet
