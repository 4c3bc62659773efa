"""Whole documents' input boundaries, fuzzed: a document's bytes (file or upload), nv-recall of
any two texts (the library and ``memprobe nv-recall``), the map's windows for any sizes, and the
Best-of-N perturbations of any instruction."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memprobe_core.cli import main
from memprobe_core.documents.nv_recall import NvRecallOptions, nv_recall, words
from memprobe_core.documents.perturb import PERTURBATIONS, perturb
from memprobe_core.documents.reading import DocumentError, document_from_bytes
from memprobe_core.documents.windows import MapOptions, cut_windows
from memprobe_core.errors import OptionError

# Bytes a document file may hold: random bytes, and texts in several encodings with the
# characters that broke loaders before (BOMs, NUL, line and paragraph separators, bidi,
# escapes, surrogate-free astral characters).
HOSTILE_TEXT = st.lists(
    st.one_of(
        st.text(st.characters(codec="utf-8"), max_size=20),
        st.sampled_from(["\ufeff", "\x00", "\u2028", "\u2029", "\u202e", "\x1b[31m", " ", "\n"]),
    ),
    max_size=40,
).map("".join)
DOCUMENT_BYTES = st.one_of(
    st.binary(max_size=2000),
    st.builds(
        lambda text, encoding: text.encode(encoding, errors="replace"),
        HOSTILE_TEXT,
        st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "latin-1", "cp1252"]),
    ),
)


@given(data=DOCUMENT_BYTES)
@example(data=b"\xef\xbb\xbf")  # a byte-order mark and nothing else
@example(data=b"\xef\xbb\xbf\xef\xbb\xbf")  # two byte-order marks (only the first was dropped)
@example(data=b"\xef\xbb\xbf\xef\xbb\xbf\x01")  # two marks before a word: the oracle too
@example(data="\u3000\u2028".encode())  # only Unicode spaces
@example(data=b"\xff\xfe" + "text".encode("utf-16-le"))  # UTF-16 with its BOM
def test_document_bytes_give_text_with_words_or_a_refusal_naming_the_file(data):
    try:
        text = document_from_bytes(data, "<b>book</b>.txt")
    except DocumentError as exc:
        assert "'<b>book</b>.txt'" in str(exc)
        return
    assert isinstance(text, str) and text.split()
    assert "\x00" not in text and not text.startswith("\ufeff")
    assert text == data.decode("utf-8-sig").lstrip("\ufeff")  # every leading BOM dropped


# Texts whose words overlap: drawn from a small vocabulary, so long shared runs happen.
VOCABULARY = ["the", "licence", "“work”", "—", "…", "_italic_", "Ünïcode", "a", "b", "c"]
SHARED = st.lists(st.sampled_from(VOCABULARY), max_size=400).map(" ".join)
ANY_TEXT = st.one_of(SHARED, HOSTILE_TEXT)


@given(reference=ANY_TEXT, generated=ANY_TEXT, small=st.booleans())
def test_nv_recall_of_any_two_texts_is_consistent(reference, generated, small):
    options = NvRecallOptions(min_words_1=2, min_words_2=3) if small else None
    found = nv_recall(reference, generated, options)
    ref_n, gen_n = len(words(reference)), len(words(generated))
    assert (found.reference_words, found.generated_words) == (ref_n, gen_n)
    assert 0 <= found.matched_words <= min(ref_n, gen_n)
    assert found.nv_recall == (found.matched_words / ref_n if ref_n else 0.0)
    assert found.matched_words == sum(b.matched for b in found.blocks)
    # Blocks are in order and disjoint in both texts, each at least the final minimum long.
    least = (options or NvRecallOptions()).min_words_2
    for before, after in zip(found.blocks, found.blocks[1:], strict=False):
        assert before.ref_end <= after.ref_start and before.gen_end <= after.gen_start
    for b in found.blocks:
        assert b.matched >= least and b.matched <= min(
            b.ref_end - b.ref_start, b.gen_end - b.gen_start
        )
    assert found.missing >= 0 and found.additional >= 0
    json.dumps(found.to_dict(), allow_nan=False)


@given(text=st.lists(st.sampled_from(VOCABULARY), min_size=100, max_size=400).map(" ".join))
def test_a_text_against_itself_is_recalled_whole(text):
    assert nv_recall(text, text).nv_recall == 1.0


@pytest.mark.parametrize("as_json", [False, True])
@given(reference=DOCUMENT_BYTES, generated=DOCUMENT_BYTES)
def test_the_nv_recall_command_answers_or_refuses_in_one_line(
    reference, generated, as_json, capsys
):
    with tempfile.TemporaryDirectory() as folder:
        ref, gen = Path(folder) / "ref.txt", Path(folder) / "gen.txt"
        ref.write_bytes(reference)
        gen.write_bytes(generated)
        capsys.readouterr()
        code = main(["nv-recall", str(ref), str(gen), *(["--json"] if as_json else [])])
        out, err = capsys.readouterr()
    assert "Traceback" not in err
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and ("ref.txt" in err or "gen.txt" in err)
        return
    assert code == 0, err
    if as_json:
        assert set(json.loads(out)) >= {"nv_recall", "matched_words", "blocks"}


@given(
    n_tokens=st.integers(0, 5000),
    prefix=st.integers(-2, 300),
    suffix=st.integers(-2, 300),
    stride=st.integers(-2, 400),
)
def test_windows_tile_the_document_or_the_sizes_are_refused(n_tokens, prefix, suffix, stride):
    try:
        options = MapOptions(prefix_tokens=prefix, suffix_tokens=suffix, stride=stride)
    except OptionError as exc:
        assert any(name in str(exc) for name in ("prefix", "suffix", "stride"))
        return
    try:
        windows = cut_windows(n_tokens, options)
    except DocumentError as exc:
        assert n_tokens < prefix + suffix and "fewer than one window" in str(exc)
        return
    assert [w.start for w in windows] == list(range(0, len(windows) * stride, stride))
    assert windows[-1].end <= n_tokens < windows[-1].end + stride
    # Every token after the first prefix is in some suffix, up to the last window's end.
    asked = {t for w in windows for t in range(w.suffix_start, w.end)}
    assert asked == set(range(prefix, windows[-1].end))


@given(text=HOSTILE_TEXT, seed=st.integers(0, 2**63 - 1), chain=st.integers(1, 5))
def test_perturbations_are_seeded_and_named(text, seed, chain):
    first = perturb(text, random.Random(seed), chain)
    assert first == perturb(text, random.Random(seed), chain)
    out, names = first
    assert isinstance(out, str) and 1 <= len(names) <= min(chain, len(PERTURBATIONS))
    assert set(names) <= set(PERTURBATIONS) and len(set(names)) == len(names)
