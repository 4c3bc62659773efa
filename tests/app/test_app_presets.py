"""Run-size presets on Probe and Compare: quick on a CPU, the paper's sizes one click away."""

from __future__ import annotations

from tests.app.conftest import open_page


def _sizes(at, prefix: str) -> tuple[int, ...]:  # type: ignore[no-untyped-def]
    return tuple(
        int(at.number_input(key=f"{prefix}_{field}").value) for field in ("length", "rounds", "n")
    )


def test_probe_starts_quick_on_a_cpu_and_the_paper_preset_sets_the_papers_sizes() -> None:
    at = open_page("pages/1_Probe.py")
    assert at.radio(key="probe_preset").value == "quick"  # no GPU on the test machine
    assert _sizes(at, "probe") == (60, 1, 4)
    at.radio(key="probe_preset").set_value("paper").run()
    assert not at.exception
    assert _sizes(at, "probe") == (200, 3, 24)
    at.number_input(key="probe_n").set_value(6).run()  # a preset is a start, not a lock
    assert _sizes(at, "probe") == (200, 3, 6)


def test_compare_has_the_same_presets_with_gcg_steps() -> None:
    at = open_page("pages/2_Compare.py")
    assert at.radio(key="cmp_preset").value == "quick"
    assert _sizes(at, "cmp") == (60, 1, 4)
    at.radio(key="cmp_preset").set_value("paper").run()
    assert _sizes(at, "cmp") == (200, 3, 24)


def test_probe_estimates_the_time_from_earlier_runs_on_this_victim() -> None:
    from tests.app.conftest import run_until, saved, texts

    at = open_page("pages/1_Probe.py")
    before = texts(at)
    assert "No time measured yet: Ours (interactive) has not run on this victim here." in before
    assert "Rough guess for a 2-core CPU: about" in before  # no GPU on the test machine
    at.number_input(key="probe_length").set_value(40)
    at.button(key="probe_run").click()
    run_until(at, saved)
    at.run()
    after = texts(at)
    assert "Estimated time on this machine: " in after
    assert "(from 1 earlier unit of these methods on this victim" in after  # one: singular
    assert "corrected for the load (" in after  # the unit recorded the load it ran under


def test_the_snippet_length_and_run_size_carry_between_probe_and_compare() -> None:
    at = open_page("pages/1_Probe.py")
    at.selectbox(key="snip_probe_domain").set_value("code").run()
    at.number_input(key="probe_length").set_value(80).run()
    at.radio(key="probe_preset").set_value("paper").run()
    at.number_input(key="probe_length").set_value(80).run()
    at.switch_page("pages/2_Compare.py").run()
    assert not at.exception
    assert at.selectbox(key="snip_compare_domain").value == "code"
    assert at.number_input(key="cmp_length").value == 80
    assert at.radio(key="cmp_preset").value == "paper"
    at.number_input(key="cmp_length").set_value(100).run()
    at.switch_page("pages/1_Probe.py").run()
    assert at.number_input(key="probe_length").value == 100  # the newest choice, either page
    assert at.selectbox(key="snip_probe_domain").value == "code"
