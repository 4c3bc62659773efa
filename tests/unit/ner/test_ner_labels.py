"""PER label discovery from config.id2label: BIO, plain, PERSON spellings, and the error."""

from __future__ import annotations

import pytest

from memprobe_core.ner.labels import CONLL_LABELS, LabelError, find_per_labels


def test_bio_scheme_of_dslim_style_labels() -> None:
    # dslim/bert-base-NER's order: O, B-MISC, I-MISC, B-PER, I-PER, B-ORG, I-ORG, B-LOC, I-LOC.
    id2label = dict(
        enumerate(["O", "B-MISC", "I-MISC", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"])
    )
    labels = find_per_labels(id2label)
    assert labels.scheme == "bio"
    assert labels.ids == (3, 4) and labels.begin_ids == (3,) and labels.inside_ids == (4,)
    assert labels.names == ("B-PER", "I-PER")


def test_string_keys_and_person_spelling() -> None:
    labels = find_per_labels({"0": "O", "1": "b_person", "2": "i_person", "3": "B-LOC"})
    assert labels.ids == (1, 2) and labels.scheme == "bio"


def test_plain_scheme() -> None:
    labels = find_per_labels({0: "O", 1: "LOC", 2: "PER", 3: "ORG"})
    assert labels.scheme == "plain" and labels.ids == (2,) and labels.begin_ids == ()


def test_bioes_labels_are_all_person_labels() -> None:
    labels = find_per_labels(dict(enumerate(["O", "S-PER", "B-PER", "I-PER", "E-PER", "B-LOC"])))
    assert labels.ids == (1, 2, 3, 4) and labels.begin_ids == (1, 2) and labels.inside_ids == (3, 4)


def test_embedded_label_set_has_person_labels() -> None:
    assert find_per_labels(dict(enumerate(CONLL_LABELS))).ids == (1, 2)


def test_no_person_label_names_the_labels_seen() -> None:
    with pytest.raises(LabelError, match=r"labels seen: \[O, B-LOC, I-LOC\]"):
        find_per_labels({0: "O", 1: "B-LOC", 2: "I-LOC"})


def test_generic_labels_get_a_hint() -> None:
    with pytest.raises(LabelError, match="LABEL_n"):
        find_per_labels({0: "LABEL_0", 1: "LABEL_1"})


def test_mixed_schemes_are_rejected() -> None:
    with pytest.raises(LabelError, match="mixes"):
        find_per_labels({0: "O", 1: "PER", 2: "B-PER"})
