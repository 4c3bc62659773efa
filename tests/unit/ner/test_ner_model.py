"""NerModel on a tiny in-process BERT token classifier: confidence by hand, offsets, batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from memprobe_core.ner.labels import LabelError
from memprobe_core.ner.model import NerModel, NerModelError
from memprobe_core.ner.prompts import PromptError
from tests.helpers.ner_models import tiny_ner


@pytest.fixture(scope="module")
def ner() -> NerModel:
    return tiny_ner(eager=True)


def _hand_confidence(ner: NerModel, text: str, positions: list[int]) -> float:
    enc = ner.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        logits = ner.model(**enc).logits[0]  # (T, labels)
    probs = torch.softmax(logits, -1)
    per = torch.maximum(probs[:, 1], probs[:, 2])
    return float(per[positions].mean())


def test_confidence_equals_hand_computation(ner: NerModel) -> None:
    # "hello john smithson ." → [CLS] hello john smith ##son . [SEP]: the name is tokens 2, 3, 4.
    tokens = ner.tokenizer.convert_ids_to_tokens(
        ner.tokenizer("hello john smithson .")["input_ids"]
    )
    assert tokens == ["[CLS]", "hello", "john", "smith", "##son", ".", "[SEP]"]
    expected = _hand_confidence(ner, "hello john smithson .", [2, 3, 4])
    got = ner.confidences(["hello {name} ."], ["john smithson"])
    assert got.shape == (1, 1)
    assert got[0, 0] == pytest.approx(expected, abs=1e-6)


def test_name_found_by_offsets_not_by_search(ner: NerModel) -> None:
    # The name "smith" also appears before the slot; only the slot's occurrence may be scored.
    text = "smith met smith ."
    expected = _hand_confidence(ner, text, [3])
    other = _hand_confidence(ner, text, [1])
    assert expected != pytest.approx(other, abs=1e-9)  # positions differ, so must the values
    got = ner.confidences(["smith met {name} ."], ["smith"])[0, 0]
    assert got == pytest.approx(expected, abs=1e-6)


def test_fixed_logits_give_known_confidence() -> None:
    ner = tiny_ner()
    with torch.no_grad():
        ner.model.classifier.weight.zero_()
        ner.model.classifier.bias.copy_(torch.tensor([0.0, np.log(2.0), 0.0, 0.0, 0.0]))
    # softmax([0, ln2, 0, 0, 0]) = [1, 2, 1, 1, 1] / 6 → max(P(B-PER), P(I-PER)) = 1/3 everywhere.
    got = ner.confidences(["did {name} visit paris ?", "{name}"], ["anna lee", "kim"])
    np.testing.assert_allclose(got, np.full((2, 2), 1 / 3), atol=1e-6)


def test_plain_per_scheme_uses_the_single_label() -> None:
    ner = tiny_ner(labels={0: "O", 1: "PER", 2: "LOC"})
    assert ner.per_labels.scheme == "plain"
    with torch.no_grad():
        ner.model.classifier.weight.zero_()
        ner.model.classifier.bias.copy_(torch.tensor([0.0, np.log(3.0), 0.0]))
    assert ner.confidences(["hello {name}"], ["john"])[0, 0] == pytest.approx(3 / 5, abs=1e-6)


def test_batching_and_order_do_not_change_results(ner: NerModel) -> None:
    prompts = [
        "hello {name} .",
        "did {name} visit paris yesterday ?",
        "{name} said",
        "tell {name} !",
    ]
    names = ["john", "anna lee", "maria smithson", "kim park", "smiths"]
    one = ner.confidences(prompts, names, batch_size=1)
    many = ner.confidences(prompts, names, batch_size=7)
    np.testing.assert_allclose(one, many, atol=1e-5)
    assert one.shape == (4, 5)
    assert ((one > 0) & (one < 1)).all()


def test_progress_callback_reaches_total(ner: NerModel) -> None:
    calls: list[tuple[int, int, str]] = []
    ner.confidences(
        ["hello {name}"] * 3, ["john", "anna"], batch_size=4, on_progress=lambda *a: calls.append(a)
    )
    assert [c[0] for c in calls] == [4, 6] and calls[-1][1] == 6


def test_bad_prompt_is_named_by_index(ner: NerModel) -> None:
    with pytest.raises(PromptError, match="prompt 1 has no name slots"):
        ner.confidences(["hello {name}", "no slot here"], ["john"])
    with pytest.raises(PromptError, match="prompt 0 has 2 name slots"):
        ner.confidences(["{name} met {name}"], ["john"])


def test_empty_name_is_an_error(ner: NerModel) -> None:
    with pytest.raises(NerModelError, match="covers no token"):
        ner.confidences(["hello {name} ."], [""])


def test_model_without_person_labels_is_rejected() -> None:
    with pytest.raises(LabelError, match=r"labels seen: \[O, B-LOC, I-LOC\]"):
        tiny_ner(labels={0: "O", 1: "B-LOC", 2: "I-LOC"})


def test_attentions_have_layer_head_shape(ner: NerModel) -> None:
    weights, tokens = ner.attentions("hello john smithson .")
    assert weights.shape == (2, 2, len(tokens), len(tokens))  # (layers, heads, T, T)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_sdpa_model_gets_attentions_from_an_eager_copy_and_stays_sdpa() -> None:
    sdpa = tiny_ner(seed=1)
    eager = tiny_ner(seed=1, eager=True)
    assert not sdpa.supports_attentions and sdpa.model.config._attn_implementation == "sdpa"
    got, tokens = sdpa.attentions("hello john smithson .")
    want, _ = eager.attentions("hello john smithson .")
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert sdpa.model.config._attn_implementation == "sdpa"  # the loaded model is not switched
    rows = sdpa.name_attention(["hello john ."], [(6, 10)])
    assert rows[0].weights.sum() == pytest.approx(1.0, abs=1e-5)


def test_name_attention_rows_sum_to_one(ner: NerModel) -> None:
    texts = ["hello john smithson .", "did anna visit paris ?"]
    spans = [(6, 19), (4, 8)]
    rows = ner.name_attention(texts, spans, batch_size=2)
    names = [[t for t, m in zip(r.tokens, r.name_mask) if m] for r in rows]
    assert names == [["john", "smith", "##son"], ["anna"]]
    for r in rows:
        assert r.weights.shape == (len(r.tokens),)
        assert r.weights.sum() == pytest.approx(1.0, abs=1e-5)


def test_load_from_a_saved_folder(tmp_path, ner: NerModel) -> None:
    ner.model.save_pretrained(tmp_path)
    ner.tokenizer.save_pretrained(tmp_path)
    loaded = NerModel.load(tmp_path, device="cpu", attentions=True)
    assert loaded.supports_attentions
    np.testing.assert_allclose(
        loaded.confidences(["hello {name} ."], ["anna lee"]),
        ner.confidences(["hello {name} ."], ["anna lee"]),
        atol=1e-6,
    )


def test_load_of_a_missing_model_says_what_to_do(tmp_path) -> None:
    with pytest.raises(NerModelError, match="local folder"):
        NerModel.load(tmp_path / "nothing-here", device="cpu")
