"""Which words of a victim output (and of the true suffix) make up the common subsequence behind Mem.

The dashboard shows the victim output next to the true suffix with the longest common
subsequence (LCS) of their ROUGE-L tokens highlighted. The tokens are exactly the ones Mem is
computed on (:func:`memprobe_core.metrics.rouge_tokens` with the run's scoring options), so the
number of highlighted tokens is the LCS that Mem counts.

The alignment comes from ``rapidfuzz.distance.LCSseq.opcodes``: the same C++ LCS the metrics use,
and it returns one concrete longest common subsequence. ``difflib.SequenceMatcher`` is not an LCS
(it greedily takes the longest contiguous block first and can miss tokens), so the highlight would
disagree with the score.

Everything here returns data (text segments flagged in/out of the LCS); :func:`segments_to_html`
turns them into HTML with every piece of text escaped. No Streamlit here.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from rapidfuzz.distance import LCSseq

from memprobe_core.config import ScoringConfig
from memprobe_core.metrics import apply_output_window, rouge_tokens


class Segment(NamedTuple):
    """A run of text and whether it is part of the common subsequence."""

    text: str
    in_lcs: bool


@dataclass(frozen=True)
class Overlap:
    """The token-level overlap of a victim output with the true suffix.

    Attributes:
        output_segments: the scored part of the output, as segments (concatenated, the text).
        suffix_segments: the true suffix, as segments.
        output_rest: output text beyond the scored window (not scored; shown dimmed), or ``""``.
        lcs_tokens: length of the common subsequence (tokens highlighted on each side).
        output_tokens / suffix_tokens: ROUGE-L tokens on each side.
    """

    output_segments: list[Segment]
    suffix_segments: list[Segment]
    output_rest: str
    lcs_tokens: int
    output_tokens: int
    suffix_tokens: int

    @property
    def recall(self) -> float:
        """LCS / suffix tokens: Mem under the ``recall`` variant."""
        return self.lcs_tokens / self.suffix_tokens if self.suffix_tokens else 0.0


def _is_word_char(char: str, tokenizer: str) -> bool:
    # Characters that can be part of a ROUGE token: for ``rouge``, those whose lowercase has an
    # ASCII letter/digit (rouge-score lowercases, then keeps [a-z0-9]); for ``unicode``, letters,
    # digits and combining marks of any script, but not "_" (metrics' unicode word pattern).
    if tokenizer == "rouge":
        return any("a" <= c <= "z" or "0" <= c <= "9" for c in char.lower())
    return char.isalnum() or (char != "_" and _is_mark(char))


def _is_mark(char: str) -> bool:
    return unicodedata.category(char).startswith("M")


def word_spans(
    text: str, *, stemmer: bool = True, tokenizer: str = "rouge"
) -> list[tuple[int, int, list[str]]]:
    """Character spans of the words of ``text`` and the ROUGE tokens each gives.

    Args:
        text: any text.
        stemmer / tokenizer: the scoring options (see :func:`memprobe_core.metrics.rouge_tokens`).

    Returns:
        ``(start, end, tokens)`` per word, in order; concatenating the ``tokens`` gives
        ``rouge_tokens(text, ...)`` (a word usually gives one token; an odd character such as
        "İ", whose lowercase is two characters, can split it).
    """
    spans: list[tuple[int, int, list[str]]] = []
    start: int | None = None
    for i, char in enumerate(text + "\x00"):  # sentinel closes the last word
        if i < len(text) and _is_word_char(char, tokenizer):
            if start is None:
                start = i
        elif start is not None:
            tokens = rouge_tokens(text[start:i], stemmer=stemmer, tokenizer=tokenizer)
            if tokens:
                spans.append((start, i, tokens))
            start = None
    return spans


def _lcs_flags(a: Sequence[str], b: Sequence[str]) -> tuple[list[bool], list[bool], int]:
    """For each token of ``a`` and of ``b``: is it in the (one) LCS rapidfuzz picks?"""
    in_a, in_b = [False] * len(a), [False] * len(b)
    if not a or not b:
        return in_a, in_b, 0
    # Tokens become ints so rapidfuzz compares them exactly (as metrics does).
    index: dict[str, int] = {}
    ids_a = [index.setdefault(t, len(index)) for t in a]
    ids_b = [index.setdefault(t, len(index)) for t in b]
    n = 0
    for op in LCSseq.opcodes(ids_a, ids_b):
        tag, a0, a1, b0 = op.tag, op.src_start, op.src_end, op.dest_start
        if tag == "equal":
            for k in range(a1 - a0):
                in_a[a0 + k] = in_b[b0 + k] = True
                n += 1
    return in_a, in_b, n


def _segments(
    text: str, spans: list[tuple[int, int, list[str]]], flags: list[bool]
) -> list[Segment]:
    """Cut ``text`` into segments; a word is highlighted when any of its tokens is in the LCS."""
    # (text, in_lcs, is_word) pieces, in order.
    pieces: list[tuple[str, bool, bool]] = []
    pos = flag_i = 0
    for start, end, tokens in spans:
        if start > pos:
            pieces.append((text[pos:start], False, False))
        pieces.append((text[start:end], any(flags[flag_i : flag_i + len(tokens)]), True))
        flag_i += len(tokens)
        pos = end
    if pos < len(text):
        pieces.append((text[pos:], False, False))
    segments: list[Segment] = []
    for i, (piece, on, is_word) in enumerate(pieces):
        # A separator between two highlighted words joins the highlight (not across a line
        # break), so a copied phrase reads as one mark rather than a row of marks.
        if (
            not is_word
            and 0 < i < len(pieces) - 1
            and pieces[i - 1][1]
            and pieces[i + 1][1]
            and "\n" not in piece
        ):
            on = True
        if segments and segments[-1].in_lcs == on:
            segments[-1] = Segment(segments[-1].text + piece, on)
        else:
            segments.append(Segment(piece, on))
    return segments


def overlap(
    output: str,
    suffix: str,
    config: ScoringConfig | None = None,
    *,
    suffix_tokens: int | None = None,
    tokenizer: Any | None = None,
) -> Overlap:
    """The token-level overlap of a victim output with the true suffix, as Mem sees it.

    Args:
        output: the victim's output.
        suffix: the true suffix.
        config: scoring options (stemmer, tokenizer, output window); default: the paper's.
        suffix_tokens: the suffix length in victim tokens; when given, only the scored window of
            the output (``config.output_window``) is aligned and the rest is returned apart.
        tokenizer: the victim's tokenizer for that window (``None``: whitespace words).

    Returns:
        An :class:`Overlap`; ``lcs_tokens / suffix_tokens`` equals Mem under ``recall``.
    """
    config = config or ScoringConfig()
    scored, rest = output, ""
    if suffix_tokens is not None:
        scored = apply_output_window(output, suffix_tokens, config.output_window, tokenizer)
        if scored != output and config.output_window == "first" and output.startswith(scored):
            rest = output[len(scored) :]
    out_spans = word_spans(scored, stemmer=config.stemmer, tokenizer=config.tokenizer)
    suf_spans = word_spans(suffix, stemmer=config.stemmer, tokenizer=config.tokenizer)
    out_tokens = [t for _, _, toks in out_spans for t in toks]
    suf_tokens = [t for _, _, toks in suf_spans for t in toks]
    in_out, in_suf, n = _lcs_flags(out_tokens, suf_tokens)
    return Overlap(
        output_segments=_segments(scored, out_spans, in_out),
        suffix_segments=_segments(suffix, suf_spans, in_suf),
        output_rest=rest,
        lcs_tokens=n,
        output_tokens=len(out_tokens),
        suffix_tokens=len(suf_tokens),
    )


MARK_STYLE = "background:#ffe08a;color:#111;border-radius:2px;padding:0 1px"


def segments_to_html(segments: Sequence[Segment], *, mark_style: str = MARK_STYLE) -> str:
    """HTML for segments: every text escaped, LCS runs in ``<mark>``, newlines kept.

    The text may be anything a user or a model wrote (``<img src=x onerror=alert(1)>``): it is
    passed through :func:`escape_html` and so can only ever show as text.
    """
    parts = []
    for seg in segments:
        text = escape_html(seg.text)
        parts.append(f'<mark style="{mark_style}">{text}</mark>' if seg.in_lcs else text)
    return "".join(parts)


def escape_html(text: object, *, multiline: bool = True) -> str:
    """The one escaping of text for HTML: every HTML writer of memprobe (the audit report, the
    diff, the extraction map and continuation reports, the dashboard's HTML blocks) puts any
    text from a user, a document or a model through it.

    Control and reordering characters (:func:`show_controls`: C0 and C1 controls such as ESC and
    BEL, DEL, bidi overrides and isolates such as U+202E and U+2066-U+2069, invisible characters)
    become visible escapes (``\\u202e``), so a text cannot reverse or hide what follows it; then
    ``html.escape`` with quotes, so markup shows as text. ``multiline``: newlines kept (inside a
    ``white-space: pre-wrap`` block), else shown as ``\\x0a``.
    """
    # ``&#39;`` for a quote, as jinja2's autoescaping (markupsafe) writes it: one spelling.
    return html.escape(show_controls(str(text), multiline=multiline), quote=True).replace(
        "&#x27;", "&#39;"
    )


def jinja_finalize(value: Any) -> Any:
    """jinja2's ``finalize`` for memprobe's HTML templates: a plain string goes through
    :func:`escape_html` (returned as ``Markup``, so autoescaping does not escape it twice);
    ``Markup`` built by our own code and numbers pass as they are."""
    from markupsafe import Markup

    if isinstance(value, str) and not isinstance(value, Markup):
        return Markup(escape_html(value))
    return value


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>:$&\"'=^])")


def markdown_escape(text: object) -> str:
    """Text (user or model supplied) made safe and literal for Markdown widgets.

    Every ASCII punctuation character that Markdown, Streamlit's colour directives (``:red[…]``)
    or its maths (``$…$``) could interpret is backslash-escaped; CommonMark shows an escaped
    punctuation character as itself, so the reader sees the text exactly as typed.
    """
    return _MD_SPECIAL.sub(r"\\\1", str(text))


# Characters a terminal or a browser acts on instead of showing: C0 controls (ESC, BEL, CR, BS,
# NUL …), DEL, C1 controls (0x9b is a one-byte CSI), the line and paragraph separators, and the
# bidi embeddings, overrides, isolates and marks that reorder what is shown. Tab is kept; a
# newline only in a block shown as several lines. One list for the terminal (cli.output) and the
# HTML report and the dashboard.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# Characters that print nothing, or a missing-glyph box, where they stand (an attacker's token
# search such as GCG writes them): soft hyphen, grapheme joiner, Hangul and Khmer fillers,
# Mongolian selectors, zero-width space / (non-)joiner, word joiner and invisible operators,
# byte-order mark, annotation marks, surrogates, private use, non-characters and tag characters.
INVISIBLE = (
    "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200d\u2060-\u2064"
    "\u206a-\u206f\u3164\ud800-\udfff\ue000-\uf8ff\ufdd0-\ufdef\ufeff\uffa0\ufff9-\ufffb"
    "\ufffe\uffff\U000e0000-\U000e007f\U000f0000-\U0010ffff"
)
_UNSAFE_LINE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}{INVISIBLE}]")
_UNSAFE_BLOCK = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}{INVISIBLE}]")


def visible_escape(match: re.Match[str]) -> str:
    """A matched character as the literal text ``\\x1b`` / ``\\u202e`` / ``\\U000e0041``."""
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def show_controls(text: str, *, multiline: bool = True) -> str:
    r"""``text`` with every control and reordering character shown as a visible escape.

    ``multiline``: newlines stay (and ``\r\n`` becomes ``\n``); otherwise a newline is shown as
    ``\x0a`` too, so one value cannot forge a line of its own.
    """
    if multiline:
        return _UNSAFE_BLOCK.sub(visible_escape, text.replace("\r\n", "\n"))
    return _UNSAFE_LINE.sub(visible_escape, text)
