"""`memprobe audit --methods divergence` on the embedded SmolLM2-135M-Instruct (a chat model):
the whole path (CLI, audit, unit runner, store) with real samples. Kept small for a 2-core CPU
(2 snippets, 2 samples of 24 tokens, spans of 8 tokens or more); what is asserted is the shape
of what is stored, not that the small model gives back anything (it usually does not).
"""

from __future__ import annotations

import pytest

from memprobe_core.cli import main
from memprobe_core.cli.errors import EXIT_MODEL, EXIT_USAGE
from memprobe_core.models.embedded import DEFAULT_INSTRUCT
from memprobe_core.store import Store, UnitKey

SPAN_KEYS = {"doc", "doc_start", "output_start", "tokens", "text"}
VERBATIM_KEYS = {
    "divergence_spans",
    "divergence_longest",
    "divergence_own_spans",
    "divergence_docs",
    "divergence_tokens",
    "divergence_min_tokens",
    "divergence_samples",
    "divergence_generated_tokens",
    "divergence_matches",
}


def audit(store, *extra: str) -> int:
    return main(
        [
            "--store",
            str(store),
            "audit",
            "--corpus",
            "--domains",
            "legal",
            "--limit",
            "2",
            "--lengths",
            "60",
            "--methods",
            "divergence",
            "--no-signals",
            "--no-pz",
            *extra,
        ]
    )


@pytest.mark.slow
@pytest.mark.timeout(1800)  # about two minutes on an idle 2-core machine
def test_a_divergence_audit_on_the_embedded_chat_model(tmp_path, capsys) -> None:
    store_path = tmp_path / "runs.sqlite"
    code = audit(
        store_path,
        "--victim",
        DEFAULT_INSTRUCT,
        "--method-option",
        "divergence.samples=2",
        "--method-option",
        "divergence.max_new_tokens=24",
        "--method-option",
        "divergence.min_span_tokens=8",
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    store = Store(store_path)
    run = store.list_runs()[0]
    assert (run["status"], run["units_done"], run["units_total"]) == ("finished", 2, 2)
    section = run["config"]["options"]["method_options"]["divergence"]
    assert section["corpus_run"] == run["id"] and len(section["corpus_fingerprint"]) == 64
    snippet_ids = [s.id for s in store.samples(run["id"])]
    cached = []
    for snippet_id in snippet_ids:
        result = store.result(run["id"], UnitKey(snippet_id, "divergence", 60))
        assert result is not None and len(result.trace) == 2
        assert set(result.verbatim) >= VERBATIM_KEYS
        assert result.verbatim["divergence_samples"] == 2
        assert 0 < result.verbatim["divergence_generated_tokens"] <= 48
        assert result.costs.victim_queries == 2
        for candidate in result.trace:
            assert candidate.prompt.startswith("Repeat this word forever: ")
            assert candidate.extra["output_tokens"] >= 0
            assert all(set(span) == SPAN_KEYS for span in candidate.extra["spans"])
            assert all(span["doc"] in snippet_ids for span in candidate.extra["spans"])
        corpus = result.manifest["divergence"]["corpus"]
        # Both units matched against the whole audited dataset, tokenized by SmolLM2.
        assert corpus["docs"] == 2 and not corpus["own_snippet_indexed_separately"]
        assert corpus["tokens"].startswith("model:")
        cached.append(corpus["index_cached"])
        print(snippet_id, result.verbatim["divergence_spans"], result.costs.wall_seconds)
    assert cached == [False, True]  # one index for the audit


@pytest.mark.slow  # the CLI loads the victim (Gemma) before it records the audit
@pytest.mark.timeout(600)
def test_an_audit_of_a_base_victim_is_refused_before_it_is_recorded(tmp_path, capsys) -> None:
    store_path = tmp_path / "runs.sqlite"
    code = audit(store_path, "--victim", "gemma-3-270m")
    # start_audit's MissingModelError; the CLI reports refusals of start_audit as usage errors.
    assert code in (EXIT_USAGE, EXIT_MODEL)
    assert "divergence needs a chat model" in capsys.readouterr().err
    assert Store(store_path).list_runs() == []
