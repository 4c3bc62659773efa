"""Token windows over a whole document: the units of an extraction map (docs/method.md §19).

Cooper et al. 2025 map which windows of a book an open-weight model writes back: a window is
``prefix_tokens`` of the document followed by the next ``suffix_tokens``; windows start every
``stride`` tokens. With the defaults (50 + 50, stride 50) every token after the first 50 is in
exactly one window's suffix, so the suffixes tile the document and the map shows, token by token,
what the model reproduces from the 50 tokens before it.

Windows are cut from the document's own token ids (one encoding of the whole text), never from
re-encoded pieces of it: decoding a slice and encoding it again can move a boundary by a token.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprobe_core.documents.reading import DocumentError
from memprobe_core.errors import OptionError
from memprobe_core.option_fields import check_options, option

# A window's id in the store: its index, zero-padded so ids sort in document order.
WINDOW_ID_DIGITS = 6


@dataclass(frozen=True)
class MapOptions:
    """How an extraction map cuts and scores a document (Cooper et al. 2025's 50 + 50 by
    default); each field's help and range are in its ``option`` metadata."""

    prefix_tokens: int = option(
        50,
        help="tokens of the document before each window's suffix (the prompt)",
        low=1,
        high=100_000,
        flag="--prefix-tokens",
        page="Prefix tokens (the prompt)",
        metavar="N",
    )
    suffix_tokens: int = option(
        50,
        help="tokens each window asks the model to write back; a window is extractable when "
        "greedy decoding writes all of them",
        low=1,
        high=100_000,
        flag="--suffix-tokens",
        page="Suffix tokens (to write back)",
        metavar="N",
    )
    stride: int = option(
        50,
        help="tokens from one window's start to the next (equal to --suffix-tokens: the "
        "suffixes tile the document)",
        low=1,
        high=100_000,
        flag="--stride",
        page="Stride (tokens between windows)",
        metavar="N",
    )
    batch_windows: int = option(
        16,
        help="windows per teacher-forced forward pass (memory grows with it; results do not "
        "change)",
        low=1,
        high=4096,
        flag="--batch-windows",
        page="Windows per batch",
        metavar="N",
    )

    def __post_init__(self) -> None:
        check_options(self)
        if self.stride > self.suffix_tokens:
            # A gap between suffixes leaves document tokens no window ever asks for, and the
            # map's share of extracted tokens would silently describe a part of the document.
            raise OptionError(
                "stride",
                self.stride,
                f"give at most --suffix-tokens ({self.suffix_tokens}), or every token "
                "between two windows' suffixes would never be asked for",
            )

    @property
    def window_tokens(self) -> int:
        return self.prefix_tokens + self.suffix_tokens


@dataclass(frozen=True)
class Window:
    """One window: its place in the document's token ids.

    Attributes:
        index: 0, 1, … in document order.
        start: the first prefix token's index in the document's ids.
        prefix_tokens / suffix_tokens: the window's two parts.
    """

    index: int
    start: int
    prefix_tokens: int
    suffix_tokens: int

    @property
    def suffix_start(self) -> int:
        return self.start + self.prefix_tokens

    @property
    def end(self) -> int:
        return self.suffix_start + self.suffix_tokens

    @property
    def id(self) -> str:
        return window_id(self.index)

    def prefix_ids(self, ids: list[int]) -> list[int]:
        return ids[self.start : self.suffix_start]

    def suffix_ids(self, ids: list[int]) -> list[int]:
        return ids[self.suffix_start : self.end]


def window_id(index: int) -> str:
    """The store id of window ``index`` (``w000012``)."""
    return f"w{index:0{WINDOW_ID_DIGITS}d}"


def window_index(window_id_: str) -> int:
    """The index in a window id (``w000012`` → 12)."""
    return int(window_id_[1:])


def cut_windows(n_tokens: int, options: MapOptions, name: str = "document") -> list[Window]:
    """Every whole window of a document of ``n_tokens`` tokens, in order.

    A tail shorter than a window's suffix after the last window is not asked for (reported by
    the map's summary as tokens outside every suffix).

    Raises:
        DocumentError: the document is shorter than one window.
    """
    if n_tokens < options.window_tokens:
        raise DocumentError(
            f"{name} has {n_tokens:,} tokens, fewer than one window of "
            f"{options.prefix_tokens} + {options.suffix_tokens}; give a longer document or "
            "smaller --prefix-tokens / --suffix-tokens"
        )
    starts = range(0, n_tokens - options.window_tokens + 1, options.stride)
    return [
        Window(i, start, options.prefix_tokens, options.suffix_tokens)
        for i, start in enumerate(starts)
    ]
