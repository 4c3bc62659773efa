"""README and docs/method.md §3 name every registered method (a new method must be documented)."""

from __future__ import annotations

import re
from pathlib import Path

from memprobe_core.attacks import registry

ROOT = Path(__file__).resolve().parents[2]


def _section_3() -> str:
    text = (ROOT / "docs" / "method.md").read_text(encoding="utf-8")
    return text[text.index("## 3. Methods compared") : text.index("### Algorithm 1")]


def test_method_md_section_3_lists_every_registered_method_by_label_and_name() -> None:
    table = _section_3()
    missing = [
        s.name
        for s in registry.specs()
        if f"(`{s.name}`)" not in table or s.label.split(" (")[0] not in table
    ]
    assert not missing, f"docs/method.md §3 does not list {missing}"


def test_the_readme_counts_and_names_every_registered_method() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^- \*\*\w+ methods\*\*.*?(?=^- )", readme, re.S | re.M)
    assert found, "the README's methods bullet is gone"
    bullet = found.group(0)
    words = {9: "Nine", 10: "Ten", 11: "Eleven", 12: "Twelve"}
    count = len(registry.specs())
    assert re.search(rf"\*\*{words.get(count, str(count))} methods\*\*", bullet), bullet
    short = [s.label.split(" (")[0] for s in registry.specs()]
    assert not [label for label in short if label not in bullet], bullet
