"""Snippets: the text we probe for, and how it is split into prefix and suffix.

Loaders for files live in ``memprobe_core.snippets.loaders``; the built-in demo corpus in
``memprobe_core.snippets.corpus``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from memprobe_core.config import DEFAULT_PREFIX_RATIO
from memprobe_core.errors import MemprobeError

# The paper's exact prefix sizes for its three lengths at the 33/67 split (66/134, 100/200,
# 167/333). No single rounding rule gives all three, so they are a table; other lengths or ratios
# use round(length * ratio).
PAPER_PREFIX_TOKENS: dict[int, int] = {200: 66, 300: 100, 500: 167}


# What a snippet's ``label`` may be (None: not labelled).
MEMBER, NONMEMBER = "member", "nonmember"
SNIPPET_LABELS: tuple[str | None, ...] = (None, MEMBER, NONMEMBER)


class DataError(MemprobeError, ValueError):
    """Bad input data; the message names the file/row/snippet and what to do."""


@dataclass(frozen=True)
class Snippet:
    """A piece of text believed to be in a model's training data.

    Attributes:
        id: unique within its dataset.
        text: the full text.
        domain: free label (``code``, ``legal``, ``cc``, ``books`` …); picks the default α.
        source: where it came from (file and row, package name …).
        label: ``member`` (believed in the training data), ``nonmember`` (known not to be:
            written after the model's cut-off, or generated at random) or ``None`` (unknown).
            Labelled audits evaluate membership signals and methods on it (AUROC, TPR@FPR).
    """

    id: str
    text: str
    domain: str = "unknown"
    source: str = ""
    label: str | None = None

    def __post_init__(self) -> None:
        if self.label not in SNIPPET_LABELS:
            raise DataError(
                f"snippet {self.id!r} has label {self.label!r}; use one of "
                f"{', '.join(repr(v) for v in SNIPPET_LABELS)}"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class WhitespaceTokenizer:
    """Splits on whitespace (paper §5.3); ids index the words of the last encoded texts.

    ``decode`` joins words with single spaces, so the original spacing is not kept.
    """

    name = "whitespace"

    def __init__(self) -> None:
        self._vocab: dict[str, int] = {}
        self._words: list[str] = []

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = []
        for word in text.split():
            if word not in self._vocab:
                self._vocab[word] = len(self._words)
                self._words.append(word)
            ids.append(self._vocab[word])
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return " ".join(self._words[i] for i in ids)


@dataclass(frozen=True)
class SplitSnippet:
    """A snippet cut into ``prefix || suffix`` by tokens of a tokenizer.

    Attributes:
        snippet: the source snippet.
        length: total tokens used (prefix + suffix).
        prefix / suffix: decoded texts of the two parts.
        prefix_ids / suffix_ids: token ids of the two parts (of ``tokenizer_name``).
        tokenizer_name: which tokenizer cut it (a model id or ``whitespace``).
        text: the first ``length`` tokens decoded as one text (what the attacker sees under
            full access; decoding the whole keeps a word cut at the boundary intact).
        bos_in_prefix: the tokenizer's BOS counted as one of the prefix's tokens (the reference
            code's convention: 65 text tokens + BOS = 66 at length 200).
    """

    snippet: Snippet
    length: int
    prefix: str
    suffix: str
    prefix_ids: tuple[int, ...]
    suffix_ids: tuple[int, ...]
    tokenizer_name: str
    text: str
    bos_in_prefix: bool = False

    @property
    def suffix_tokens(self) -> int:
        return len(self.suffix_ids)


def prefix_size(length: int, prefix_ratio: float = DEFAULT_PREFIX_RATIO) -> int:
    """Prefix tokens for a total ``length`` (66/100/167 for 200/300/500 at the default ratio)."""
    if length < 2:
        raise DataError(f"length {length} is too short; use at least 2 tokens")
    if not 0.0 < prefix_ratio < 1.0:
        raise DataError(f"prefix_ratio {prefix_ratio} must be strictly between 0 and 1")
    if abs(prefix_ratio - DEFAULT_PREFIX_RATIO) < 1e-12 and length in PAPER_PREFIX_TOKENS:
        return PAPER_PREFIX_TOKENS[length]
    return min(max(1, round(length * prefix_ratio)), length - 1)


def split(
    snippet: Snippet,
    tokenizer: Any,
    length: int,
    prefix_ratio: float = DEFAULT_PREFIX_RATIO,
    *,
    bos_in_prefix: bool = False,
) -> SplitSnippet:
    """Cut the first ``length`` tokens of a snippet into prefix and suffix.

    Args:
        snippet: the text to cut.
        tokenizer: an HF-style tokenizer (``encode``/``decode``) or the string ``"whitespace"``.
        length: total tokens (200, 300, 500 in the paper).
        prefix_ratio: prefix share (0.33 gives the paper's 66/134, 100/200, 167/333).
        bos_in_prefix: count the special tokens the tokenizer puts in front of a text (BOS) among
            the prefix tokens, as the paper's reference code does (its prefix is 65 text tokens
            + BOS; the suffix keeps its 134). No effect for a tokenizer that adds none.

    Raises:
        DataError: empty text, or fewer tokens than ``length`` (never padded).
    """
    if isinstance(tokenizer, str):
        if tokenizer != "whitespace":
            raise DataError(f"tokenizer {tokenizer!r} is unknown; pass a tokenizer or 'whitespace'")
        tokenizer = WhitespaceTokenizer()
    if not snippet.text.strip():
        raise DataError(f"snippet {snippet.id!r} is empty; give it some text")
    n_prefix = prefix_size(length, prefix_ratio)
    ids = list(tokenizer.encode(snippet.text, add_special_tokens=False))
    n_special = _leading_specials(tokenizer, snippet.text, ids) if bos_in_prefix else 0
    n_prefix = max(0, n_prefix - n_special)
    length -= n_special
    if len(ids) < length:
        raise DataError(
            f"snippet {snippet.id!r} has {len(ids)} tokens; length {length} needs at least "
            f"{length} (pick a shorter length or a longer snippet)"
        )
    prefix_ids, suffix_ids = ids[:n_prefix], ids[n_prefix:length]
    length += n_special
    name = getattr(tokenizer, "name_or_path", None) or getattr(tokenizer, "name", None)
    return SplitSnippet(
        snippet=snippet,
        length=length,
        prefix=tokenizer.decode(prefix_ids, skip_special_tokens=True),
        suffix=tokenizer.decode(suffix_ids, skip_special_tokens=True),
        prefix_ids=tuple(prefix_ids),
        suffix_ids=tuple(suffix_ids),
        tokenizer_name=str(name or type(tokenizer).__name__),
        text=tokenizer.decode(ids[: length - n_special], skip_special_tokens=True),
        bos_in_prefix=n_special > 0,
    )


def _leading_specials(tokenizer: Any, text: str, plain_ids: list[int]) -> int:
    """How many special tokens (BOS) the tokenizer puts in front of ``text`` by default."""
    if isinstance(tokenizer, WhitespaceTokenizer):
        return 0
    return len(leading_special_ids(tokenizer, text, plain_ids))


def leading_special_ids(tokenizer: Any, text: str, plain_ids: Sequence[int]) -> list[int]:
    """The special tokens ``tokenizer`` puts in front of ``text`` by its own default.

    ``plain_ids`` is ``text`` encoded without special tokens. Llama- and Gemma-style tokenizers
    put a BOS there; GPT-2- and SmolLM2-style ones put none, although they define a
    ``bos_token`` (a chat-turn marker, or EOS): a model is trained and served on what its
    tokenizer adds, so that is what its text is scored with. Only tokens in front count (an EOS
    some tokenizers append is not part of the text's context).
    """
    with_specials = list(tokenizer.encode(text, add_special_tokens=True))
    extra = len(with_specials) - len(plain_ids)
    if extra > 0 and with_specials[extra:] == list(plain_ids):
        return with_specials[:extra]
    return []


def token_count(text: str, tokenizer: Any) -> int:
    """Tokens of ``text`` under ``tokenizer`` (or ``"whitespace"``)."""
    if tokenizer == "whitespace":
        return len(text.split())
    return len(tokenizer.encode(text, add_special_tokens=False))
