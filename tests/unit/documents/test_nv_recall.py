"""nv-recall on hand-worked cases at each boundary, the normalisation of each character class,
and ``memprobe nv-recall`` (its JSON keys and its refusals)."""

from __future__ import annotations

import json

import pytest

from memprobe_core.cli import main
from memprobe_core.documents.nv_recall import NvRecallOptions, normalise, nv_recall

# The first pass alone: the second merges nothing new (gap 0) and keeps every block (min 1).
FIRST_PASS_ONLY = NvRecallOptions(tau_gap_2=0, tau_align_2=0, min_words_2=1)
REF = [f"r{i}" for i in range(400)]


def _gen(*parts: tuple[int, int] | int) -> str:
    """A generated text: (start, end) copies REF[start:end]; an int n inserts n new words."""
    out: list[str] = []
    for k, part in enumerate(parts):
        out += (
            REF[part[0] : part[1]]
            if isinstance(part, tuple)
            else [f"x{k}_{j}" for j in range(part)]
        )
    return " ".join(out)


def _score(generated: str, options: NvRecallOptions | None = FIRST_PASS_ONLY):
    return nv_recall(" ".join(REF), generated, options)


@pytest.mark.parametrize(("gap", "merged"), [(2, True), (3, False)])
def test_a_gap_of_two_words_merges_and_three_does_not(gap, merged) -> None:
    # 15 + 10 matched words, `gap` words skipped in the reference and replaced in the output.
    found = _score(_gen((0, 15), gap, (15 + gap, 25 + gap)))
    # Merged: one block of 25 matched words (>= 20 kept); apart: 15 and 10, both dropped.
    assert found.matched_words == (25 if merged else 0)
    assert len(found.blocks) == (1 if merged else 0)


@pytest.mark.parametrize(("gap_gen", "merged"), [(1, True), (0, False)])
def test_a_misalignment_of_one_merges_and_two_does_not(gap_gen, merged) -> None:
    # A gap of 2 reference words against `gap_gen` new words in the output.
    found = _score(_gen((0, 15), gap_gen, (17, 27)))
    assert found.matched_words == (25 if merged else 0)


def test_gap_words_are_never_counted() -> None:
    found = _score(_gen((0, 15), 2, (17, 27)))
    (block,) = found.blocks
    assert (block.ref_start, block.ref_end, block.gen_start, block.gen_end) == (0, 27, 0, 27)
    assert block.matched == found.matched_words == 25  # not 27: the 2 gap words are not matched
    assert found.missing == 400 - 25 and found.additional == 27 - 25


@pytest.mark.parametrize(("size", "kept"), [(19, False), (20, True)])
def test_the_first_pass_keeps_blocks_of_twenty_words(size, kept) -> None:
    found = _score(_gen(5, (100, 100 + size), 5))
    assert found.matched_words == (size if kept else 0)


@pytest.mark.parametrize(("size", "kept"), [(99, False), (100, True)])
def test_the_second_pass_keeps_blocks_of_a_hundred_words(size, kept) -> None:
    found = _score(_gen(3, (50, 50 + size), 3), NvRecallOptions())
    assert found.matched_words == (size if kept else 0)
    assert found.nv_recall == pytest.approx(size / 400 if kept else 0.0)


def test_the_second_pass_merges_survivors_up_to_ten_words_apart() -> None:
    # 60 + 50 words, 8 apart in both texts: apart after the first pass (8 > 2), each >= 20;
    # merged by the second (8 <= 10), 110 matched >= 100. With 11 apart, both are dropped.
    assert _score(_gen((0, 60), 8, (68, 118)), NvRecallOptions()).matched_words == 110
    assert _score(_gen((0, 60), 11, (71, 121)), NvRecallOptions()).matched_words == 0


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("\u2018Tis \u201cso\u201d", '\'tis "so"'),  # curly quotes
        (
            "\u201asee\u201b \u2032x\u2032 \u201edo\u201f",
            "'see' 'x' \"do\"",
        ),  # low, reversed, prime
        ("\u2033ipse\u2033", '"ipse"'),  # double primes (NFKC alone makes two single primes)
        ("a\u2010b\u2011c\u2012d\u2013e\u2014f\u2015g\u2212h", "a—b—c—d—e—f—g—h"),  # dashes
        ("wait\u2026 now", "wait... now"),  # the ellipsis character
        ("wait. . . now", "wait... now"),  # a spaced ellipsis
        ("wait...now and...2", "wait... now and... 2"),  # a space before a letter or digit
        ("so... \u201cno\u201d", 'so... "no"'),  # ...but not before a quote
        ("an _italic_ word and _two words_", "an italic word and two words"),  # italics
        ("snake_case_name stays", "snake_case_name stays"),  # not italics
        ("\uff21\uff22 \ufb01ne", "ab fine"),  # NFKC: full-width letters, the fi ligature
        ("MiXeD CaSe", "mixed case"),
    ],
)
def test_each_character_class_is_normalised(raw, normal) -> None:
    assert normalise(raw) == normal


def test_normalised_texts_match_across_typography() -> None:
    reference = " ".join(["\u201cWell,\u201d said _Harry_\u2014slowly\u2026"] + REF[:150])
    generated = " ".join(['"well," said harry—slowly...'] + REF[:150])
    assert nv_recall(reference, generated).nv_recall == 1.0


def test_the_cli_prints_exactly_the_documented_keys(tmp_path, capsys) -> None:
    ref, gen = tmp_path / "book.txt", tmp_path / "out.txt"
    ref.write_text(" ".join(REF), encoding="utf-8")
    gen.write_text(_gen(4, (0, 150), 4), encoding="utf-8")
    assert main(["nv-recall", str(ref), str(gen), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data) == [
        "nv_recall",
        "matched_words",
        "reference_words",
        "generated_words",
        "missing",
        "additional",
        "blocks",
        "longest_block",
        "block_ranges",
    ]
    assert (data["nv_recall"], data["matched_words"], data["blocks"]) == (150 / 400, 150, 1)
    assert data["block_ranges"] == [{"reference": [0, 150], "generated": [4, 154], "matched": 150}]
    assert main(["nv-recall", str(ref), str(gen), "--min-words-2", "200"]) == 0
    assert capsys.readouterr().out.startswith("nv-recall 0.0000: 0 of 400 reference words")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        (b"", "holds no words"),
        (b" \n\t ", "holds no words"),
        (b"text\x00more", "is binary"),
        (b"caf\xe9", "is not UTF-8 text"),
    ],
)
def test_a_document_that_is_not_text_exits_2(tmp_path, capsys, content, message) -> None:
    ref, gen = tmp_path / "book.txt", tmp_path / "out.txt"
    ref.write_text("some words", encoding="utf-8")
    if content is not None:
        gen.write_bytes(content)
    assert main(["nv-recall", str(ref), str(gen)]) == 2
    err = capsys.readouterr().err
    assert message in err and "out.txt" in err and len(err.strip().splitlines()) == 1


def test_a_bad_threshold_exits_2_naming_the_flag(tmp_path, capsys) -> None:
    ref = tmp_path / "book.txt"
    ref.write_text("some words", encoding="utf-8")
    assert main(["nv-recall", str(ref), str(ref), "--min-words-1", "0"]) == 2
    assert "--min-words-1 0: give a whole number from 1 to 1,000,000" in capsys.readouterr().err


def test_texts_past_the_matching_bound_exit_2_saying_why(tmp_path, capsys, monkeypatch) -> None:
    # 2,000 shared single words interleaved with others: difflib's recursion reads the rest of
    # both texts for each of 2,000 blocks, about 4 million steps; the bound is set below that.
    from memprobe_core.documents import nv_recall as module

    ref, gen = tmp_path / "ref.txt", tmp_path / "gen.txt"
    ref.write_text(" ".join(f"u{k} v{k}" for k in range(2000)), encoding="utf-8")
    gen.write_text(" ".join(f"u{k} x{k}" for k in range(2000)), encoding="utf-8")
    monkeypatch.setattr(module, "STEPS_FLOOR", 1_000_000)
    assert main(["nv-recall", str(ref), str(gen)]) == 2
    err = capsys.readouterr().err
    assert "nv-recall cannot align these texts in reasonable time" in err
    assert "(4,000 against 4,000 words)" in err and "short runs of words scattered" in err
    monkeypatch.setattr(module, "STEPS_FLOOR", 10**8)  # within the bound: scored
    assert main(["nv-recall", str(ref), str(gen), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["matched_words"] == 2000


def test_a_zero_width_space_after_every_word_scores_zero() -> None:
    # docs/method.md §18: U+200B is not whitespace for str.split and NFKC keeps it, so a text
    # with one after every word is a single "word" and matches nothing (nv-recall 0).
    text = " ".join(REF)
    hidden = "\u200b".join(REF)
    assert nv_recall(text, hidden).nv_recall == 0.0
    assert nv_recall(text, hidden).generated_words == 1
    assert nv_recall(text, text.replace(" ", "\u200b ")).nv_recall == 0.0
