"""Result views: the candidate table, the output/suffix overlap, PII, safe CSV downloads, a probe.

Text a user or a model wrote is shown only as plain text (``st.dataframe``, ``st.code``) or as
HTML escaped by ``memprobe_core.highlight.escape_html`` (control and bidi characters shown as escapes).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import pandas as pd
import streamlit as st

from memprobe_core.attacks import registry
from memprobe_core.chance import (
    REFERENCE_EXPLANATION,
    ChanceLevel,
    chance_reading,
    reference_chance,
    unit_chance,
)
from memprobe_core.highlight import (
    Overlap,
    escape_html,
    overlap,
    segments_to_html,
    show_controls,
)
from memprobe_core.measuring.bracket import describe_bracket, has_bounds
from memprobe_core.measuring.prior_aware import describe_prior_aware
from memprobe_core.membership.extraction_probability import describe_extraction_probability
from memprobe_core.membership.options import signals_frame
from memprobe_core.pii import pii_statement
from memprobe_core.report.build import report_for_run
from memprobe_core.report.export import to_safe_csv
from memprobe_core.report.html import render_html
from ui_common import charts, tables
from ui_common.page import md


def candidates_table(frame: pd.DataFrame, *, key: str | None = None, height: int = 320) -> None:
    """The candidate table (text shown as text), the overall best row highlighted."""
    if frame.empty:
        st.info("No candidate scored yet.")
        return
    columns = [
        c
        for c in (
            "method",
            "round",
            "index",
            "prompt",
            "mem",
            "lcs_p",
            "objective",
            "flags",
            "is_best",
            "output",
        )
        if c in frame
    ]
    view, config = tables.for_people(frame[columns], keep=("prompt", "output"))
    best = tables.column_label("is_best")

    def highlight(row: pd.Series) -> list[str]:
        on = row.get(best) == tables.BEST_MARK
        style = "background-color: #fff3b0; font-weight: 600" if on else ""
        return [style] * len(row)

    st.dataframe(
        view.style.apply(highlight, axis=1).format(precision=3, na_rep=tables.MISSING),
        hide_index=True,
        width="stretch",
        height=min(height, 40 + 35 * len(view)),
        key=key,
        column_config=config,
    )
    tables.full_text_caption(config)


_BOX = (
    "border:1px solid #ddd;border-radius:6px;padding:8px 10px;white-space:pre-wrap;"
    "font-family:ui-monospace,Menlo,monospace;font-size:0.85rem;line-height:1.45;"
    "max-height:320px;overflow-y:auto"
)


def overlap_view(
    output: str,
    suffix: str,
    scoring: Any = None,
    *,
    suffix_tokens: int | None = None,
    tokenizer: Any = None,
    title: str = "victim output",
) -> None:
    """The output and the true suffix side by side, the common subsequence highlighted."""

    ov = overlap(output, suffix, scoring, suffix_tokens=suffix_tokens, tokenizer=tokenizer)
    side = getattr(scoring, "output_window", "first")
    st.caption(overlap_caption(ov, suffix_tokens, tokenizer, side=side))
    left, right = st.columns(2)
    rest = ""
    if ov.output_rest:
        rest = f'<span style="color:#999">{escape_html(ov.output_rest)}</span>'
    with left:
        st.html(
            f"<div><b>{escape_html(title)}</b></div>"
            f'<div style="{_BOX}">{segments_to_html(ov.output_segments)}{rest}</div>'
        )
    with right:
        st.html(
            f"<div><b>true suffix</b></div>"
            f'<div style="{_BOX}">{segments_to_html(ov.suffix_segments)}</div>'
        )


# ROUGE-L counts words (its tokenizer's, stemmed by default), not the victim's tokens.
ROUGE_UNIT = "ROUGE words"


def overlap_caption(
    ov: Overlap, window: int | None = None, tokenizer: Any = None, *, side: str = "first"
) -> str:
    """What the overlap view highlights, each count in one named unit: the common subsequence
    and the suffix in ROUGE words (what Mem counts), the output's scored window in victim tokens
    (whitespace words without the victim's tokenizer)."""
    line = (
        f"Highlighted: the longest common subsequence, {ov.lcs_tokens} of the true suffix's "
        f"{plural(ov.suffix_tokens, ROUGE_UNIT)} (recall {ov.recall:.3f}). ROUGE words: the "
        "words Mem counts, as the scoring's tokenizer and stemmer cut them."
    )
    if window is not None:
        unit = "victim tokens" if tokenizer is not None else "words"
        line += f" Mem scores the output's {side} {plural(window, unit)} (the suffix's length)"
        line += "; the text after them is dimmed." if ov.output_rest else "."
    return line


def prompt_code(text: Any) -> None:
    """Text a user or a model wrote (a prompt, an output) as a code block: shown as typed, each
    non-printable character as its escape (``\\u200b``, ``\\x00``), never as Markdown."""
    st.code(show_controls(str(text)), language=None, wrap_lines=True)


def pii_view(pii: dict[str, Any] | None) -> None:
    """PII found in the true suffix, copied into the output, and invented by it: one line stating
    all three (each "none" when it has no item), then the items, if any."""
    statement = pii_statement(pii)
    if statement is None:
        st.caption("No PII report for this result.")
        return
    st.markdown(md(statement))
    rows = []
    for what in ("truth", "copied", "invented"):
        by_kind = (pii or {}).get(what) or {}
        for kind, values in by_kind.items():
            for value in values:
                rows.append(
                    {
                        "where": {"truth": "in the true suffix"}.get(what, what),
                        "kind": str(kind),
                        "text": str(value),
                    }
                )
    if rows:
        tables.show(pd.DataFrame(rows))


def csv_download(label: str, frame: pd.DataFrame, file_name: str, key: str) -> None:
    """A download button for a frame as safe CSV (formula-injection-proof)."""
    data = to_safe_csv(frame)
    st.download_button(label, data=data, file_name=file_name, mime="text/csv", key=key)


def html_report_download(store: Any, run_id: int, report: Any = None, *, key: str) -> None:
    """A "Download HTML report" button: the run's self-contained report, built on click.

    Args:
        store / run_id: the run.
        report: the ``Report`` the page already shows (its Mem selection kept); ``None`` builds
            the default one.
        key: the widget key.
    """

    def build() -> str:
        # Runs on Streamlit's download thread when clicked, not on every redraw: the file holds
        # plotly.js (a few MB).

        shown = report if report is not None else report_for_run(store, run_id)
        return render_html(shown, store, run_id)

    st.download_button(
        "Download HTML report",
        data=build,
        file_name=f"memprobe-run{run_id}-report.html",
        mime="text/html",
        key=key,
        on_click="ignore",
        help="One self-contained file: tables, charts, manifest, prompts and outputs; it opens "
        "offline and loads nothing from the network.",
    )


def cached_figure(name: str, version: Hashable, build: Callable[[], Any]) -> Any:
    """The figure (or other costly value) ``build()`` makes, built once per ``version`` in this
    browser session.

    Why: a live page is redrawn for every scored candidate, and a plotly express scatter costs
    0.1-0.3 s of GIL-holding Python on a CPU; charts that change per round are built per round,
    and Mem's chance level once per output scored against its reference suffixes.
    """
    slot = f"_figure_{name}"
    cached = st.session_state.get(slot)
    if cached is None or cached[0] != version:
        cached = (version, build())
        st.session_state[slot] = cached
    return cached[1]


def probe_view(
    frame: pd.DataFrame,
    split_info: dict[str, Any],
    result: Any = None,
    *,
    charts_before_round: int | None = None,
    stored_chance: ChanceLevel | None = None,
) -> None:
    """A probe's candidates (live or replayed): table, scatter, best by round, best prompt, overlap.

    Args:
        frame: ``ui_common.charts.candidate_rows`` of the candidates so far.
        split_info: ``suffix``, ``suffix_tokens``, ``scoring`` and ``tokenizer`` of the split
            (the overlap view is skipped without a suffix).
        result: the final ``AttackResult`` (its PII report is shown), if any.
        charts_before_round: live runs: chart only the rounds before this one (the finished
            ones), so the charts are rebuilt once per round while the table grows per candidate.
            ``None`` charts every row.
        stored_chance: the unit's stored chance control (:func:`memprobe_core.chance.unit_chance`,
            what its report reads), shown while the best candidate is the unit's result.
    """

    candidates_table(frame)
    if frame.empty:
        return
    _probe_charts(frame, split_info, charts_before_round)
    best = charts.best_candidate(frame)
    if best is None:
        return
    st.subheader("Best prompt so far")
    st.caption(
        f"round {best['round']}, candidate {best['index']}: Mem {best['mem']:.3f}, "
        f"LCS_P {best['lcs_p']:.3f}, O {best['objective']:.3f}"
    )
    prompt_code(best["prompt"])
    chance_caption(probe_chance(best, result, split_info, stored_chance), split_info)
    if result is not None and any(k.startswith("pam_") for k in _field(result, "verbatim") or {}):
        st.caption(md(describe_prior_aware(_field(result, "verbatim"))))
    if split_info.get("suffix") is not None:
        st.subheader("Victim output against the true suffix")
        overlap_view(
            best["output"],
            split_info["suffix"],
            split_info.get("scoring"),
            suffix_tokens=split_info.get("suffix_tokens"),
            tokenizer=_tokenizer_or_none(split_info.get("tokenizer")),
        )
    if result is not None:
        st.subheader("PII")
        pii_view(_field(result, "pii"))
        measures_view(result)


# Words of the prefix's end and the suffix's start shown around the cut.
CUT_CONTEXT_WORDS = 8


def split_caption(split_info: dict[str, Any]) -> None:
    """Where the prefix/suffix cut falls: token counts and the words either side of it."""
    prefix, suffix = split_info.get("prefix"), split_info.get("suffix")
    if prefix is None or suffix is None:
        return
    tokens = split_info.get("prefix_tokens"), split_info.get("suffix_tokens")
    unit = "words" if split_info.get("tokenizer_name") == "whitespace" else "victim tokens"
    counts = (
        f"prefix {plural(tokens[0], unit)} | suffix {plural(tokens[1], unit)}"
        if None not in tokens
        else "prefix | suffix"
    )
    before = " ".join(str(prefix).split()[-CUT_CONTEXT_WORDS:])
    after = " ".join(str(suffix).split()[:CUT_CONTEXT_WORDS])
    st.caption(md(f"Cut: {counts}. The victim gets the prefix; Mem is scored on the suffix."))
    prompt_code(f"… {before} ‖ {after} …")


def plural(count: Any, unit: str) -> str:
    """``"1 token"``, ``"3 tokens"``: ``unit`` is given in the plural."""
    singular = unit[:-1] if unit.endswith("s") else unit
    return f"{count} {singular if count == 1 else unit}"


def _field(result: Any, name: str) -> Any:
    """``result.name`` of an ``AttackResult`` or ``result[name]`` of its dict form."""
    return result.get(name) if isinstance(result, dict) else getattr(result, name, None)


def verbatim_caption(verbatim: dict[str, Any] | None) -> str:
    """One line on verbatim extraction: k-extractable or not, longest verbatim span."""
    if not verbatim:
        return "Verbatim extraction: not measured."
    k = verbatim.get("extract_k")
    verdict = "yes" if verbatim.get("extractable") else "no"
    first = "k victim tokens" if k is None else plural(k, "victim tokens")
    line = f"Verbatim extraction: the suffix's first {first} reproduced exactly: **{verdict}**"
    span, chars = verbatim.get("span_tokens"), verbatim.get("span_chars")
    if span is not None:
        line += f"; longest verbatim span {plural(span, 'victim tokens')}"
        if chars is not None:
            line += f" ({plural(chars, 'characters')})"
    return line + "."


def pz_caption(verbatim: dict[str, Any] | None) -> str:
    """One line on probabilistic extraction: p_z under its scheme and the samples n at p."""
    return describe_extraction_probability(verbatim)


def pz_view(verbatim: dict[str, Any] | None, *, key: str = "pz") -> None:
    """The caption, the bracket around p_z in words and the (n, p) curve of a result's
    probabilistic extraction (the caption's text is ours and the scheme's label; the server's
    reason is shown as plain text)."""
    caption = pz_caption(verbatim)
    measured = not (verbatim and "pz_not_measured" in verbatim)
    if measured:
        st.markdown(caption)
    else:
        st.text(show_controls(caption))
    if verbatim and has_bounds(verbatim):
        # The bounds around p_z in words (docs/method.md §14, §21, §22), wherever p_z is shown;
        # a server's reason for a side not measured is its text: shown as plain text.
        st.text(show_controls(describe_bracket(verbatim)))
    if not measured:
        return
    fig = charts.extraction_curve(verbatim or {})
    if fig is not None:
        st.plotly_chart(fig, width="stretch", key=key)


def method_measures_view(verbatim: dict[str, Any] | None) -> None:
    """What a method measured itself beside its answer (``MethodSpec.describe``), as plain
    text."""
    for line in registry.describe_result(verbatim):
        st.text(line)


def measures_view(result: Any) -> None:
    """A result's verbatim-extraction metrics and its snippet's membership signals."""
    st.subheader("Verbatim extraction and membership signals")
    st.markdown(verbatim_caption(_field(result, "verbatim")))
    method_measures_view(_field(result, "verbatim"))
    pz_view(_field(result, "verbatim"))
    signals_view(_field(result, "membership"))


# One snippet's signal values have no reference point of their own: what they are read against.
_MEMBER_IF = {"higher": "higher than a non-member's", "lower": "lower than a non-member's"}
SIGNAL_REFERENCE = (
    "No reference point here: one text's value cannot say member or not by itself (a loss of "
    "2.3 is low for one model and high for another). It is read against the values texts the "
    "victim never saw get on the same victim: a labelled audit (Audit page, with generated "
    "non-members) measures them and gives each signal's AUROC (0.5: no better than chance)."
)


def signals_view(membership: dict[str, Any] | None) -> None:
    """The membership signals of one snippet on the victim (a table; text shown as text)."""
    frame = signals_frame(membership)
    if frame.empty:
        st.caption(
            "No membership signals: they need a white-box victim (local weights) or a server "
            "that returns a prompt's log-probs (/completions with echo), and are skipped with "
            "--no-signals."
        )
        return
    if (membership or {}).get("scored_by") == "server":
        st.caption(
            "Scored by the victim's server (the log-probs it returns for the snippet's tokens); "
            "Min-K%++ needs the whole next-token distribution and is not measured."
        )
    tables.show(
        frame.assign(**{"member if": frame["member if"].map(_MEMBER_IF).fillna("")}),
        digits={"value": 4},
        labels={"member if": "a member's value is"},
        tips={"member if": SIGNAL_REFERENCE},
    )
    if frame["value"].notna().any():
        st.caption(SIGNAL_REFERENCE)


def output_chance(
    output: str, mem: float, split_info: dict[str, Any], prompt: str = ""
) -> ChanceLevel | None:
    """The chance control of one output against the run's reference suffixes (``None`` when the
    view has no reference pool, e.g. a replayed run); the words of ``prompt``, the prompt that
    produced it, are not credited (:mod:`memprobe_core.chance`)."""
    pool, scoring = split_info.get("reference"), split_info.get("scoring")
    if not pool or scoring is None:
        return None
    suffix = split_info.get("suffix")
    own = None if suffix is None else (str(suffix), split_info.get("suffix_tokens"))
    return reference_chance(
        output,
        mem,
        pool,
        scoring,
        _tokenizer_or_none(split_info.get("tokenizer")),
        prompt=prompt if own is not None else "",
        suffix=own,
        source=split_info.get("reference_source"),
    )


def best_output_chance(best: Any, split_info: dict[str, Any]) -> ChanceLevel | None:
    """:func:`output_chance` of a probe's best candidate, computed once per best output in this
    browser session (the live page redraws for every scored candidate)."""
    prompt = str(best.get("prompt") or "")
    version = (split_info.get("run_id"), best["output"], float(best["mem"]), prompt)
    return cached_figure(
        "probe_chance",
        version,
        lambda: output_chance(best["output"], best["mem"], split_info, prompt),
    )


def stored_unit_chance(store: Any, run_id: int | None, result: Any) -> ChanceLevel | None:
    """The stored chance control of a probe's unit (its run's results frame, as the report reads
    it; ``None`` without a store, a run or a finished result)."""
    if store is None or run_id is None or result is None:
        return None
    return unit_chance(
        store.results_frame(run_id),
        str(_field(result, "snippet_id")),
        str(_field(result, "method")),
        int(_field(result, "length")),
    )


def probe_chance(
    best: Any, result: Any, split_info: dict[str, Any], stored: ChanceLevel | None
) -> ChanceLevel | None:
    """The chance control shown beside a probe's best prompt: the unit's stored one when the
    best shown is the unit's result (the report reads the same fields: one verdict for one run),
    else the same rule applied on the page to the output shown (a round still running, an
    earlier round of a replay)."""
    if (
        stored is not None
        and result is not None
        and _field(result, "output") == best["output"]
        and _field(result, "prompt") == best["prompt"]
    ):
        return stored
    return best_output_chance(best, split_info)


def chance_caption(level: ChanceLevel | None, split_info: dict[str, Any]) -> None:
    """One line: the output's chance level and whether its Mem is above it
    (:func:`memprobe_core.chance.chance_reading`, the report's words)."""
    if level is None:
        return
    st.caption(md(f"{chance_reading(level)} {REFERENCE_EXPLANATION}."))


def _probe_charts(frame: pd.DataFrame, split_info: dict[str, Any], before: int | None) -> None:

    def scatter(rows: pd.DataFrame) -> Any:
        # Only when the figure is (re)built: a live page reuses it between rounds.
        best = charts.best_candidate(rows)
        chance = None if best is None else best_output_chance(best, split_info)
        return charts.mem_lcs_scatter(rows, chance_level=None if chance is None else chance.level)

    rounds = charts.best_by_round_figure
    if before is None:  # a finished or replayed run: drawn once, nothing to cache
        figures = scatter(frame), rounds(frame)
    else:
        frame = frame[frame["round"] < before]
        if frame.empty:
            st.caption("The charts appear when the first round is scored.")
            return
        version = (split_info.get("run_id"), before, len(frame))
        figures = (
            cached_figure("probe_scatter", version, lambda: scatter(frame)),
            cached_figure("probe_rounds", version, lambda: rounds(frame)),
        )
    for column, figure in zip(st.columns(2), figures):
        with column:
            st.plotly_chart(figure, width="stretch")


def _tokenizer_or_none(tok: Any) -> Any:
    # A replayed run has only the tokenizer's name; the scored window then counts words.
    return None if tok is None or isinstance(tok, str) else tok
