"""A continuation run as people read it: a few lines, one row per turn (CSV), JSON, and a
self-contained HTML report with every turn (refusals marked) and nv-recall's blocks side by side.

Texts from the document and the model are escaped wherever shown (in HTML by
:func:`memprobe_core.highlight.escape_html`, control and bidi characters shown as escapes; the
CSV through the report's formula-safe writer).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from memprobe_core.documents.continuation import STOP_REASON_WORDS, Turn, split_document
from memprobe_core.documents.continuation_run import StoredContinuation, turn_id
from memprobe_core.documents.nv_recall import normalise
from memprobe_core.highlight import jinja_finalize
from memprobe_core.models.endpoints import describe_endpoint


def turns_frame(stored: StoredContinuation) -> pd.DataFrame:
    """One row per turn, in order."""
    return pd.DataFrame(
        [
            {
                "turn": turn_id(t.index),
                "phase": t.phase,
                "attempt": t.attempt,
                "perturbations": " + ".join(t.perturbations),
                "context": t.context,
                "refused": t.refused,
                "success": t.success,
                "verbatim_words": t.verbatim_words,
                "stop_reason": t.stop_reason or "",
                "tokens": t.tokens,
                "seconds": t.seconds,
                "request": t.request_text,
                "output": t.output,
            }
            for t in stored.turns
        ]
    )


def continuation_json(stored: StoredContinuation) -> dict[str, Any]:
    """The run's figures (``memprobe document --mode continue --json``)."""
    return {
        "run_id": stored.run_id,
        "status": stored.status,
        "document": stored.name,
        "victim": stored.victim,
        "stop_reason": stored.stop_reason,
        "turns": len(stored.turns),
        "phase1_attempts": sum(1 for t in stored.turns if t.phase == 1),
        "phase1_passed": any(t.phase == 1 and t.success for t in stored.turns),
        "refusals": sum(1 for t in stored.turns if t.refused),
        "queries": stored.queries,
        "generated_tokens": stored.generated_tokens,
        "seconds": stored.seconds,
        **stored.score.to_dict(),
    }


def describe_continuation(stored: StoredContinuation) -> str:
    """A few lines for people."""
    s = stored.score
    phase1 = [t for t in stored.turns if t.phase == 1]
    passed = any(t.success for t in phase1)
    reason = stored.stop_reason
    lines = [
        f"continuation of {stored.name} on {stored.victim} (run {stored.run_id}, {stored.status})",
        f"phase 1: {'passed' if passed else 'not passed'} after {len(phase1)} attempt(s); "
        f"phase 2: {len(stored.turns) - len(phase1)} turn(s); "
        f"{sum(1 for t in stored.turns if t.refused)} refusal(s)",
        f"nv-recall {s.nv_recall:.4f}: {s.matched_words:,} of {s.reference_words:,} document "
        f"words in {len(s.blocks):,} block(s), the longest {s.longest_block:,} words; "
        f"{s.generated_words:,} generated words scored"
        # Only a passing phase-1 answer and the phase-2 turns make the scored text.
        + ("" if passed or not phase1 else " (a phase-1 answer that did not pass is not scored)"),
        f"cost: {stored.queries:,} quer{'y' if stored.queries == 1 else 'ies'}, "
        f"{stored.generated_tokens:,} tokens, "
        f"{stored.seconds:.1f} s",
    ]
    if reason:
        lines.insert(1, f"stopped: {STOP_REASON_WORDS.get(reason, reason)} ({reason})")
    if stored.endpoint:
        lines.insert(1, f"sent to {describe_endpoint(stored.endpoint)}")
    return "\n".join(lines)


def block_texts(stored: StoredContinuation, limit: int = 20) -> list[dict[str, Any]]:
    """nv-recall's longest blocks, each with its words in the document and in the output
    (normalised, as nv-recall compares them)."""
    ref = normalise(stored.text).split()
    gen = normalise(stored.generated_text).split()
    blocks = sorted(stored.score.blocks, key=lambda b: -b.matched)[:limit]
    return [
        {
            "ref_range": f"{b.ref_start}–{b.ref_end}",
            "gen_range": f"{b.gen_start}–{b.gen_end}",
            "matched": b.matched,
            "reference": " ".join(ref[b.ref_start : b.ref_end]),
            "generated": " ".join(gen[b.gen_start : b.gen_end]),
        }
        for b in blocks
    ]


# A phase-2 answer is set beside the document's passage holding its longest verbatim run when
# that run holds at least this many words (fewer: a chance match of common words).
PASSAGE_MIN_WORDS = 5


@dataclass(frozen=True)
class Expected:
    """The document's words an answer is read against: ``label`` says which, ``text`` is them
    (the document's own text, its line breaks kept)."""

    label: str
    text: str


def expected_text(stored: StoredContinuation, turn: Turn) -> Expected | None:
    """What ``turn``'s answer should reproduce. Phase 1: the held-back words (the words after the
    opening, which the attempt passes on). Phase 2: the document's passage where the answer's
    longest verbatim run of words lies, as long as the answer (``None`` when no run of
    :data:`PASSAGE_MIN_WORDS` words is in the document)."""
    if turn.phase == 1:
        o = stored.options
        _, heldback = split_document(stored.text, o)
        first = o.opening_words
        return Expected(
            f"held-back words {first + 1:,}–{first + o.heldback_words:,} of the document "
            "(what phase 1 must reproduce)",
            heldback,
        )
    spans = [m.span() for m in re.finditer(r"\S+", stored.text)]
    document = [_word_key(stored.text[a:b]) for a, b in spans]
    answer = [_word_key(w) for w in turn.output.split()]
    matcher = difflib.SequenceMatcher(None, answer, document, autojunk=False)
    run = matcher.find_longest_match(0, len(answer), 0, len(document))
    if run.size < PASSAGE_MIN_WORDS or not answer:
        return None
    start = max(0, run.b - run.a)
    end = min(len(spans), start + len(answer))
    return Expected(
        f"document words {start + 1:,}–{end:,} (where the answer's longest verbatim run, "
        f"{run.size:,} words, lies)",
        stored.text[spans[start][0] : spans[end - 1][1]],
    )


def _word_key(word: str) -> str:
    """A whitespace word as nv-recall compares it (normalised), kept one word."""
    return "".join(normalise(word).split())


_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>memprobe: continuation of {{ name }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 70em; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; text-align: left; }
td.text { white-space: pre-wrap; font-family: ui-monospace, monospace; max-width: 34em; }
tr.refused { background: #fde0dc; } tr.success { background: #e3f2e1; }
</style></head><body>
<h1>Continuation of {{ name }}</h1>
<p>Victim <b>{{ victim }}</b> · run {{ run_id }} ({{ status }})</p>
<pre>{{ summary }}</pre>
<h2>Turns</h2>
<p>Green: phase 1 passed, or the turn added a verbatim block; red: a refusal.</p>
<table><tr><th>turn</th><th>phase</th><th>attempt</th><th>perturbations</th><th>context</th>
<th>verbatim words</th><th>tokens</th><th>stop</th><th>output</th></tr>
{% for t in turns %}<tr class="{{ 'refused' if t.refused else ('success' if t.success else '') }}">
<td>{{ t.turn }}</td><td>{{ t.phase }}</td><td>{{ t.attempt }}</td><td>{{ t.perturbations }}</td>
<td>{{ t.context }}</td><td>{{ t.verbatim_words }}</td><td>{{ t.tokens }}</td>
<td>{{ t.stop_reason }}</td><td class="text">{{ t.output }}</td></tr>{% endfor %}</table>
<h2>nv-recall blocks (longest first)</h2>
{% if blocks %}<table><tr><th>words matched</th><th>document words</th><th>document</th>
<th>output words</th><th>output</th></tr>
{% for b in blocks %}<tr><td>{{ b.matched }}</td><td>{{ b.ref_range }}</td>
<td class="text">{{ b.reference }}</td><td>{{ b.gen_range }}</td>
<td class="text">{{ b.generated }}</td></tr>{% endfor %}</table>
{% else %}<p>No block of 100 matched words or more.</p>{% endif %}
</body></html>
"""


def continuation_html(stored: StoredContinuation) -> str:
    """The self-contained HTML report (autoescaped; no script)."""
    import jinja2

    env = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, finalize=jinja_finalize
    )
    return env.from_string(_HTML).render(
        name=stored.name,
        victim=stored.victim,
        run_id=stored.run_id,
        status=stored.status,
        summary=describe_continuation(stored),
        turns=turns_frame(stored).to_dict("records"),
        blocks=block_texts(stored),
    )
