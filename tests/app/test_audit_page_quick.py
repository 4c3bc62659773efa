"""Audit page: a Quick run size on a CPU, the Paper sizes one click away, and the time the audit
should take said before Start (issue 52)."""

from __future__ import annotations

from memprobe_core.snippets.corpus import DOMAINS
from tests.app.conftest import open_page, texts


def test_the_audit_starts_quick_on_a_cpu_and_says_how_long_before_start() -> None:
    at = open_page("pages/3_Audit.py")
    assert at.radio(key="audit_preset").value == "quick"  # no GPU on the test machine
    assert at.number_input(key="audit_limit").value == 1
    assert at.multiselect(key="audit_lengths").value == [50]
    assert (at.number_input(key="audit_rounds").value, at.number_input(key="audit_n").value) == (
        1,
        4,
    )
    before = texts(at)
    assert f"{len(DOMAINS)} snippets from the built-in corpus." in before
    assert "No time measured yet: " in before and " have not run on this victim here." in before
    assert "Rough guess for a 2-core CPU: about" in before
    at.radio(key="audit_preset").set_value("paper").run()
    assert at.number_input(key="audit_limit").value == 2
    assert at.multiselect(key="audit_lengths").value == [200]
    assert at.number_input(key="audit_n").value == 24
    at.number_input(key="audit_limit").set_value(3).run()  # a size is a start, not a lock
    assert at.number_input(key="audit_limit").value == 3
    assert f"{3 * len(DOMAINS)} snippets from the built-in corpus." in texts(at)
