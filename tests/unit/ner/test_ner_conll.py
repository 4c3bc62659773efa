"""CoNLL-2003 reader on files written by the test (BIO and IOB1), name lists, pairs, splits."""

from __future__ import annotations

import pytest

from memprobe_core.ner.conll import (
    ConllError,
    Sentence,
    conll_person_names,
    entities,
    hub_conll_person_names,
    read_conll,
    write_conll,
)
from memprobe_core.ner.names import (
    NameListError,
    NamePair,
    build_pairs,
    read_name_list,
    split_pairs,
)

# IOB1 as in the original eng.train: I- everywhere, B- only between touching entities of one type.
IOB1 = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O
to TO B-VP O
boycott VB I-VP O
British JJ B-NP I-MISC
lamb NN I-NP O
. . O O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

Only RB B-NP O
France NNP I-NP I-LOC
and CC I-NP O
Britain NNP I-NP I-LOC
backed VBD B-VP O
Fischler NNP B-NP I-PER
Hans NNP I-NP B-PER
Gruber NNP I-NP I-PER
's POS B-NP O
proposal NN I-NP O
. . O O
"""

BIO = """-DOCSTART- O

Peter B-PER
Blackburn I-PER
met O
Anna B-PER
Lee I-PER
in O
New B-LOC
York I-LOC
"""


def test_iob1_file_sentences_and_names(tmp_path) -> None:
    path = tmp_path / "train.txt"
    path.write_text(IOB1, encoding="utf-8")
    sentences = read_conll(path)
    assert len(sentences) == 3
    assert sentences[0].tokens[:3] == ("EU", "rejects", "German")
    assert entities(sentences[0]) == [("ORG", "EU"), ("MISC", "German"), ("MISC", "British")]
    # "Fischler" and "Hans Gruber" touch: IOB1 marks the second with B-PER → two names.
    assert entities(sentences[2])[-2:] == [("PER", "Fischler"), ("PER", "Hans Gruber")]
    assert conll_person_names(path) == {"train": ["Peter Blackburn", "Fischler", "Hans Gruber"]}


def test_bio_two_column_file(tmp_path) -> None:
    path = tmp_path / "x.conll"
    path.write_text(BIO, encoding="utf-8")
    (sentence,) = read_conll(path)
    assert entities(sentence) == [
        ("PER", "Peter Blackburn"),
        ("PER", "Anna Lee"),
        ("LOC", "New York"),
    ]


def test_folder_with_splits(tmp_path) -> None:
    (tmp_path / "eng.train").write_text(IOB1, encoding="utf-8")
    (tmp_path / "eng.testa").write_text(BIO, encoding="utf-8")
    names = conll_person_names(tmp_path)
    assert sorted(names) == ["dev", "train"]
    assert names["dev"] == ["Peter Blackburn", "Anna Lee"]


def test_write_then_read_round_trips(tmp_path) -> None:
    sentences = [Sentence(("Anna", "Lee", "visited", "Paris"), ("B-PER", "I-PER", "O", "B-LOC"))]
    assert read_conll(write_conll(sentences, tmp_path / "c.txt")) == sentences


def test_bad_tag_names_file_and_line(tmp_path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("Anna NNP B-NP B-PER\nLee NNP I-NP PERSON\n", encoding="utf-8")
    with pytest.raises(ConllError, match=r"bad.txt line 2: NER tag 'PERSON'"):
        read_conll(path)


def test_hub_loader_without_datasets_says_how_to_install() -> None:
    try:
        import datasets  # noqa: F401
    except ImportError:
        with pytest.raises(ConllError, match="pip install datasets"):
            hub_conll_person_names()
    else:  # pragma: no cover - only where datasets is installed (then the hub is needed too)
        pytest.skip("datasets is installed; the hub path needs a network")


def test_name_lists_txt_and_csv(tmp_path) -> None:
    txt = tmp_path / "in.txt"
    txt.write_text("# in-train\nAnna  Lee\n\nanna lee\nBo Kim\n", encoding="utf-8")
    assert read_name_list(txt) == ["Anna Lee", "Bo Kim"]
    csv = tmp_path / "out.csv"
    csv.write_text("id,name\n1,Cy Park\n2,Di Wu\n", encoding="utf-8")
    assert read_name_list(csv) == ["Cy Park", "Di Wu"]
    with pytest.raises(NameListError, match="no column 'person'"):
        read_name_list(csv, column="person")


def test_pairs_filter_overlap_match_counts_and_are_seeded() -> None:
    in_names = ["Anna Lee", "Bo Kim", "Cy Park", "Shared Name", "Eve"]
    out_names = ["shared name", "Xi Lu", "Yo Ma"]
    pairs = build_pairs(in_names, out_names, seed=1)
    assert len(pairs) == 2  # "Shared Name" removed from both sides; matched to the 2 outs left
    assert {p.name_out for p in pairs} == {"Xi Lu", "Yo Ma"}
    assert all(p.name_in in in_names and p.name_in != "Shared Name" for p in pairs)
    assert build_pairs(in_names, out_names, seed=1) == pairs
    several = {tuple(build_pairs(in_names, out_names, seed=s)) for s in range(10)}
    assert len(several) > 1  # the seed changes which names are paired
    assert all(len(p.name_in.split()) >= 2 for p in build_pairs(in_names, out_names, min_words=2))
    with pytest.raises(NameListError, match="no name pairs"):
        build_pairs(["Same"], ["same"])


def test_dev_test_split() -> None:
    pairs = [NamePair(f"in{i}", f"out{i}") for i in range(10)]
    dev, test = split_pairs(pairs, dev_fraction=0.3, seed=0)
    assert len(dev) == 3 and len(test) == 7
    assert sorted(dev + test, key=lambda p: p.name_in) == sorted(pairs, key=lambda p: p.name_in)
    with pytest.raises(ValueError):
        split_pairs(pairs[:1])
