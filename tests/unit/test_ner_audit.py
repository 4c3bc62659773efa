"""run_ner_audit on two tiny BERT classifiers: reports, τ matrices, tables, progress, cancel."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memprobe_core.ner.audit import Cancelled, NerAuditOptions, run_ner_audit
from memprobe_core.ner.names import NamePair
from tests.unit.test_ner_model import tiny_ner

PROMPTS = ["hello {name} .", "did {name} visit paris ?", "tell {name} to call !", "{name} said a ."]
PAIRS = [
    NamePair("john smithson", "maria"),
    NamePair("anna lee", "kim park"),
    NamePair("smiths", "lee anna"),
    NamePair("park", "john"),
    NamePair("kim", "anna"),
    NamePair("maria lee", "smith"),
]


@pytest.fixture(scope="module")
def models():
    return {"a": tiny_ner(seed=0), "b": tiny_ner(seed=1)}


def test_audit_of_two_models(models) -> None:
    progress: list[tuple[int, int, str]] = []
    options = NerAuditOptions(importance_steps=2, importance_pairs=3, attention_pairs=2, batch_size=8)
    audit = run_ner_audit(models, PROMPTS, PAIRS, options, on_progress=lambda *a: progress.append(a))
    assert list(audit.reports) == ["a", "b"]
    assert len(audit.dev_pairs) == 3 and len(audit.test_pairs) == 3
    report = audit.reports["a"]
    assert report.dev.pairs == audit.dev_pairs and report.test.pairs == audit.test_pairs
    np.testing.assert_allclose(
        report.dev.conf_in, report.scores.conf_in[:, [PAIRS.index(p) for p in audit.dev_pairs]]
    )
    best, worst = report.importance
    assert best.remove == "least" and worst.remove == "most" and len(best.steps) == 3
    assert best.steps[0].prompt == PROMPTS[report.best_prompt_id]
    assert [c.prompt for c in report.attention] == [PROMPTS[report.best_prompt_id], PROMPTS[report.worst_prompt_id]]
    tau = audit.tau_across_models("dev")
    assert tau.shape == (2, 2) and list(tau.index) == ["a", "b"]
    assert audit.tau_dev_vs_test().shape == (2, 2)
    scores = audit.prompt_scores()
    assert len(scores) == 8 and {"model", "m_mem_dev", "m_mem_test"} <= set(scores.columns)
    names = audit.name_confidences()
    assert len(names) == 2 * 4 * 6 and set(names["split"]) == {"dev", "test"}
    done = [p[0] for p in progress]
    assert done == sorted(done) and progress[-1][:2] == (200, 200)


def test_audit_can_be_cancelled(models) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        run_ner_audit(models, PROMPTS, PAIRS, cancel=cancel)


def test_importance_and_attention_can_be_skipped(models) -> None:
    options = NerAuditOptions(importance_steps=0, attention_pairs=0)
    report = run_ner_audit({"a": models["a"]}, PROMPTS, PAIRS, options).reports["a"]
    assert report.importance is None and report.attention == []
