"""An extraction map as people read it: a few lines of text, a per-window table (CSV), JSON, and
a self-contained HTML report whose strip shows the document window by window.

Every text from the document or the model is escaped where it is shown (in HTML by
:func:`memprobe_core.highlight.escape_html`, control and bidi characters shown as escapes; the CSV through :func:`memprobe_core.report.export.to_safe_csv`, formula-safe).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
from markupsafe import Markup

from memprobe_core.documents.map_run import StoredMap
from memprobe_core.highlight import escape_html, jinja_finalize
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
    # A token runs from its start to the next token's start, so the spans tile the text;
    # the running maximum keeps a tokenizer's overlapping offsets from cutting backwards.
    bounds = [0]
    for start in starts[1:]:
        bounds.append(max(bounds[-1], min(start, len(text))))
    bounds.append(len(text))
    spans: list[TextSpan] = []
    first = 0
    for token in range(1, len(starts) + 1):
        if token == len(starts) or (level[token], owner[token]) != (level[first], owner[first]):
            chunk = text[bounds[first] : bounds[token]]
            if chunk:
                spans.append(TextSpan(chunk, TEXT_STATES[level[first]], owner[first]))
            first = token
    return spans


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
    }


def log10_text(value: float) -> str:
    """A log10 p_z as shown everywhere: two decimals (a well-known window is about -0.01,
    which one decimal showed as "-0.0"), and never a negative zero."""
    return f"{round(value, 2) + 0.0:.2f}"


def describe_map(stored: StoredMap) -> str:
    """A few lines for people."""
    s = stored.summary
    o = stored.options
    lines = [
        f"extraction map of {stored.name} on {stored.victim} (run {stored.run_id}, "
        f"{stored.status}): {s.windows:,} of {stored.windows_total:,} windows of "
        f"{o.prefix_tokens} + {o.suffix_tokens} tokens, stride {o.stride}",
        f"extractable windows: {s.extractable:,} ({s.extractable_share:.1%}); document tokens "
        f"written back greedily: {s.extracted_tokens:,} of {s.document_tokens:,} "
        f"({s.extracted_share:.1%}); longest extracted stretch {s.longest_stretch:,} tokens",
        f"mean share of a window's suffix reproduced from its start: {s.mean_match_share:.1%}",
    ]
    if stored.endpoint:
        lines.insert(1, f"sent to {describe_endpoint(stored.endpoint)}")
    scheme = stored.pz.scheme.label()
    if s.log10_p_z_quantiles is None:
        lines.append(f"p_z ({scheme}): 0 for every window (a suffix token the scheme never draws)")
    else:
        low, mid, high = s.log10_p_z_quantiles
        lines.append(
            f"log10 p_z ({scheme}) over the {1 - s.pz_zero_share:.0%} of windows with p_z > 0: "
            f"median {log10_text(mid)} (10th–90th percentile {log10_text(low)} … "
            f"{log10_text(high)}); "
            f"{s.pz_zero_share:.0%} of windows have p_z = 0"
        )
    if stored.errors:
        lines.append(f"{stored.errors} window(s) failed; `memprobe runs {stored.run_id}` shows why")
    return "\n".join(lines)


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
    legend = [("none", _SCALE[0]), ("some", _SCALE[2]), ("most", _SCALE[4]), ("all", _SCALE[-1])]
    spans = text_spans(stored) if spans is None else spans
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
    )


def _number(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "— (p_z = 0)"
    return log10_text(float(value))
