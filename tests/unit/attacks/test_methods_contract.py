"""One contract, run over every registered extraction method (garak's plugin-contract habit),
and the smaller one of the signals-only method.

Every registered method must: emit events in the documented grammar, with the same payload
types; put exactly the candidates it announced into its trace; return a complete result whose
objective is consistent with its scores; count its costs; write the manifest keys reports need;
and honour a cancel set before it starts (a cancelled result, ``Finished`` still emitted).
"""

from __future__ import annotations

import re
import threading

import pytest

from memprobe_core.attacks import AttackOptions, ModelSet, registry, run_method
from memprobe_core.attacks.acr import ACROptions
from memprobe_core.attacks.divergence import DivergenceOptions
from memprobe_core.attacks.events import (
    CandidateScored,
    Finished,
    RoundFinished,
    RoundStarted,
    SearchStep,
)
from memprobe_core.attacks.options import GCGOptions, InteractiveOptions
from memprobe_core.models import load
from memprobe_core.snippets.split import Snippet, split
from tests.helpers.tiny_models import tiny_hf_generator

WORDS = [
    "Licensed",
    "under",
    "the",
    "Apache",
    "License",
    "Version",
    "2.0",
    "you",
    "may",
    "not",
    "use",
    "this",
    "file",
    "except",
    "in",
    "compliance",
    "with",
    "the",
    "License",
    "You",
    "may",
    "obtain",
    "a",
    "copy",
    "of",
    "the",
    "License",
    "at",
]
SNIPPET = Snippet("contract", " ".join(WORDS), "legal")
OPTIONS = AttackOptions(
    seed=3,
    interactive=InteractiveOptions(rounds=2, n_candidates=3),
    gcg=GCGOptions(steps=2, top_k=8, search_width=8),
    method_options={
        "acr": ACROptions(steps_per_length=2, top_k=8, search_width=8),
        "divergence": DivergenceOptions(samples=2, max_new_tokens=24, min_span_tokens=4),
    },
)
# The methods that ask a model for the suffix; ``signals`` has its own contract below.
EXTRACTING = [s.name for s in registry.specs() if s.extracts]
MANIFEST_KEYS = {"models", "scoring", "alpha", "alpha_source", "seed", "split", "versions"}
# SearchStep* (RoundStarted CandidateScored* RoundFinished)+ Finished, one letter per event.
GRAMMAR = re.compile(r"S*(RC*F)+E")
LETTER = {
    SearchStep: "S",
    RoundStarted: "R",
    CandidateScored: "C",
    RoundFinished: "F",
    Finished: "E",
}


@pytest.fixture(scope="module")
def tiny():
    return tiny_hf_generator(model_id="tiny-white-box")


def models_for(method: str, tiny) -> ModelSet:
    """The models a method declares it needs (``MethodSpec``: roles, white-box and chat roles).

    A method with a white-box role gets the tiny transformers model in every role (its roles
    then share one tokenizer, as GCG's base and victim must); a chat role gets the fake model
    with a chat template; every other role the fake model.
    """
    spec = registry.get_method(method)
    roles = ("victim", *spec.roles)
    if spec.white_box_roles:
        return ModelSet(**{role: tiny for role in roles})
    fake, chat = load("fake"), load("fake", chat_template=True)
    return ModelSet(**{role: chat if role in spec.chat_roles else fake for role in roles})


def run(method: str, tiny, cancel: threading.Event | None = None):
    models = models_for(method, tiny)
    piece = split(SNIPPET, models.victim.tokenizer, 18)
    events = []
    result = run_method(method, piece, models, OPTIONS, on_event=events.append, cancel=cancel)
    return piece, result, events


@pytest.mark.parametrize("method", EXTRACTING)
def test_events_follow_the_grammar_and_match_the_trace(method, tiny):
    _, result, events = run(method, tiny)
    assert GRAMMAR.fullmatch("".join(LETTER[type(e)] for e in events)), [e.kind for e in events]
    assert events[-1].result is result
    scored = [e.candidate for e in events if isinstance(e, CandidateScored)]
    assert [(c.round, c.index, c.prompt) for c in scored] == [
        (c.round, c.index, c.prompt) for c in result.trace
    ]
    for event in events:
        if isinstance(event, RoundFinished):
            round_scores = [c.objective for c in scored if c.round == event.round]
            assert event.best.objective == max(round_scores)
        if isinstance(event, CandidateScored):
            assert event.round == event.candidate.round


@pytest.mark.parametrize("method", EXTRACTING)
def test_result_is_complete_and_consistent(method, tiny):
    piece, result, _ = run(method, tiny)
    assert (result.method, result.snippet_id, result.length, result.status) == (
        method,
        "contract",
        18,
        "finished",
    )
    assert 0.0 <= result.mem <= 1.0 and 0.0 <= result.lcs_p <= 1.0
    assert result.objective == pytest.approx(
        result.alpha * result.mem - (1 - result.alpha) * result.lcs_p
    )
    assert result.objective == max(c.objective for c in result.trace)
    assert result.costs.victim_queries >= 1 and result.costs.wall_seconds > 0
    assert set(result.manifest) >= MANIFEST_KEYS, MANIFEST_KEYS - set(result.manifest)
    assert result.manifest["split"]["suffix_tokens"] == piece.suffix_tokens
    assert isinstance(result.pii, dict)
    # Whoever answers for the victim decodes greedily; the keys stored results always had.
    decoding = result.manifest["decoding"]
    answering = next(decoding[k] for k in ("victim", "model", "base") if k in decoding)
    if registry.get_method(method).samples:  # it says it samples; the rest are greedy
        assert answering["do_sample"] is True and answering["temperature"] > 0
        return
    assert answering == {
        "temperature": 0.0,
        "top_p": 1.0,
        "do_sample": False,
        "max_new_tokens": piece.suffix_tokens,
    }


@pytest.mark.parametrize("method", registry.method_names())
def test_a_cancel_before_the_start_returns_a_cancelled_result(method, tiny):
    cancel = threading.Event()
    cancel.set()
    _, result, events = run(method, tiny, cancel=cancel)
    assert result.status == "cancelled"
    assert isinstance(events[-1], Finished) and events[-1].result is result


def test_the_signals_only_method_asks_no_model_and_says_so(tiny):
    piece, result, events = run("signals", tiny)
    assert [type(e) for e in events] == [Finished] and events[0].result is result
    assert (result.status, result.output, result.trace, result.mem) == ("finished", "", [], 0.0)
    assert result.costs.victim_queries == 0 and result.costs.generated_tokens == 0
    assert set(result.manifest) >= MANIFEST_KEYS
    assert result.manifest["split"]["suffix_tokens"] == piece.suffix_tokens
    assert not registry.get_method("signals").extracts
    assert "signals" not in registry.offered_methods(["victim"], [], extracting_only=True)


def test_two_runs_at_once_on_one_model_keep_their_own_costs():
    """A model is shared between jobs; each run's costs count only its own calls."""
    fake = load("fake", latency_s=0.05)  # slow calls, so the two runs overlap
    models = ModelSet(victim=fake, base=fake, attacker=fake, init=fake)
    piece = split(SNIPPET, fake.tokenizer, 18)
    options = AttackOptions(seed=1, interactive=InteractiveOptions(rounds=3, n_candidates=8))
    solo = run_method("interactive", piece, models, options).costs
    results: list = []
    threads = [
        threading.Thread(
            target=lambda: results.append(run_method("interactive", piece, models, options))
        )
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for result in results:
        assert result.costs.victim_queries == solo.victim_queries
        assert result.costs.attacker_queries == solo.attacker_queries
        assert result.costs.generated_tokens == solo.generated_tokens
