"""An extraction map as people read it: a few lines of text, a per-window table (CSV), JSON, and
a self-contained HTML report whose strip shows the document window by window.

Every text from the document or the model is escaped where it is shown (in HTML by
:func:`memprobe_core.highlight.escape_html`, control and bidi characters shown as escapes; the CSV through :func:`memprobe_core.report.export.to_safe_csv`, formula-safe).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from markupsafe import Markup

from memprobe_core.documents.map_near_verbatim import DocumentBound, document_bound
from memprobe_core.documents.map_run import StoredMap
from memprobe_core.documents.rank_cost import document_token_bits
from memprobe_core.highlight import escape_html, jinja_finalize
from memprobe_core.measuring.bracket import describe_bracket
from memprobe_core.models.endpoints import describe_endpoint

# The map's colour scale: the share of a window's suffix greedy decoding writes back.
# Grey for nothing, then light to dark red; full (extractable) windows are the darkest.
_SCALE = ("#e8e8e8", "#fbd3c4", "#f4a582", "#d6604d", "#b2182b", "#67001f")


def share_colour(match_share: float) -> str:
    """The map's colour of a window whose suffix is ``match_share`` reproduced (0 … 1)."""
    if match_share >= 1:
        return _SCALE[-1]
    if match_share <= 0:
        return _SCALE[0]
    steps = len(_SCALE) - 2  # the shades between none and all
    return _SCALE[1 + min(int(match_share * steps), steps - 1)]


def map_frame(stored: StoredMap) -> pd.DataFrame:
    """One row per scored window, in document order (the CSV export and the page's table)."""
    rows = []
    for s in stored.scores:
        text = stored.texts.get(s.index)
        rows.append(
            {
                "window": s.index,
                "start_token": s.start,
                "suffix_start_token": s.suffix_start,
                "suffix_tokens": s.suffix_tokens,
                "match_tokens": s.match_tokens,
                "match_share": s.match_tokens / s.suffix_tokens,
                "extractable": s.extractable,
                "log10_p_z": s.pz.get("log10_p_z"),
                "n_at_p": s.pz.get("n_at_p"),
                "pz_outside_support": s.pz.get("pz_outside_support"),
                "prefix": text.prefix if text else "",
                "true_suffix": text.suffix if text else "",
                "greedy_output": text.output if text else "",
            }
        )
    return pd.DataFrame(rows)


# What the text view says about each character of the document, weakest first; a character
# inside several windows' suffixes (a stride shorter than the suffix) shows the strongest.
TEXT_STATES = ("outside", "asked", "written", "extracted")
_TEXT_STYLE = {
    "outside": "color:#777",
    "asked": "",
    "written": f"background:{_SCALE[2]}",
    "extracted": f"background:{_SCALE[4]};color:#fff",
}
_TEXT_TITLE = {
    "outside": "in no scored window's suffix",
    "asked": "asked for, not written back",
    "written": "written back greedily (the window's suffix only in part)",
    "extracted": "written back greedily (the window's whole suffix: extractable)",
}


# The same words for a window's state in the grid's legend, the headline, the text view and the
# reports (one source: "written back" alone read as "any of it" beside a grid of coloured cells,
# while the count was of windows written back whole).
WHOLE_WORDS = _TEXT_TITLE["extracted"]
PART_WORDS = _TEXT_TITLE["written"]
NONE_WORDS = _TEXT_TITLE["asked"]


@dataclass(frozen=True)
class WrittenBack:
    """How much of a map greedy decoding writes back, window by window and token by token.

    Attributes:
        windows: windows scored. whole: windows whose whole suffix is written back
            (extractable). part: windows whose suffix is written back only in part (its first
            tokens, at least one). none: windows of which not one suffix token is written back.
        whole_tokens: document tokens inside a whole window's suffix. part_tokens: document
            tokens inside the part some other window writes back, and in no whole window's
            suffix (the text view's two coloured states). document_tokens: the document's.
        suffix_tokens: tokens a window's suffix holds (what "whole" means).
    """

    windows: int
    whole: int
    part: int
    none: int
    whole_tokens: int
    part_tokens: int
    document_tokens: int
    suffix_tokens: int

    def share(self, tokens: int) -> float:
        return tokens / self.document_tokens if self.document_tokens else 0.0


def written_back(stored: StoredMap) -> WrittenBack:
    """The map's windows and tokens written back whole, in part and not at all."""
    whole_tokens: set[int] = set()
    part_tokens: set[int] = set()
    whole = part = 0
    for s in stored.scores:
        if s.extractable:
            whole += 1
            whole_tokens.update(range(s.suffix_start, s.suffix_start + s.suffix_tokens))
        elif s.match_tokens > 0:
            part += 1
            part_tokens.update(range(s.suffix_start, s.suffix_start + s.match_tokens))
    n = len(stored.scores)
    return WrittenBack(
        windows=n,
        whole=whole,
        part=part,
        none=n - whole - part,
        whole_tokens=len(whole_tokens),
        part_tokens=len(part_tokens - whole_tokens),
        document_tokens=stored.document_tokens,
        suffix_tokens=stored.options.suffix_tokens,
    )


def written_back_line(w: WrittenBack) -> str:
    """One line in the legend's words: how many windows are in each state."""
    return (
        f"of {w.windows:,} windows ({w.suffix_tokens} suffix tokens each): {w.whole:,} "
        f"{WHOLE_WORDS}; {w.part:,} {PART_WORDS}; {w.none:,} {NONE_WORDS}"
    )


def written_back_legend(w: WrittenBack) -> Markup:
    """The counts of :func:`written_back_line` as HTML, each beside the grid's colour for it
    (the whole suffix: the darkest; in part: the shades between; nothing: grey)."""
    swatch = '<span style="background:{};padding:0 8px;margin:0 4px 0 10px">&nbsp;</span>'
    parts = [escape_html(f"Of {w.windows:,} windows ({w.suffix_tokens} suffix tokens each):")]
    for count, words, colour in (
        (w.whole, WHOLE_WORDS, _SCALE[-1]),
        (w.part, PART_WORDS, _SCALE[2]),
        (w.none, NONE_WORDS, _SCALE[0]),
    ):
        parts.append(swatch.format(colour) + escape_html(f"{count:,} {words}"))
    return Markup("".join(parts))


def pz_line(stored: StoredMap) -> str:
    """The map's p_z in one line: the median over the windows with p_z > 0 and their 10th–90th
    percentile range, or the one window's value when only one has p_z > 0 (a range over one
    window read as a spread that is not there)."""
    s = stored.summary
    scheme = stored.pz.scheme.label()
    if s.log10_p_z_quantiles is None:
        return f"p_z ({scheme}): 0 for every window (a suffix token the scheme never draws)"
    over = sum(1 for score in stored.scores if score.pz.get("log10_p_z") is not None)
    zero = f"{s.windows - over:,} of {s.windows:,} windows have p_z = 0"
    low, mid, high = s.log10_p_z_quantiles
    if over == 1:
        return f"log10 p_z ({scheme}) of the one window with p_z > 0: {log10_text(mid)}; {zero}"
    return (
        f"log10 p_z ({scheme}) over the {over:,} windows with p_z > 0: median "
        f"{log10_text(mid)} (10th–90th percentile {log10_text(low)} … {log10_text(high)}); "
        f"{zero}"
    )


@dataclass(frozen=True)
class TextSpan:
    """A stretch of the document's characters in one state, from one window's suffix (``None``
    for text outside every scored suffix)."""

    text: str
    state: str
    window: int | None


def text_spans(stored: StoredMap) -> list[TextSpan] | None:
    """The document's text cut where its state changes (docs/method.md §19's text view):
    *extracted* inside an extractable window's suffix, *written* inside the leading run greedy
    decoding writes back of any other window, *asked* elsewhere in a scored suffix, *outside*
    everywhere else. ``None`` when the run has no token offsets (:attr:`StoredMap.token_starts`).
    """
    starts = stored.token_starts
    if starts is None:
        return None
    level = [0] * len(starts)
    owner: list[int | None] = [None] * len(starts)
    for s in stored.scores:
        for offset in range(s.suffix_tokens):
            token = s.suffix_start + offset
            state = 3 if s.extractable else 2 if offset < s.match_tokens else 1
            if token < len(level) and state > level[token]:
                level[token], owner[token] = state, s.index
    text = stored.text
    bounds = token_bounds(starts, text)
    spans: list[TextSpan] = []
    first = 0
    for token in range(1, len(starts) + 1):
        if token == len(starts) or (level[token], owner[token]) != (level[first], owner[first]):
            chunk = text[bounds[first] : bounds[token]]
            if chunk:
                spans.append(TextSpan(chunk, TEXT_STATES[level[first]], owner[first]))
            first = token
    return spans


def token_bounds(starts: Sequence[int], text: str) -> list[int]:
    """Where each token's characters begin, then the text's end: a token runs from its start to
    the next token's, so the pieces tile the text; the running maximum keeps a tokenizer's
    overlapping offsets from cutting backwards."""
    bounds = [0]
    for start in starts[1:]:
        bounds.append(max(bounds[-1], min(start, len(text))))
    bounds.append(len(text))
    return bounds


def text_view_html(spans: list[TextSpan]) -> Markup:
    """The text view as HTML: every character escaped, each span coloured by its state, its
    window and state in the hover title; no script."""
    parts = []
    for span in spans:
        where = "" if span.window is None else f"window {span.window}: "
        parts.append(
            f'<span style="{_TEXT_STYLE[span.state]}" '
            f'title="{escape_html(where + _TEXT_TITLE[span.state])}">{escape_html(span.text)}</span>'
        )
    return Markup(
        '<div style="white-space:pre-wrap;font-family:ui-monospace,monospace;line-height:1.5">'
        + "".join(parts)
        + "</div>"
    )


def text_view_legend() -> Markup:
    """The text view's colours, as HTML."""
    return Markup(
        " ".join(
            f'<span style="{_TEXT_STYLE[state] or "color:inherit"};padding:2px 6px">'
            f"{escape_html(_TEXT_TITLE[state])}</span>"
            for state in TEXT_STATES
        )
    )


def map_json(stored: StoredMap) -> dict[str, Any]:
    """The map's figures and settings as JSON-ready values (``memprobe document --json``)."""
    return {
        "run_id": stored.run_id,
        "status": stored.status,
        "document": stored.name,
        "victim": stored.victim,
        "windows_total": stored.windows_total,
        "windows_failed": stored.errors,
        "options": {
            "prefix_tokens": stored.options.prefix_tokens,
            "suffix_tokens": stored.options.suffix_tokens,
            "stride": stored.options.stride,
        },
        "pz_scheme": stored.pz.scheme.label(),
        "discover_p": stored.pz.discover_p,
        "summary": stored.summary.to_dict(),
        # The paper's setting (docs/method.md §21): one pass over the whole document.
        "extraction_bits": (stored.rank_cost or {}).get("extraction_bits"),
        "greedy_extractable_rate": (stored.rank_cost or {}).get("greedy_extractable_rate"),
        # Without the per-token factors (one number a token; the HTML report and the page
        # colour the text by them): the JSON stays the size of its figures.
        "rank_cost": {k: v for k, v in (stored.rank_cost or {}).items() if k != "token_log2_bounds"}
        or None,
        **near_verbatim_json(stored),
    }


def near_verbatim_json(stored: StoredMap) -> dict[str, Any]:
    """The document's near-verbatim lower bound for ``--json`` (docs/method.md §22): the
    highest of the measured windows' (``None`` with ``near_verbatim_window`` ``None`` when none
    was measured), which window, and every measured window's record."""
    found = document_bound(stored.near_verbatim)
    return {
        "near_verbatim_log10_lower": found.log10_lower if found else None,
        "near_verbatim_window": found.window["window"] if found else None,
        "near_verbatim_edits": found.window.get("near_verbatim_edits") if found else None,
        "near_verbatim_windows": list(stored.near_verbatim),
    }


def bracket_record(stored: StoredMap, found: DocumentBound) -> dict[str, Any]:
    """The document's bracket as :func:`describe_bracket` reads a unit's: the bound's window
    (its near-verbatim lower bound and its p_z, under the map's scheme) and the document's
    rank-based b."""
    window = found.window
    record: dict[str, Any] = {
        "pz_scheme": stored.pz.scheme.label(),
        "log10_p_z": window.get("log10_p_z"),
        "near_verbatim_log10_lower": found.log10_lower,
        "near_verbatim_edits": window.get("near_verbatim_edits"),
    }
    if stored.rank_cost and stored.rank_cost.get("extraction_windows") is not None:
        record["extraction_bits"] = stored.rank_cost.get("extraction_bits")
        record["extraction_window_tokens"] = stored.rank_cost.get("extraction_window_tokens")
    return record


def bracket_line(stored: StoredMap) -> str | None:
    """The document's bracket in words (lower ≤ p_z ≤ upper), naming the window its lower
    side and p_z are of; ``None`` when no window's bound was measured (a run from before the
    bound, or ``--near-verbatim-windows 0``): the rank cost is then shown alone, as before."""
    found = document_bound(stored.near_verbatim)
    if found is None:
        return None
    window = found.window
    start = int(window["suffix_start"])
    end = start + int(window["suffix_tokens"])
    return (
        f"{describe_bracket(bracket_record(stored, found))} Near-verbatim and p_z: window "
        f"{window['window']} (suffix tokens {start}-{end}), the highest bound of the "
        f"{found.measured:,} window(s) with the highest p_z measured; b: the whole document."
    )


def log10_text(value: float) -> str:
    """A log10 p_z as shown everywhere: two decimals (a well-known window is about -0.01,
    which one decimal showed as "-0.0"), and never a negative zero."""
    return f"{round(value, 2) + 0.0:.2f}"


def describe_map(stored: StoredMap) -> str:
    """A few lines for people."""
    s = stored.summary
    o = stored.options
    w = written_back(stored)
    lines = [
        f"extraction map of {stored.name} on {stored.victim} (run {stored.run_id}, "
        f"{stored.status}): {s.windows:,} of {stored.windows_total:,} windows of "
        f"{o.prefix_tokens} + {o.suffix_tokens} tokens, stride {o.stride}",
        written_back_line(w),
        f"document tokens written back greedily: {w.whole_tokens:,} of {w.document_tokens:,} "
        f"({w.share(w.whole_tokens):.1%}) in whole windows (extractable), {w.part_tokens:,} "
        f"more ({w.share(w.part_tokens):.1%}) in part; longest extracted stretch "
        f"{s.longest_stretch:,} tokens",
        f"mean share of a window's suffix reproduced from its start: {s.mean_match_share:.1%}",
        pz_line(stored),
    ]
    if stored.rank_cost:
        lines.append(rank_cost_line(stored.rank_cost))
    bracket = bracket_line(stored)
    if bracket:
        lines.append(bracket)
    if stored.endpoint:
        lines.insert(1, f"sent to {describe_endpoint(stored.endpoint)}")
    if stored.errors:
        lines.append(f"{stored.errors} window(s) failed; `memprobe runs {stored.run_id}` shows why")
    return "\n".join(lines)


def rank_cost_line(cost: dict[str, Any]) -> str:
    """The document's rank-based extraction cost in one line (docs/method.md §21)."""
    bits = cost.get("extraction_bits")
    if cost.get("extraction_windows") is None:
        return "rank-based extraction cost: no token ranked"
    start, end = cost["extraction_worst_window"]
    shown = "∞" if bits is None else f"{bits:.1f}"
    return (
        f"rank-based extraction cost (l = {cost['extraction_window_tokens']}, m = "
        f"{cost['rank_cap']}): b = {shown} bits (no decoding needs fewer than 2^b tries; the "
        f"easiest window is tokens {start}-{end}); greedy-extractable rate "
        f"{cost['greedy_extractable_rate']:.1%} of {cost['extraction_windows']:,} windows"
    )


# --- the text by extraction cost (docs/method.md §21) --------------------------------------------

# Bands of a token's b (the cheapest window of l tokens holding it), riskiest first: its upper
# bound in bits and its words. b is a lower bound on the expected tries of ANY decoding, so each
# band says how few tries no decoding can go below.
COST_BANDS: tuple[tuple[float, str], ...] = (
    (1.0, "b under 1 bit: a decoding may need as few as one or two tries (0: greedy writes it)"),
    (10.0, "b 1 to 10 bits: no decoding needs fewer than 2 tries; some may need under 2^10"),
    (20.0, "b 10 to 20 bits: no decoding needs fewer than 2^10 (about a thousand) tries"),
    (40.0, "b 20 to 40 bits: no decoding needs fewer than 2^20 (about a million) tries"),
    (math.inf, "b 40 bits or more: no decoding needs fewer than 2^40 (about 10^12) tries"),
)
_COST_COLOURS = (_SCALE[-1], _SCALE[4], _SCALE[2], _SCALE[1], "")
_COST_TEXT = ("#fff", "#fff", "", "", "")
UNRANKED_WORDS = "not ranked (nothing before it predicts it)"


@dataclass(frozen=True)
class CostSpan:
    """A stretch of the document's characters whose tokens share one min b (rounded to 0.1
    bit; ``math.inf`` for tokens nothing ranks)."""

    text: str
    bits: float

    @property
    def band(self) -> int | None:
        """Its :data:`COST_BANDS` index (``None``: not ranked)."""
        if not math.isfinite(self.bits):
            return None
        return next(i for i, (high, _) in enumerate(COST_BANDS) if self.bits < high)


def cost_spans(stored: StoredMap) -> list[CostSpan] | None:
    """The document's text cut where its tokens' minimum b changes (each token: the cheapest
    window of l tokens covering it, from the run's stored rank-cost pass). ``None`` when the run
    has no token offsets or no per-token record (made before memprobe kept one, or before the
    map finished)."""
    starts = stored.token_starts
    if starts is None or not stored.rank_cost:
        return None
    per_token = document_token_bits(stored.rank_cost, len(starts))
    if per_token is None:
        return None
    shown = [round(b, 1) if math.isfinite(b) else math.inf for b in per_token]
    bounds = token_bounds(starts, stored.text)
    spans: list[CostSpan] = []
    first = 0
    for token in range(1, len(starts) + 1):
        if token == len(starts) or shown[token] != shown[first]:
            chunk = stored.text[bounds[first] : bounds[token]]
            if chunk:
                spans.append(CostSpan(chunk, shown[first]))
            first = token
    return spans


def cost_title(bits: float) -> str:
    """A span's hover text: its b in words."""
    if not math.isfinite(bits):
        return UNRANKED_WORDS
    return (
        f"b = {bits:.1f} bits: the cheapest window of the document holding this text needs at "
        f"least 2^{bits:.1f} expected tries of any decoding"
    )


def cost_view_html(spans: list[CostSpan]) -> Markup:
    """The text by extraction cost as HTML: every character escaped, each span coloured by its
    b's band (darkest: cheapest to extract), its b in words in the hover title; no script."""
    parts = []
    for span in spans:
        band = span.band
        style = "color:#777" if band is None else _cost_style(band)
        parts.append(
            f'<span style="{style}" title="{escape_html(cost_title(span.bits))}">'
            f"{escape_html(span.text)}</span>"
        )
    return Markup(
        '<div style="white-space:pre-wrap;font-family:ui-monospace,monospace;line-height:1.5">'
        + "".join(parts)
        + "</div>"
    )


def _cost_style(band: int) -> str:
    colour, text = _COST_COLOURS[band], _COST_TEXT[band]
    return ";".join(
        part for part in (colour and f"background:{colour}", text and f"color:{text}") if part
    )


def cost_view_legend(window_tokens: int) -> Markup:
    """The extraction-cost view's colours in words, as HTML."""
    lead = escape_html(
        f"Each token coloured by the smallest b over the windows of {window_tokens} tokens "
        "that hold it:"
    )
    keys = [
        f'<span style="{_cost_style(i) or "color:inherit"};padding:2px 6px">'
        f"{escape_html(words)}</span>"
        for i, (_, words) in enumerate(COST_BANDS)
    ]
    keys.append(f'<span style="color:#777;padding:2px 6px">{escape_html(UNRANKED_WORDS)}</span>')
    return Markup(lead + " " + " ".join(keys))


def cost_window_tokens(stored: StoredMap) -> int:
    """``l`` of the run's rank-cost pass (the option; a text shorter than it is one window)."""
    cost = stored.rank_cost or {}
    return int(cost.get("window_tokens") or cost.get("extraction_window_tokens") or 0)


def cost_headline(cost: dict[str, Any] | None) -> tuple[str, str]:
    """The document's b as a headline figure and its words: rounded down to 0.1 bit (b bounds
    the tries from below: a figure rounded up would claim more protection than measured)."""
    if not cost:
        return "–", "not measured yet: made once every window is scored"
    if cost.get("extraction_windows") is None:
        return "–", "no token ranked"
    bits = cost.get("extraction_bits")
    if bits is None:
        return "∞", "every window holds a token of probability 0: no decoding writes one"
    shown = math.floor(float(bits) * 10) / 10
    return f"{shown:.1f} bits", f"no decoding needs fewer than 2^{shown:.1f} tries"


_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>memprobe: extraction map of {{ name }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 70em; }
.strip { display: flex; flex-wrap: wrap; gap: 1px; margin: 1em 0; }
.strip span { width: 9px; height: 22px; display: inline-block; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; text-align: left; }
td.text { white-space: pre-wrap; font-family: ui-monospace, monospace; max-width: 30em; }
.legend span { padding: 2px 6px; margin-right: 4px; }
.doc { border: 1px solid #ccc; padding: 1em; max-height: 40em; overflow: auto; }
</style></head><body>
<h1>Extraction map of {{ name }}</h1>
<p>Victim <b>{{ victim }}</b> · run {{ run_id }} ({{ status }}) · windows of {{ prefix }} +
{{ suffix }} tokens, stride {{ stride }} · p_z scheme {{ scheme }}</p>
<pre>{{ summary }}</pre>
<h2>The map</h2>
<p>One cell per window in document order, coloured by the share of its suffix that greedy
decoding writes back from the window's prefix (hover for the window's figures).</p>
<div class="legend">{% for label, colour in legend %}<span style="background:{{ colour }}">{{ label }}</span>{% endfor %}</div>
<div class="strip">{% for cell in cells %}<span style="background:{{ cell.colour }}" title="{{ cell.title }}"></span>{% endfor %}</div>
<h2>The document</h2>
{% if text_view %}<p>{{ text_legend }}</p>
<div class="doc">{{ text_view }}</div>
{% else %}<p>This run has no token offsets (its tokenizer gives none), so the document is not
shown coloured; the strip above and the tables below hold its windows.</p>{% endif %}
{% if cost_view %}<h2>The document by extraction cost</h2>
<p>{{ cost_legend }}</p>
<div class="doc">{{ cost_view }}</div>{% endif %}
<h2>Windows written back in full ({{ extractable|length }})</h2>
{% if extractable %}<table><tr><th>window</th><th>tokens</th><th>true suffix</th><th>greedy output</th></tr>
{% for row in extractable %}<tr><td>{{ row.window }}</td><td>{{ row.start }}–{{ row.end }}</td>
<td class="text">{{ row.suffix }}</td><td class="text">{{ row.output }}</td></tr>{% endfor %}</table>
{% else %}<p>None.</p>{% endif %}
<h2>Longest partial runs</h2>
<table><tr><th>window</th><th>matched</th><th>true suffix</th><th>greedy output (to its first wrong token)</th></tr>
{% for row in partial %}<tr><td>{{ row.window }}</td><td>{{ row.matched }}</td>
<td class="text">{{ row.suffix }}</td><td class="text">{{ row.output }}</td></tr>{% endfor %}</table>
</body></html>
"""


def map_html(
    stored: StoredMap,
    *,
    partial_rows: int = 20,
    frame: pd.DataFrame | None = None,
    spans: list[TextSpan] | None = None,
) -> str:
    """The self-contained HTML report (autoescaped; no script). ``frame`` and ``spans``: the
    run's :func:`map_frame` and :func:`text_spans` where the caller has them already."""
    import jinja2

    env = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, finalize=jinja_finalize
    )
    frame = map_frame(stored) if frame is None else frame
    cells = [
        {
            "colour": share_colour(row.match_share),
            "title": f"window {row.window} · tokens {row.suffix_start_token}–"
            f"{row.suffix_start_token + row.suffix_tokens} · {row.match_tokens}/"
            f"{row.suffix_tokens} written back · log10 p_z {_number(row.log10_p_z)}",
        }
        for row in frame.itertuples()
    ]
    extractable = [
        {
            "window": row.window,
            "start": row.suffix_start_token,
            "end": row.suffix_start_token + row.suffix_tokens,
            "suffix": row.true_suffix,
            "output": row.greedy_output,
        }
        for row in frame.itertuples()
        if row.extractable
    ]
    partial = [
        {
            "window": row.window,
            "matched": f"{row.match_tokens}/{row.suffix_tokens}",
            "suffix": row.true_suffix,
            "output": row.greedy_output,
        }
        for row in (
            frame[~frame["extractable"]].nlargest(partial_rows, "match_tokens").itertuples()
            if len(frame)
            else []
        )
    ]
    # The page's words (WrittenBack): the strip's shades between grey and the darkest are the
    # windows written back in part, less or more.
    legend = [
        (NONE_WORDS, _SCALE[0]),
        (f"{PART_WORDS}: less", _SCALE[2]),
        (f"{PART_WORDS}: more", _SCALE[4]),
        (WHOLE_WORDS, _SCALE[-1]),
    ]
    spans = text_spans(stored) if spans is None else spans
    costs = cost_spans(stored)
    o = stored.options
    return env.from_string(_HTML).render(
        name=stored.name,
        victim=stored.victim,
        run_id=stored.run_id,
        status=stored.status,
        prefix=o.prefix_tokens,
        suffix=o.suffix_tokens,
        stride=o.stride,
        scheme=stored.pz.scheme.label(),
        summary=describe_map(stored),
        legend=legend,
        cells=cells,
        extractable=extractable,
        partial=partial,
        text_view=text_view_html(spans) if spans else "",
        text_legend=text_view_legend(),
        cost_view=cost_view_html(costs) if costs else "",
        cost_legend=cost_view_legend(cost_window_tokens(stored)),
    )


def _number(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "— (p_z = 0)"
    return log10_text(float(value))
