"""prefix_size and split: the paper's exact token counts, with whitespace and tiny HF tokenizers."""

from __future__ import annotations

import pytest

from memprobe_core.snippets.split import (
    DataError,
    Snippet,
    WhitespaceTokenizer,
    prefix_size,
    split,
    token_count,
)

WORDS = [f"w{i}" for i in range(600)]
LONG = Snippet(id="long", text="\n".join(" ".join(WORDS[i : i + 10]) for i in range(0, 600, 10)))


@pytest.mark.parametrize(("length", "prefix"), [(200, 66), (300, 100), (500, 167)])
def test_prefix_size_paper_lengths(length: int, prefix: int) -> None:
    assert prefix_size(length) == prefix
    assert prefix_size(length, 0.33) == prefix


@pytest.mark.parametrize(
    ("length", "ratio", "prefix"),
    [
        (100, 0.33, 33),
        (400, 0.33, 132),
        (200, 0.5, 100),
        (300, 0.2, 60),
        (500, 0.25, 125),
        (2, 0.01, 1),  # at least one prefix token
        (2, 0.99, 1),  # at least one suffix token
        (10, 0.95, 9),
    ],
)
def test_prefix_size_other_ratios(length: int, ratio: float, prefix: int) -> None:
    assert prefix_size(length, ratio) == prefix


@pytest.mark.parametrize("length", [1, 0, -5])
def test_prefix_size_too_short(length: int) -> None:
    with pytest.raises(DataError, match=f"length {length} is too short; use at least 2 tokens"):
        prefix_size(length)


@pytest.mark.parametrize("ratio", [0.0, 1.0, -0.2, 1.5])
def test_prefix_size_bad_ratio(ratio: float) -> None:
    with pytest.raises(DataError, match=f"prefix_ratio {ratio} must be strictly between 0 and 1"):
        prefix_size(200, ratio)


@pytest.mark.parametrize(("length", "n_prefix"), [(200, 66), (300, 100), (500, 167)])
@pytest.mark.parametrize("tokenizer", ["whitespace", WhitespaceTokenizer()])
def test_split_whitespace_exact(length: int, n_prefix: int, tokenizer: object) -> None:
    cut = split(LONG, tokenizer, length)
    assert (len(cut.prefix_ids), len(cut.suffix_ids), cut.suffix_tokens) == (
        n_prefix,
        length - n_prefix,
        length - n_prefix,
    )
    assert cut.prefix == " ".join(WORDS[:n_prefix])
    assert cut.suffix == " ".join(WORDS[n_prefix:length])
    assert cut.text == " ".join(WORDS[:length])
    assert cut.length == length and cut.snippet is LONG
    assert cut.tokenizer_name == "whitespace"


def test_split_custom_ratio() -> None:
    cut = split(LONG, "whitespace", 100, prefix_ratio=0.5)
    assert cut.prefix.split() == WORDS[:50] and cut.suffix.split() == WORDS[50:100]


def test_split_exactly_length_tokens_is_enough() -> None:
    snippet = Snippet(id="exact", text=" ".join(WORDS[:200]))
    cut = split(snippet, "whitespace", 200)
    assert cut.suffix.split()[-1] == "w199"


@pytest.fixture(scope="module")
def wordlevel_tokenizer():
    """A word-level HF tokenizer built in-process: one id per known word, [UNK] otherwise."""
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    vocab = {"[UNK]": 0, **{word: i + 1 for i, word in enumerate(WORDS)}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


@pytest.fixture(scope="module")
def bpe_tokenizer():
    """A byte-level BPE tokenizer trained in-process on a few sentences (vocab ~300)."""
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 20, trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok)


@pytest.mark.parametrize(("length", "n_prefix"), [(200, 66), (300, 100), (500, 167)])
def test_split_wordlevel_hf_exact(wordlevel_tokenizer, length: int, n_prefix: int) -> None:
    cut = split(LONG, wordlevel_tokenizer, length)
    # Word i has id i + 1, so the ids say exactly which words went where.
    assert cut.prefix_ids == tuple(range(1, n_prefix + 1))
    assert cut.suffix_ids == tuple(range(n_prefix + 1, length + 1))
    assert cut.prefix == " ".join(WORDS[:n_prefix])
    assert cut.suffix == " ".join(WORDS[n_prefix:length])
    assert cut.tokenizer_name  # a name is always recorded


@pytest.mark.parametrize(("length", "n_prefix"), [(200, 66), (300, 100), (500, 167)])
def test_split_bpe_hf_exact(bpe_tokenizer, length: int, n_prefix: int) -> None:
    text = " ".join(["the quick brown fox jumps over the lazy dog."] * 80)
    snippet = Snippet(id="fox", text=text)
    ids = bpe_tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) > 500
    cut = split(snippet, bpe_tokenizer, length)
    assert len(cut.prefix_ids) == n_prefix and len(cut.suffix_ids) == length - n_prefix
    assert list(cut.prefix_ids + cut.suffix_ids) == ids[:length]
    assert cut.prefix + cut.suffix == cut.text == bpe_tokenizer.decode(ids[:length])
    assert text.startswith(cut.text)
    assert token_count(text, bpe_tokenizer) == len(ids)


@pytest.mark.parametrize("tokenizer", ["whitespace", "wordlevel"])
def test_split_too_short_error(tokenizer: str, wordlevel_tokenizer) -> None:
    tok = "whitespace" if tokenizer == "whitespace" else wordlevel_tokenizer
    snippet = Snippet(id="short", text=" ".join(WORDS[:150]))
    with pytest.raises(DataError) as info:
        split(snippet, tok, 200)
    assert str(info.value) == (
        "snippet 'short' has 150 tokens; length 200 needs at least 200 "
        "(pick a shorter length or a longer snippet)"
    )


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_split_empty_snippet_error(text: str) -> None:
    with pytest.raises(DataError, match="snippet 'e' is empty; give it some text"):
        split(Snippet(id="e", text=text), "whitespace", 200)


def test_split_unknown_tokenizer_name() -> None:
    with pytest.raises(DataError, match="tokenizer 'bert' is unknown"):
        split(LONG, "bert", 200)


def test_token_count_whitespace() -> None:
    assert token_count(" a  b\nc ", "whitespace") == 3
    assert token_count(LONG.text, "whitespace") == 600
