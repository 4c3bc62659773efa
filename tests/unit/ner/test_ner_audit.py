"""run_ner_audit on two tiny BERT classifiers: reports, analyses, τ, tables, progress, cancel, checks."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memprobe_core.ner import analyses
from memprobe_core.ner.audit import NerAuditConfig, NerConfigError, run_ner_audit
from memprobe_core.ner.conll import ConllError
from memprobe_core.ner.names import NameFile, NameListError
from memprobe_core.ner.prompts import PromptError
from memprobe_core.ner.registry import (
    NerModelEntry,
    register_ner_model,
    unregister_ner_model,
)
from tests.helpers.ner_models import tiny_ner

PROMPTS = ("hello {name} .", "did {name} visit paris ?", "tell {name} to call !", "{name} said a .")
IN = ["john smithson", "anna lee", "smiths", "park", "kim", "maria lee"]
OUT = ["maria", "kim park", "lee anna", "john", "anna", "smith"]
LOADS: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def models():
    built = {"a": tiny_ner(seed=0, eager=True), "b": tiny_ner(seed=1, eager=True)}
    for name, model in built.items():
        # Records every load, so tests can check that bad inputs fail before any model loads.
        register_ner_model(
            NerModelEntry(
                name,
                "tiny",
                lambda device, progress, m=model, n=name: LOADS.append(n) or m,
                lambda: (list(IN), list(OUT)),
            )
        )
    yield built
    for name in built:
        unregister_ner_model(name)


def config(**kw) -> NerAuditConfig:
    base = {
        "models": ("a", "b"),
        "prompts": PROMPTS,
        "dev_fraction": 0.5,
        "importance_steps": 2,
        "importance_pairs": 3,
        "attention_pairs": 2,
        "batch_size": 8,
    }
    return NerAuditConfig(**{**base, **kw})


def test_audit_of_two_models_with_a_dev_test_split() -> None:
    progress: list[tuple[int, int, str]] = []
    audit = run_ner_audit(config(), on_progress=lambda *a: progress.append(a))
    assert list(audit.reports) == ["a", "b"] and not audit.cancelled
    # The model's own lists (no names given), each shuffled with the seed.
    assert {p.name_in for p in audit.pairs} == set(IN) and {p.name_out for p in audit.pairs} == set(
        OUT
    )
    assert len(audit.dev_pairs) == 3 and len(audit.test_pairs) == 3
    report = audit.reports["a"]
    assert report.dev.pairs == audit.dev_pairs and report.test.pairs == audit.test_pairs
    np.testing.assert_allclose(
        report.dev.conf_in,
        report.scores.conf_in[:, [audit.pairs.index(p) for p in audit.dev_pairs]],
    )
    assert report.best_prompt_id == int(report.dev.m_mem.argmax())
    best, worst = report.importance
    assert best.remove == "least" and worst.remove == "most" and len(best.steps) == 3
    assert best.steps[0].prompt == PROMPTS[report.best_prompt_id]
    assert [c.prompt for c in report.attention] == [
        PROMPTS[report.best_prompt_id],
        PROMPTS[report.worst_prompt_id],
    ]
    assert report.dev_test_tau == pytest.approx(
        analyses.dev_test_tau(report.dev, report.test), nan_ok=True
    )
    assert set(report.ensembles["method"]) >= {"mean", "majority_vote"}
    assert list(report.ranked["rank"]) == sorted(report.ranked["rank"])
    assert report.by_type["count"].sum() == 4 and len(report.type_groups) == 4
    summary = report.summary()
    assert summary["prompts"] == 4 and "dev_test_tau" in summary and summary["by_type"]
    table = audit.summary_table()
    assert list(table["model"]) == ["a", "b"]
    assert table["mean M-MEM %"].iloc[0] == pytest.approx(100 * report.scores.m_mem.mean())
    tau = audit.tau_across_models("dev")
    assert tau.shape == (2, 2) and list(tau.index) == ["a", "b"]
    assert audit.tau_dev_vs_test().shape == (2, 2)
    scores = audit.prompt_scores()
    assert len(scores) == 8 and {"model", "m_mem_dev", "m_mem_test"} <= set(scores.columns)
    names = audit.name_confidences()
    assert len(names) == 2 * 4 * 6 and set(names["split"]) == {"dev", "test"}
    assert len(audit.type_groups()) == 8
    done = [p[0] for p in progress]
    assert done == sorted(done) and progress[-1][:2] == (200, 200)


def test_without_a_split_prompts_are_ranked_on_all_pairs() -> None:
    audit = run_ner_audit(
        config(models=("a",), dev_fraction=0.0, in_names=IN[:4], out_names=OUT[:4])
    )
    report = audit.reports["a"]
    assert audit.dev_pairs is None and report.dev is None and report.ensembles is None
    assert len(audit.pairs) == 4 and report.best_prompt_id == int(report.scores.m_mem.argmax())
    assert "m_mem_dev" not in audit.prompt_scores() and "split" not in audit.name_confidences()
    assert "dev_test_tau" not in report.summary()
    with pytest.raises(ValueError, match="dev_fraction"):
        audit.tau_dev_vs_test()


def test_cancel_keeps_the_models_finished() -> None:
    cancel = threading.Event()

    def on_progress(done: int, total: int, message: str) -> None:
        if message.startswith("b "):  # the second model has started
            cancel.set()

    audit = run_ner_audit(config(), on_progress=on_progress, cancel=cancel)
    assert audit.cancelled and list(audit.reports) == ["a"]
    assert audit.reports["a"].importance is not None


def test_importance_and_attention_can_be_skipped() -> None:
    report = run_ner_audit(config(models=("a",), importance_steps=0, attention_pairs=0)).reports[
        "a"
    ]
    assert report.importance is None and report.attention == []


def test_name_uploads_are_read_like_files(tmp_path) -> None:
    audit = run_ner_audit(
        config(
            models=("a",),
            dev_fraction=0.0,
            importance_steps=0,
            attention_pairs=0,
            in_names=NameFile("in.txt", b"john smithson\nanna lee\n"),
            out_names=NameFile("out.csv", b"name\nmaria\nkim park\n"),
        )
    )
    assert {p.name_in for p in audit.pairs} == {"john smithson", "anna lee"}
    assert {p.name_out for p in audit.pairs} == {"maria", "kim park"}
    with pytest.raises(NameListError, match=r"bad\.txt is not UTF-8"):
        run_ner_audit(config(models=("a",), in_names=NameFile("bad.txt", b"\xff\xfe\xfa name")))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"batch_size": 0}, r"batch_size=0: give a whole number from 1 to 4,096"),
        ({"max_pairs": 10**9}, r"max_pairs=1000000000: give a whole number from 1 to 1,000,000"),
        ({"dev_fraction": 1.0}, r"dev_fraction=1.0: give a number in \[0, 1\), e.g. 0.5"),
        ({"dev_fraction": -0.1}, "dev_fraction"),
        ({"metric": "auc"}, "metric='auc': use one of pairwise, all_pairs"),
        ({"models": ("", " ")}, "no NER model"),
        ({"in_names": ["x"], "in_conll": "corpus/"}, "not both"),
        ({"prompts": None, "prompt_types": ()}, "pick at least one"),
        ({"importance_steps": -1}, "importance_steps=-1: give a whole number of 0 or more"),
    ],
)
def test_bad_options_are_refused_when_the_config_is_made(change, message) -> None:
    with pytest.raises(NerConfigError, match=message):
        config(**change)


def test_bad_inputs_fail_before_any_model_loads(tmp_path) -> None:
    LOADS.clear()
    with pytest.raises(PromptError, match="no name slot"):
        config(prompts=["no slot here", "hi {name}"])
    with pytest.raises(NerConfigError, match="has no built-in name lists"):
        run_ner_audit(config(models=(str(tmp_path / "some-folder"),)))
    with pytest.raises(NameListError, match="does not exist"):
        run_ner_audit(config(in_names=tmp_path / "missing.txt"))
    with pytest.raises(PromptError, match="choose between 1 and"):
        run_ner_audit(config(prompts=None, templates=99_999))
    assert LOADS == []


def test_conll_names_are_checked_and_named(tmp_path) -> None:
    no_per = tmp_path / "train.txt"
    no_per.write_text(
        "-DOCSTART- -X- -X- O\n\nParis NNP B-NP B-LOC\nrains VBZ B-VP O\n", encoding="utf-8"
    )
    with pytest.raises(NerConfigError, match="no PER entities"):
        run_ner_audit(config(in_names=None, in_conll=no_per))
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("Jos\xe9 NNP B-NP B-PER\n".encode("latin-1"))
    with pytest.raises(ConllError, match=r"latin1\.txt is not UTF-8"):
        run_ner_audit(config(in_names=None, in_conll=bad))
    with_per = tmp_path / "ok.txt"
    with_per.write_text(
        "Anna NNP B-NP B-PER\nLee NNP I-NP I-PER\nsaid VBD B-VP O\n", encoding="utf-8"
    )
    audit = run_ner_audit(
        config(
            models=("a",),
            in_names=None,
            in_conll=with_per,
            dev_fraction=0.0,
            importance_steps=0,
            attention_pairs=0,
        )
    )
    assert [p.name_in for p in audit.pairs] == ["Anna Lee"]
