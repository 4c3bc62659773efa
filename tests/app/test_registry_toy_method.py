"""A method added as one module is everywhere: the CLI's choices, the Compare and Audit pages'
options, an audit (its options stored and read back) and the report.

The toy method below is the whole of what a new method needs: an options class, an entry
function, one ``register`` call. Nothing else in memprobe is told about it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from memprobe_core.attacks import registry
from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.events import (
    CandidateScored,
    EventCallback,
    Finished,
    RoundFinished,
    RoundStarted,
    emit,
)
from memprobe_core.attacks.manifest import build_manifest
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.result import AttackResult, build_result
from memprobe_core.attacks.scoring import make_candidate, resolve_alpha, score
from memprobe_core.attacks.victim import answer_requests, victim_decoding
from memprobe_core.audit import ModelNames, run_audit, start_audit
from memprobe_core.cli.common import attack_options
from memprobe_core.cli.main import build_parser
from memprobe_core.errors import UsageError
from memprobe_core.option_fields import check_options, option
from memprobe_core.report.build import report_for_run
from memprobe_core.report.text import render_text
from memprobe_core.snippets.split import Snippet, SplitSnippet
from memprobe_core.store import Store, UnitKey
from tests.app.conftest import open_page, run_until, saved

NAME = "toy_repeat"
LABEL = "Toy (prefix twice)"


@dataclass(frozen=True)
class ToyOptions:
    # Declared with its help, range and page label: the CLI, the pages and the docs read these.
    repeats: int = option(2, help="times the prefix is repeated", low=1, high=8, page="Repeats")

    def __post_init__(self) -> None:
        check_options(self, prefix=f"{NAME}.")


def run_toy(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
) -> AttackResult:
    """The true prefix repeated ``repeats`` times as the victim's prompt."""
    toy: ToyOptions = options.for_method(NAME)
    alpha, alpha_source = resolve_alpha(split, models, options)
    meter = CostMeter()
    prompt = " ".join([split.prefix] * toy.repeats)
    emit(on_event, RoundStarted(round=0, n=1))
    (answer,) = answer_requests(meter, models.victim, [prompt], split, options)
    (scores,) = score(
        meter, [prompt], [answer.scored], split, models.victim, options, alpha, windowed=True
    )
    cand = make_candidate(0, 0, prompt, answer, scores, extra={"repeats": toy.repeats})
    cand.is_round_best = True
    emit(on_event, CandidateScored(round=0, candidate=cand))
    emit(on_event, RoundFinished(round=0, best=cand))
    manifest = build_manifest(
        NAME,
        split,
        models,
        options,
        alpha,
        alpha_source,
        decoding={"model": victim_decoding(split, options).manifest()},
        answer_model="victim",
    )
    result = build_result(
        NAME,
        split,
        chosen=cand,
        trace=[cand],
        alpha=alpha,
        dis=None,
        meter=meter,
        manifest=manifest,
        status="finished",
    )
    emit(on_event, Finished(result=result))
    return result


TOY = registry.MethodSpec(
    name=NAME,
    label=LABEL,
    run=run_toy,
    roles=("victim",),
    rank=45,
    options_key="toy",
    options_class=ToyOptions,
    summary="the true prefix, twice",
)


@contextlib.contextmanager
def toy_registered() -> Iterator[None]:
    registry.register(TOY)
    try:
        yield
    finally:
        registry.unregister(NAME)


@pytest.fixture
def toy() -> Iterator[None]:
    with toy_registered():
        yield


def _cli_choices(command: str, dest: str) -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    action = next(a for a in sub.choices[command]._actions if a.dest == dest)
    return list(action.choices)


def test_the_cli_offers_a_registered_method_and_forgets_it_when_removed(toy) -> None:
    assert NAME in _cli_choices("audit", "methods")
    assert NAME in _cli_choices("probe", "method")
    args = build_parser().parse_args(
        ["audit", "--corpus", "--methods", NAME, "--method-option", f"{NAME}.repeats=3"]
    )
    assert args.methods == [NAME]
    # Its options are reachable by --method-option, typed by the options class's fields.
    assert attack_options(args).for_method(NAME) == ToyOptions(repeats=3)
    bad = build_parser().parse_args(["audit", "--corpus", "--method-option", f"{NAME}.repeats=x"])
    with pytest.raises(UsageError, match="'x' is not an int"):
        attack_options(bad)
    registry.unregister(NAME)
    assert NAME not in _cli_choices("audit", "methods")


def test_the_compare_and_audit_pages_offer_it(toy) -> None:
    compare = open_page("pages/2_Compare.py")
    assert LABEL in compare.multiselect(key="cmp_methods").options
    # Ticked by default on Compare (default_in_compare), not in an audit (default_in_audit).
    assert NAME in compare.multiselect(key="cmp_methods").value
    # Its options class's fields get widgets of their own, with the class's defaults.
    assert compare.number_input(key="cmp_toy_repeats").value == ToyOptions.repeats
    audit = open_page("pages/3_Audit.py")
    assert LABEL in audit.multiselect(key="audit_methods").options
    assert NAME not in audit.multiselect(key="audit_methods").value


def test_an_audit_runs_it_with_its_options_and_the_report_lists_it(toy, tmp_path) -> None:
    store = Store(tmp_path / "toy.sqlite")
    words = " ".join(f"w{i}" for i in range(60))
    snippets = [Snippet(id=f"s{i}", text=f"{words} {i}", domain="legal") for i in range(2)]
    options = AttackOptions(method_options={"toy": ToyOptions(repeats=3)})
    run_id = start_audit(
        store,
        snippets,
        ["ps_inst", NAME],
        [20],
        options,
        ModelNames(victim="fake", base="fake", attacker="fake"),
        split_tokenizer="whitespace",
    )
    # The run config holds the toy's options; a resumed run reads them back into ToyOptions.
    stored = AttackOptions.from_dict(store.get_run(run_id)["config"]["options"])
    assert stored.for_method(NAME) == ToyOptions(repeats=3)

    summary = run_audit(store, run_id)
    assert summary.errors == 0 and summary.done == 4
    units = [u for u in store.units(run_id) if u["method"] == NAME]
    assert len(units) == 2 and all(u["status"] == "done" for u in units)
    (candidate,) = store.candidates(run_id, UnitKey("s0", NAME, 20))
    assert candidate["prompt"].count("w0 ") == 3  # the repeats option reached the method

    report = report_for_run(store, run_id)
    assert LABEL in set(report.table1["method_label"])
    # Report order is the registry's rank: P-S-Inst (20) before the toy (45).
    order = list(dict.fromkeys(report.table1["method"]))
    assert order.index("ps_inst") < order.index(NAME)
    assert LABEL in render_text(report)


def test_a_method_name_cannot_be_taken_twice(toy) -> None:
    other = registry.MethodSpec(name=NAME, label="Other", run=run_toy, roles=("victim",), rank=1)
    with pytest.raises(ValueError, match="registered already"):
        registry.register(other)


def test_its_options_set_on_the_compare_page_reach_the_run(toy, fake_ui) -> None:
    at = open_page("pages/2_Compare.py")
    at.multiselect(key="cmp_methods").set_value([NAME])
    at.number_input(key="cmp_length").set_value(40)
    at.number_input(key="cmp_toy_repeats").set_value(3)
    at.button(key="cmp_run").click()
    run_until(at, saved)
    (run,) = Store(fake_ui).list_runs()
    stored = AttackOptions.from_dict(run["config"]["options"])
    assert stored.for_method(NAME) == ToyOptions(repeats=3)
    (unit,) = Store(fake_ui).units(run["id"])
    assert unit["status"] == "done"
    (candidate,) = Store(fake_ui).candidates(run["id"])
    assert candidate["extra"] == {"repeats": 3}  # the method ran with the page's value
