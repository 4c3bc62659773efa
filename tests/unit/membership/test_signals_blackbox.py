"""Membership signals of a black-box victim, from its server's log-probs (``/completions`` with
``echo``): a tiny Llama served over real HTTP must give the signals its weights give (all but
Min-K%++), whatever shape the server answers in; a server that cannot score is said so, once."""

from __future__ import annotations

import pytest

from memprobe_core.membership import MeasureOptions
from memprobe_core.membership import scoring_pass as sp
from memprobe_core.membership import signals as sig
from memprobe_core.membership.options import signals_frame
from memprobe_core.models.openai import OpenAIGenerator
from memprobe_core.snippets.split import Snippet, split
from tests.helpers.openai_server import serve
from tests.helpers.tiny_models import tiny_hf_generator

TEXT = (
    "Licensed under the Apache License, Version 2.0; you may not use this file except in "
    "compliance with the License. Unless required by applicable law or agreed to in writing"
)
FROM_SERVER = ("loss", "ppl", "suffix_loss", "zlib", "lowercase", "min_k")


@pytest.fixture(scope="module", params=[False, True], ids=["bos-never-added", "bos-added"])
def victim(request):
    return tiny_hf_generator(seed=3, adds_bos=request.param)


@pytest.fixture(autouse=True)
def fresh_cache():
    sig.clear_cache()
    yield
    sig.clear_cache()


def client(url: str, **kwargs) -> OpenAIGenerator:
    return OpenAIGenerator("m", base_url=url, backoff_s=0.01, max_retries=0, **kwargs)


def piece_of(victim, text: str = TEXT, length: int = 30):
    return split(Snippet("s", text, "legal"), victim.tokenizer, length)


@pytest.mark.parametrize("style", ["vllm", "bare"])
def test_server_log_probs_give_the_signals_the_weights_give(victim, style):
    piece = piece_of(victim)
    options = MeasureOptions(min_k_percent=20)
    white = sig.compute_signals(victim, piece, options)
    with serve(victim, "m", echo=style) as srv:
        black = sig.compute_signals(client(srv.base_url), piece, options)
        asked = [hit["payload"]["prompt"] for hit in srv.hits]
    # x and lower(x), nothing else (sent concurrently: in either order)
    assert sorted(asked) == sorted([piece.text, piece.text.lower()])
    assert black["scored_by"] == "server" and white["scored_by"] == "forward"
    assert black["tokens"] == white["tokens"]
    for name in FROM_SERVER:
        assert black[name] == pytest.approx(white[name], rel=1e-5, abs=1e-6), name
    assert black["min_k_pp"] is None  # needs the whole next-token distribution
    assert white["min_k_pp"] is not None


def test_the_suffix_starts_at_the_prefix_boundary_in_characters(victim):
    """A whitespace cut (what a black-box victim gets): the suffix loss is the mean NLL of the
    tokens that start at or after the prefix's end, checked against the weights' own values."""
    piece = split(Snippet("s", TEXT, "legal"), "whitespace", 18)
    with serve(victim, "m") as srv:
        black = sig.compute_signals(client(srv.base_url), piece, MeasureOptions())
    ids = victim.tokenizer.encode(piece.text, add_special_tokens=False)
    stats = sp.victim_pass(
        victim, split(Snippet("s", piece.text, "x"), victim.tokenizer, len(ids))
    )[0]
    # Tokens whose text starts before len(prefix) are the prefix's.
    starts, at = [], 0
    for i in ids:
        starts.append(at)
        at += len(victim.tokenizer.decode([i]))
    n_prefix = sum(1 for s in starts if s < len(piece.prefix))
    # Without a BOS added in front, the first token is not scored: log_probs start at token 2.
    unscored = 1 if len(victim.tokenizer.encode(piece.text)) == len(ids) else 0
    suffix = stats.log_probs[n_prefix - unscored :]
    assert 0 < n_prefix < len(ids)
    assert black["suffix_loss"] == pytest.approx(-sum(suffix) / len(suffix), rel=1e-5)


def test_a_black_box_reference_gives_the_reference_ratio_of_its_weights(victim):
    reference = tiny_hf_generator(seed=7)
    piece = piece_of(victim)
    options = MeasureOptions()
    white = sig.compute_signals(victim, piece, options, reference)
    sig.clear_cache()
    with serve(reference, "m") as srv:
        mixed = sig.compute_signals(victim, piece, options, client(srv.base_url))
    assert mixed["ref_ratio"] == pytest.approx(white["ref_ratio"], rel=1e-5)
    assert mixed["scored_by"] == "forward"


@pytest.mark.parametrize(
    ("style", "why"), [("ignore", "did not return the prompt's log-probs"), ("reject", "HTTP 400")]
)
def test_a_server_that_cannot_score_is_said_so_and_asked_once(victim, style, why):
    with serve(victim, "m", echo=style) as srv:
        gen = client(srv.base_url)
        first = sig.compute_signals(gen, piece_of(victim), MeasureOptions())
        asked = len(srv.hits)  # x and lower(x), sent together
        second = sig.compute_signals(gen, piece_of(victim, length=25), MeasureOptions())
        assert 1 <= asked <= 2 and len(srv.hits) == asked  # remembered, not asked per unit
    for result in (first, second):
        assert set(result) == {"not_measured"}
        assert why in result["not_measured"]
    shown = signals_frame(second)
    assert list(shown["signal"]) == ["not measured"]


@pytest.mark.parametrize("value", [float("-inf"), float("nan"), float("inf")])
@pytest.mark.parametrize("position", [1, 5, -2])  # -1 is the generated token, not scored
def test_a_non_finite_log_prob_is_not_measured_with_the_reason(victim, value, position):
    """A server's ``-Infinity`` (or NaN) made the loss infinite and AUROC rank infinities."""
    with serve(victim, "m", logprob_at={position: value}) as srv:
        result = sig.compute_signals(client(srv.base_url), piece_of(victim), MeasureOptions())
    assert set(result) == {"not_measured"}
    assert f"log-prob is {value}" in result["not_measured"].replace(
        "log-probability of", "log-prob is"
    )
    assert list(signals_frame(result)["signal"]) == ["not measured"]


def test_a_non_finite_reference_nll_drops_only_the_reference_ratio(victim):
    with serve(tiny_hf_generator(seed=7), "m", logprob_at={3: float("-inf")}) as srv:
        result = sig.compute_signals(
            victim, piece_of(victim), MeasureOptions(), client(srv.base_url)
        )
    assert "ref_ratio" not in result and result["loss"] > 0


def test_prompt_logprobs_off_measures_nothing_and_asks_nothing(victim):
    with serve(victim, "m") as srv:
        gen = client(srv.base_url, prompt_logprobs=False)
        assert sig.compute_signals(gen, piece_of(victim), MeasureOptions()) == {}
        chat_only = client(srv.base_url, text_as_chat=True)
        assert sig.compute_signals(chat_only, piece_of(victim), MeasureOptions()) == {}
        assert srv.hits == []


def test_a_server_going_down_is_an_error_not_a_refusal(victim):
    """A dead server says nothing about what it offers: the next unit asks again."""
    with serve(victim, "m") as srv:
        url = srv.base_url
    gen = client(url)
    with pytest.raises(Exception, match="cannot connect"):
        sig.compute_signals(gen, piece_of(victim), MeasureOptions())
    assert gen._echo_refusal is None


def test_a_reference_server_that_cannot_score_leaves_the_victims_signals(victim):
    piece = piece_of(victim)
    with serve(tiny_hf_generator(seed=7), "m", echo="reject") as srv:
        out = sig.compute_signals(victim, piece, MeasureOptions(), client(srv.base_url))
    assert out["scored_by"] == "forward" and out["loss"] > 0
    assert "ref_ratio" not in out
