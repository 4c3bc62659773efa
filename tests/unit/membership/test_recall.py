"""ReCaLL and Con-ReCall (docs/method.md §8): hand-worked values on the bigram model, transformers'
own conditional loss on a tiny random Llama, the server path against the weights, and how an
audit picks (and refuses to pick) its prefixes."""

from __future__ import annotations

import math

import pytest
import torch

from memprobe_core.errors import UsageError
from memprobe_core.membership import MeasureOptions
from memprobe_core.membership import recall as rc
from memprobe_core.membership import signals as sig
from memprobe_core.models.openai import OpenAIGenerator
from memprobe_core.snippets.split import Snippet, split
from tests.helpers.openai_server import serve
from tests.helpers.tiny_models import tiny_hf_generator
from tests.unit.membership.test_signals import LN2, TEXT, bigram_victim, piece_of

LICENCE = (
    "Licensed under the Apache License, Version 2.0 (the License); you may not use this file "
    "except in compliance with the License. You may obtain a copy of the License at"
)
NONMEMBER_TEXTS = ("The river office opens at nine and closes before the evening bus.",)
MEMBER_TEXTS = ("Permission is hereby granted, free of charge, to any person obtaining a copy",)


@pytest.fixture(autouse=True)
def fresh_cache():
    sig.clear_cache()
    yield
    sig.clear_cache()


def prefixed(nonmembers=NONMEMBER_TEXTS, members=MEMBER_TEXTS, **kwargs) -> MeasureOptions:
    return MeasureOptions(
        recall_shots=len(nonmembers),
        recall_prefix_ids=tuple(f"p{i}" for i in range(len(nonmembers) + len(members))),
        recall_nonmember_prefix=tuple(nonmembers),
        recall_member_prefix=tuple(members),
        **kwargs,
    )


def test_hand_worked_on_the_bigram(monkeypatch):
    """The bigram's next-token row depends on the previous token only, so a prefix changes
    just the first character's context. With BOS, ℓ/ln2 of "abAAb" is −1 −1 −1 −3 −2: LL(x) =
    −8/5 ln2. After the prefix "b", a|b = 1/4: −2 −1 −1 −3 −2, LL = −9/5 ln2; after "A",
    a|A = 1/2: LL = −8/5 ln2. ReCaLL = (−9/5)/(−8/5) = 9/8; Con-ReCall = (−9/5 + 8/5)/(−8/5)
    = 1/8."""
    monkeypatch.setattr(rc, "PREFIX_SEPARATOR", "")  # the bigram only spells a, b and A
    victim = bigram_victim()
    out = sig.compute_signals(victim, piece_of(victim), prefixed(("b",), ("A",)))
    assert out["loss"] == pytest.approx(8 / 5 * LN2, rel=1e-6)
    assert out["recall"] == pytest.approx(9 / 8, rel=1e-6)
    assert out["con_recall"] == pytest.approx(1 / 8, rel=1e-6)
    assert TEXT == "abAAb"


def test_each_prefix_text_is_cut_to_the_texts_length(monkeypatch):
    """An audit's texts are whole documents; each prefix text is cut to len(x) characters.
    "bbbbbbbA" cut to 5 characters ends in b (a|b = 1/4: ReCaLL 9/8); uncut it would end in A
    (a|A = 1/2: ReCaLL 1)."""
    monkeypatch.setattr(rc, "PREFIX_SEPARATOR", "")
    victim = bigram_victim()
    out = sig.compute_signals(victim, piece_of(victim), prefixed(("bbbbbbbA",), ("A",)))
    assert out["recall"] == pytest.approx(9 / 8, rel=1e-6)
    monkeypatch.setattr(rc, "PREFIX_SEPARATOR", "|")
    assert rc.prefix_text(["x" * 10_000, "y"], 7) == "xxxxxxx|y|"


def test_a_prefix_text_itself_gets_no_recall_and_no_prefix_no_signal(monkeypatch):
    monkeypatch.setattr(rc, "PREFIX_SEPARATOR", "")
    victim = bigram_victim()
    options = prefixed(("b",), ("A",))
    own = split(Snippet("p0", TEXT), victim.tokenizer, 5)  # one of the run's prefix texts
    assert "recall" not in sig.compute_signals(victim, own, options)
    plain = sig.compute_signals(victim, piece_of(victim), MeasureOptions())
    assert "recall" not in plain and "con_recall" not in plain


def _conditional_loss(model, prefix_ids: list[int], text_ids: list[int]) -> float:
    """transformers' mean NLL of the text tokens after the prefix (prefix labels ignored)."""
    ids = torch.tensor([[*prefix_ids, *text_ids]])
    labels = ids.clone()
    labels[0, : len(prefix_ids)] = -100
    with torch.inference_mode():
        return float(model(input_ids=ids, labels=labels).loss)


@pytest.mark.parametrize("adds_bos", [False, True])
def test_conditional_log_likelihoods_are_transformers_own(adds_bos):
    victim = tiny_hf_generator(seed=2, adds_bos=adds_bos)
    tok, model = victim.tokenizer, victim.torch_model
    piece = split(Snippet("lic", LICENCE), tok, 30)
    out = sig.compute_signals(victim, piece, prefixed())
    ids = [*piece.prefix_ids, *piece.suffix_ids]
    lls = []
    for texts in (NONMEMBER_TEXTS, MEMBER_TEXTS):
        prefix = rc.prefix_text(texts, len(piece.text))
        front = tok.encode(prefix)  # the tokenizer's default: with its BOS when it adds one
        lls.append(-_conditional_loss(model, front, ids))
    ll = -out["loss"]
    assert out["recall"] == pytest.approx(lls[0] / ll, rel=1e-5)
    assert out["con_recall"] == pytest.approx((lls[0] - lls[1]) / ll, rel=1e-4, abs=1e-6)
    assert math.isfinite(out["recall"]) and out["recall"] != 1.0


def test_a_black_box_victim_gets_the_values_its_weights_give():
    victim = tiny_hf_generator(seed=2, adds_bos=True)
    piece = split(Snippet("lic", LICENCE), "whitespace", 20)
    white = sig.compute_signals(victim, piece, prefixed())
    sig.clear_cache()
    with serve(victim, "m") as srv:
        gen = OpenAIGenerator("m", base_url=srv.base_url, backoff_s=0.01, max_retries=0)
        black = sig.compute_signals(gen, piece, prefixed())
    assert black["scored_by"] == "server"
    assert black["recall"] == pytest.approx(white["recall"], rel=1e-4)
    assert black["con_recall"] == pytest.approx(white["con_recall"], rel=1e-3, abs=1e-5)


def test_without_a_member_prefix_con_recall_is_not_measured():
    victim = tiny_hf_generator(seed=2)
    piece = split(Snippet("lic", LICENCE), victim.tokenizer, 30)
    out = sig.compute_signals(victim, piece, prefixed(members=()))
    assert out["recall"] is not None and out["con_recall"] is None


# --- picking the prefixes -------------------------------------------------------------------------
def labelled(n_members: int, n_nonmembers: int) -> list[Snippet]:
    return [Snippet(f"m{i}", f"member {i}", label="member") for i in range(n_members)] + [
        Snippet(f"n{i}", f"non-member {i}", label="nonmember") for i in range(n_nonmembers)
    ]


def test_an_audit_picks_the_first_labelled_texts_of_each_class_once():
    picked = rc.with_recall_prefixes(MeasureOptions(recall_shots=2), labelled(4, 3))
    assert picked.recall_prefix_ids == ("m0", "m1", "n0", "n1")
    assert picked.recall_member_prefix == ("member 0", "member 1")
    assert picked.recall_nonmember_prefix == ("non-member 0", "non-member 1")
    again = rc.with_recall_prefixes(picked, labelled(9, 9))  # a stored config keeps its picks
    assert again == picked
    stored = MeasureOptions.from_dict(
        {k: list(v) if isinstance(v, tuple) else v for k, v in vars(picked).items()}
    )
    assert stored == picked  # JSON lists back to tuples
    assert rc.with_recall_prefixes(MeasureOptions(), labelled(1, 1)) == MeasureOptions()


@pytest.mark.parametrize(("members", "nonmembers", "short"), [(2, 5, "members"), (5, 0, "non")])
def test_too_few_labelled_texts_for_the_shots_is_refused(members, nonmembers, short):
    with pytest.raises(UsageError, match=f"recall_shots=2: .* labelled {short}"):
        rc.with_recall_prefixes(MeasureOptions(recall_shots=2), labelled(members, nonmembers))


@pytest.mark.parametrize("shots", [-1, 33, 1.5, True])
def test_recall_shots_out_of_range_is_refused_naming_it(shots):
    with pytest.raises(ValueError, match="recall_shots="):
        MeasureOptions(recall_shots=shots)
