"""Every dashboard table made for people: one formatting layer between a frame and ``st.dataframe``.

:func:`for_people` turns a frame of stored or computed fields into what a reader sees:

- column labels instead of field names (:data:`COLUMN_LABELS`, the one map; method names through
  :func:`memprobe_core.attacks.registry.method_label`; membership signals through their
  ``SignalSpec.label``; any other ``snake_case`` name loses its underscores);
- a ``method`` / ``score`` column shown by its label (``method_label`` / ``score_label``);
- an interval triple ``x``, ``x_lo``, ``x_hi`` (or ``mean_diff``, ``lo``, ``hi``) as one text
  column ``0.036 [0.000, 0.071]``, in the terminal and HTML reports' format
  (:mod:`memprobe_core.report.formatting`); ``n`` with ``small_n`` as ``7†``;
- columns empty in every row left out; a missing value shown as ``–``, never ``None``;
- booleans as ``yes`` / ``no`` (the best-candidate flag as ``★ best``), not checkboxes;
- flags and other terms explained in the column's tooltip (``help``);
- text shown with its non-printable characters as escapes (``\\u200b``), long text in a column
  narrow enough for the table to fit the page (the whole text is a double-click away).

:func:`show` draws the result with ``st.dataframe``. Numbers stay numbers (sortable) when every
row has one; a number column with a gap becomes text so the gap reads ``–``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np
import pandas as pd
import streamlit as st

from memprobe_core.attacks.registry import figures, method_label
from memprobe_core.attacks.result import CANDIDATE_FLAG_MEANINGS
from memprobe_core.highlight import show_controls
from memprobe_core.membership.options import SIGNAL_BY_NAME
from memprobe_core.report.formatting import MISSING, SMALL_N_MARK, n_mark, signed_ci, with_ci
from memprobe_core.stats import SMALL_N

__all__ = [
    "BEST_MARK",
    "COLUMN_HELP",
    "COLUMN_LABELS",
    "DIGITS",
    "FULL_TEXT_HINT",
    "MISSING",
    "PAGE_WIDTH_PX",
    "column_label",
    "column_px",
    "fit_columns",
    "for_people",
    "full_text_caption",
    "show",
]

BEST_MARK = "★ best"
FULL_TEXT_HINT = (
    "Long texts are cut to fit the page: double-click a cell to read all of it, or drag the "
    "column's edge to widen it."
)
# The label every interval column gets after its measure's label (the reports' wording).
CI_SUFFIX = " [95 % CI]"

# Field name -> what a table calls it: the one map for every dashboard table.
COLUMN_LABELS: dict[str, str] = {
    # scores (docs/method.md §2)
    "mem": "Mem",
    "lcs_p": "LCS_P",
    "dis": "Dis",
    "objective": "objective O",
    "mem_init": "Mem of the initial prompt",
    "mem_best": "highest Mem",
    "mem_reference": "Mem (reference code)",
    # candidates
    "index": "candidate",
    "output": "victim output",
    "is_best": "best",
    "is_round_best": "round best",
    # verbatim extraction and p_z (§9, §14)
    "extractable": "k-extractable",
    "extract_k": "k (victim tokens)",
    "match_tokens": "greedy match (victim tokens)",
    "span_tokens": "longest verbatim span (victim tokens)",
    "span_chars": "longest verbatim span (characters)",
    "log10_p_z": "log10 p_z",
    "pz_zero": "share with p_z = 0",
    "log10_n_at_p": "log10 samples for p",
    # the rank-based extraction cost (§21): a unit's b, a Table 1 cell's median and least
    "extraction_bits": "extraction cost (bits)",
    "extraction_bits_min": "extraction cost (bits), least protected unit",
    "extraction_bits_units": "units with an extraction cost",
    "extraction_not_measured": "extraction cost not measured",
    "extraction_window_tokens": "extraction cost window (tokens)",
    # the prior-aware check (§24): a unit's verdict, a Table 1 cell's verdicts in words
    "pam": "prior-aware check (units)",
    "pam_verdict": "prior-aware check",
    "pam_log_ratio": "prior-aware log10 ratio",
    "pam_p": "prior-aware p",
    "pam_own_token_p": "token p after own prefix",
    "pam_prior_token_p": "token p after unrelated prefixes",
    "pam_prefixes": "unrelated prefixes",
    "pam_source": "unrelated prefixes from",
    "pam_not_measured": "prior-aware check not measured",
    # each method's own figures (MethodSpec.figures)
    **{figure.name: figure.label for figure in figures()},
    # Mem's chance level
    "chance_units": "units with a chance level",
    "mem_chance": "chance level of Mem",
    "mem_above_chance": "Mem above chance",
    "beats_chance": "share beating chance",
    "chance_n": "other suffixes",
    "chance_mean": "chance mean",
    "chance_p": "chance p",
    "chance_note": "chance note",
    # costs
    "victim_queries": "victim queries",
    "attacker_queries": "attacker queries",
    "generated_tokens": "generated tokens",
    "seconds": "time (s)",
    "queries_per_unit": "queries per unit",
    "tokens_per_unit": "tokens per unit",
    "seconds_per_unit": "time per unit (s)",
    # PII
    "pii_copied": "PII copied",
    "pii_invented": "PII invented",
    "truth": "PII in the suffix",
    "copied": "PII copied",
    "invented": "PII invented",
    "copied_share": "share of the suffix's PII copied",
    # Table 1, paired gains
    "method_label": "method",
    "small_n": f"n < {SMALL_N}",
    "baseline": "over",
    "n_pairs": "pairs",
    "mean_diff": "Δ",
    "p_value": "p",
    "p_holm": "p Holm",
    "wins": "wins",
    "ties": "ties",
    "losses": "losses",
    # membership
    "score_label": "score",
    "n_members": "members",
    "n_nonmembers": "non-members",
    "auroc": "AUROC",
    "tpr_at_1": "TPR @ 1 % FPR",
    "tpr_at_01": "TPR @ 0.1 % FPR",
    "voided_by": "voided by",
    # units, runs, snippets
    "snippet_id": "snippet",
    "units_done": "units done",
    "units_error": "units failed",
    "units_total": "units",
    # NER
    "m_mem": "M-MEM",
    "mean_conf_in": "mean confidence, in-train names",
    "mean_conf_out": "mean confidence, out-of-train names",
    "gap": "confidence gap",
    "prompt_id": "prompt id",
    "type": "prompt type",
}

_FLAGS_HELP = "A candidate kept in the trace but worth a look: " + "; ".join(
    f"{flag}: {meaning}" for flag, meaning in CANDIDATE_FLAG_MEANINGS.items()
)

_CHANCE_HELP = (
    "Mem that unrelated text reaches against this suffix: the output scored against the run's "
    "other suffixes of its domain and length (95th percentile); empty with too few of them."
)

_BITS_HELP = (
    "b of (l, b)-inextractability (Liu, Evans & Xiong 2026; docs/method.md §21): no decoding "
    "needs fewer than 2^b expected tries to write the suffix's cheapest window of l tokens "
    "(b = 12: no decoding needs fewer than 2^12 tries). Table 1: the median over the cell's "
    "units. – where not measured: a black-box victim's server returns log-probs, not ranks."
)

# Field name -> the column's tooltip.
COLUMN_HELP: dict[str, str] = {
    "mem": "ROUGE-L recall of the true suffix by the victim's output (0-1): how much came back.",
    "lcs_p": "ROUGE-L of the prompt against the true suffix (0-1): how much the prompt gave away.",
    "dis": "How far the chosen prompt moved from the initial one (0-1, character edit distance).",
    "objective": "O = α·Mem − (1−α)·LCS_P: what the search maximizes.",
    "flags": _FLAGS_HELP,
    "is_best": "The candidate with the highest objective O over the whole run (the first on "
    "ties; empty candidates are never chosen).",
    "is_round_best": "The candidate with the highest objective O of its round.",
    "index": "The candidate's number within its round (round 0 is the initial prompt).",
    "extractable": "Whether the output's first k victim tokens equal the suffix's first k.",
    "span_tokens": "Longest run of victim tokens the output and the true suffix share.",
    "match_tokens": "Suffix tokens the output reproduces from its first token on.",
    "n": f"Snippets behind the mean; {SMALL_N_MARK} marks n < {SMALL_N}: too few for a "
    "reliable interval.",
    "small_n": f"Fewer than {SMALL_N} values: too few for a reliable interval.",
    "seconds": "Wall-clock seconds the method ran.",
    "victim_queries": "Generations asked of the victim model.",
    "attacker_queries": "Generations asked of the attacker model.",
    "generated_tokens": "Tokens the models generated.",
    "mem_chance": _CHANCE_HELP,
    "chance level": _CHANCE_HELP,
    "above chance": "Whether Mem beats its chance level (undefined without one).",
    "voided_by": "The validity control that voids this row's figures, if any.",
    "extraction_bits": _BITS_HELP,
    "extraction_bits_min": _BITS_HELP + " Here: the least b over the cell's units, the snippet "
    "that is cheapest to extract.",
    "length": "Snippet length in victim tokens (prefix and suffix together).",
    "attempts": "How many times the unit was started (a failed unit is tried again).",
}

# Fields counted in whole numbers (shown without decimals when every value is whole).
_COUNTS = frozenset(
    {
        "n",
        "round",
        "index",
        "length",
        "attempts",
        "units",
        "run",
        "victim_queries",
        "attacker_queries",
        "generated_tokens",
        "span_tokens",
        "match_tokens",
        "span_chars",
        "extract_k",
        "pii_copied",
        "pii_invented",
        "truth",
        "copied",
        "invented",
        "n_members",
        "n_nonmembers",
        "n_pairs",
        "wins",
        "ties",
        "losses",
        "chance_units",
        "chance_n",
        "extraction_bits_units",
        "extraction_window_tokens",
        "pam_prefixes",
        "units_done",
        "units_error",
        "units_total",
        "prompts",
        "pairs",
        "rank",
        "folds",
    }
)
# Decimals of a number column (3 unless named here).
DIGITS: dict[str, int] = {
    "seconds": 2,
    "seconds_per_unit": 2,
    "queries_per_unit": 1,
    "tokens_per_unit": 1,
    "span_tokens": 1,
    "match_tokens": 1,
    "log10_p_z": 2,
    "log10_n_at_p": 2,
    "extraction_bits": 1,
    "extraction_bits_min": 1,
}
# Fields whose values are method names (shown by their labels).
_METHOD_VALUES = ("method", "baseline")
# Text columns a reader may need whole (drawn narrow, the whole text on demand).
_LONG_TEXT_CHARS = 40
# Text fields where nothing means "none" rather than "missing": left blank, not "–".
_BLANK_WHEN_EMPTY = frozenset({"flags", "error"})


def column_label(name: str) -> str:
    """What a table calls the field ``name``: :data:`COLUMN_LABELS`, then a method's figure, a
    membership signal (``loss`` or ``signal_loss``), a method, else the name with spaces for
    underscores."""
    if name in COLUMN_LABELS:
        return COLUMN_LABELS[name]
    # A method registered after this module was imported (a plugin's, a test's): its figures
    # are labelled by the registry as it is now.
    figure = next((f for f in figures() if f.name == name), None)
    if figure is not None:
        return figure.label
    signal = SIGNAL_BY_NAME.get(name.removeprefix("signal_"))
    if signal is not None:
        return signal.label
    shown = method_label(name)
    if shown != name:
        return shown
    return name.replace("_", " ")


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def _float(value: Any) -> float:
    """``value`` as a float, NaN when missing (the formatting helpers' input)."""
    return math.nan if _missing(value) else float(value)


def _is_bool_column(values: pd.Series) -> bool:
    present = [v for v in values if not _missing(v)]
    return bool(present) and all(isinstance(v, bool | np.bool_) for v in present)


def _is_number_column(values: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(values):
        return False
    if pd.api.types.is_numeric_dtype(values):
        return True
    present = [v for v in values if not _missing(v)]
    return bool(present) and all(
        isinstance(v, int | float | np.number) and not isinstance(v, bool | np.bool_)
        for v in present
    )


def _merge_intervals(frame: pd.DataFrame) -> tuple[pd.DataFrame, set[str]]:
    """Each ``x`` with ``x_lo`` and ``x_hi`` as one text column (under ``x``'s name); returns the
    frame and the names of the merged columns."""
    merged: set[str] = set()
    frame = frame.copy()
    for name in list(frame.columns):
        lo, hi = f"{name}_lo", f"{name}_hi"
        if lo in frame and hi in frame:
            frame[name] = [
                with_ci(_float(m), _float(a), _float(b))
                for m, a, b in zip(frame[name], frame[lo], frame[hi])
            ]
            frame = frame.drop(columns=[lo, hi])
            merged.add(name)
    if {"mean_diff", "lo", "hi"} <= set(frame.columns):  # paired gains
        frame["mean_diff"] = [
            MISSING if math.isnan(_float(m)) else signed_ci(_float(m), _float(a), _float(b))
            for m, a, b in zip(frame["mean_diff"], frame["lo"], frame["hi"])
        ]
        frame = frame.drop(columns=["lo", "hi"])
        merged.add("mean_diff")
    return frame, merged


def _labelled_values(frame: pd.DataFrame) -> pd.DataFrame:
    """``method`` / ``score`` shown by their ``*_label`` column when the frame has one; method
    names shown by their labels otherwise."""
    frame = frame.copy()
    for name in ("method", "score"):
        label = f"{name}_label"
        if label in frame:
            frame[name] = frame[label]
            frame = frame.drop(columns=[label])
    for name in _METHOD_VALUES:
        if name in frame:
            frame[name] = [v if _missing(v) else method_label(str(v)) for v in frame[name]]
    if "n" in frame and "small_n" in frame:
        frame["n"] = [
            MISSING if _missing(n) else n_mark(int(n), bool(s) and not _missing(s))
            for n, s in zip(frame["n"], frame["small_n"])
        ]
        frame = frame.drop(columns=["small_n"])
    return frame


def _empty_everywhere(values: pd.Series) -> bool:
    return all(_missing(v) for v in values)


def for_people(
    frame: pd.DataFrame,
    *,
    labels: Mapping[str, str] | None = None,
    tips: Mapping[str, str] | None = None,
    digits: Mapping[str, int] | None = None,
    keep: Iterable[str] = (),
    drop: Iterable[str] = (),
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``frame`` as a table for people, and the ``column_config`` to draw it with.

    Args:
        frame: any table of fields (store rows, a report table, a computed frame).
        labels / tips / digits: per field name, over :data:`COLUMN_LABELS`, :data:`COLUMN_HELP`
            and :data:`DIGITS` (a label or help for this table only).
        keep: fields kept even when empty in every row.
        drop: fields left out.

    Returns:
        ``(shown, column_config)``: ``shown`` has one column per label, in ``frame``'s order,
        every value a number, a string (``–`` for a missing one, ``yes``/``no`` for a boolean,
        :data:`BEST_MARK` or ``""`` for the best flag) or an int; ``column_config`` maps each
        label to its ``st.column_config`` (help, number format, text width). Pass both to
        ``st.dataframe(shown, column_config=column_config, hide_index=True)``, or call
        :func:`show`.
    """
    names = {**COLUMN_LABELS, **(labels or {})}
    helps = {**COLUMN_HELP, **(tips or {})}
    places = {**DIGITS, **(digits or {})}
    keep = set(keep)
    source = frame.drop(columns=[c for c in drop if c in frame])
    source = source.loc[:, ~source.columns.duplicated()]
    if len(source):
        # Left out before merging: an interval whose bounds are all empty still shows its mean.
        empty = [c for c in source.columns if c not in keep and _empty_everywhere(source[c])]
        source = source.drop(columns=empty)
    source, merged = _merge_intervals(_labelled_values(source))
    shown = pd.DataFrame(index=range(len(source)))
    config: dict[str, Any] = {}
    long_text: list[str] = []
    for name in source.columns:
        values = source[name].reset_index(drop=True)
        label = names.get(name) or column_label(name)
        if name in merged:
            label += CI_SUFFIX
        tip = helps.get(name)
        if name == "is_best" or (name == "best" and _is_bool_column(values)):
            shown[label] = [BEST_MARK if not _missing(v) and bool(v) else "" for v in values]
            config[label] = st.column_config.TextColumn(label, help=tip, width="small")
        elif _is_bool_column(values):
            shown[label] = [MISSING if _missing(v) else ("yes" if v else "no") for v in values]
            config[label] = st.column_config.TextColumn(label, help=tip, width="small")
        elif _is_number_column(values):
            shown[label], config[label] = _numbers(name, label, values, tip, places)
        else:
            gap = "" if name in _BLANK_WHEN_EMPTY else MISSING
            text = [gap if _missing(v) else show_controls(str(v)) for v in values]
            shown[label] = text
            if max((len(t) for t in text), default=0) > _LONG_TEXT_CHARS:
                long_text.append(label)
            config[label] = st.column_config.TextColumn(label, help=tip)
    # One long text column may take a wide column; two or more share the page.
    width: Literal["medium", "large"] = "large" if len(long_text) == 1 else "medium"
    for label in long_text:
        tip = config[label].get("help")
        full = FULL_TEXT_HINT if not tip else f"{tip} {FULL_TEXT_HINT}"
        config[label] = st.column_config.TextColumn(label, help=full, width=width)
    return shown, config


def _numbers(
    name: str, label: str, values: pd.Series, tip: str | None, places: Mapping[str, int]
) -> tuple[list[Any], Any]:
    """A number column: kept numeric when complete, else text with ``–`` for the gaps."""
    raw = [v for v in values if not _missing(v)]
    present = [float(v) for v in raw]
    whole = (
        pd.api.types.is_integer_dtype(values)
        or (bool(raw) and all(isinstance(v, int | np.integer) for v in raw))
        or (name in _COUNTS and all(v.is_integer() for v in present))
    )
    decimals = 0 if whole else places.get(name, 3)
    if len(present) == len(values):
        data = [int(v) if whole else float(v) for v in values]
        fmt = "%d" if whole else f"%.{decimals}f"
        return data, st.column_config.NumberColumn(label, help=tip, format=fmt)
    text = [MISSING if _missing(v) else f"{float(v):.{decimals}f}" for v in values]
    return text, st.column_config.TextColumn(label, help=tip)


def full_text_caption(column_config: Mapping[str, Any]) -> None:
    """Under a table with a long text column: how to read a cell's whole text."""
    if any(FULL_TEXT_HINT in (c.get("help") or "") for c in column_config.values()):
        st.caption(FULL_TEXT_HINT)


# Fitting a table to the page: the content width at 1440×900 with the sidebar open, and what a
# column of the data grid takes per character and around its text (measured in chromium).
PAGE_WIDTH_PX = 960
_CHAR_PX = 7.5
_CELL_PX = 20
# Fields that say what a row is (kept at the left of every part of a split table).
_ROW_KEYS = (
    "figure",
    "method",
    "score",
    "domain",
    "length",
    "n",
    "kind",
    "snippet",
    "signal",
    "where",
)
# Fields that void or qualify a row's figures (kept at the right of every part).
_ROW_VERDICTS = ("voided by", "above chance")


def _as_text(value: Any) -> str:
    # A float is drawn with a few decimals (DIGITS), not repr's 17 digits.
    if isinstance(value, float | np.floating) and math.isfinite(value):
        return f"{value:.3f}"
    return str(value)


def column_px(label: str, values: Iterable[Any]) -> int:
    """About how many pixels the data grid gives a column: its widest text (label or value)."""
    widest = max([len(str(label)), *(len(_as_text(v)) for v in values)])
    return int(widest * _CHAR_PX + _CELL_PX)


def fit_columns(shown: pd.DataFrame, width_px: int = PAGE_WIDTH_PX) -> list[list[str]]:
    """``shown``'s columns in parts that each fit ``width_px``: the row keys (method, domain,
    length, n …, at the left) start every part, the other columns follow in order. One part when
    the whole table fits. A "voided by" or "above chance" column ends every part."""
    columns = list(shown.columns)
    keys: list[str] = []
    for label in columns:
        if label not in _ROW_KEYS:
            break
        keys.append(label)
    # A validity control's verdict on the row goes with every part that shows its figures.
    tail = [c for c in columns[len(keys) :] if c in _ROW_VERDICTS]
    rest = [c for c in columns[len(keys) :] if c not in tail]
    px = {c: column_px(c, shown[c]) for c in columns}
    base = sum(px[c] for c in keys + tail)
    parts: list[list[str]] = []
    part: list[str] = []
    for label in rest:
        if part and base + sum(px[c] for c in part) + px[label] > width_px:
            parts.append(part)
            part = []
        part.append(label)
    parts.append(part)
    return [keys + p + tail for p in parts]


def show(
    frame: pd.DataFrame,
    *,
    key: str | None = None,
    height: int | None = None,
    **options: Any,
) -> pd.DataFrame:
    """Draw ``frame`` with ``st.dataframe`` through :func:`for_people` (``options`` are its
    keyword arguments); returns the frame shown.

    A table wider than the page (:data:`PAGE_WIDTH_PX`) is drawn in parts that fit: the first
    columns on the page, the others in an expander below ("More columns: …"), each part led by
    the columns that say what a row is (method, domain, length, n …)."""
    shown, config = for_people(frame, **options)
    parts = fit_columns(shown)
    _draw(shown[parts[0]], config, key, height)
    if len(parts) > 1:
        more = list(dict.fromkeys(c for part in parts[1:] for c in part if c not in parts[0]))
        with st.expander(f"More columns: {', '.join(more)}"):
            for i, part in enumerate(parts[1:], start=1):
                _draw(shown[part], config, None if key is None else f"{key}_more{i}", height)
    full_text_caption(config)
    return shown


def _draw(
    part: pd.DataFrame, config: Mapping[str, Any], key: str | None, height: int | None
) -> None:
    st.dataframe(
        part,
        hide_index=True,
        width="stretch",
        height=height if height is not None else "auto",
        key=key,
        column_config={c: config[c] for c in part.columns if c in config},
    )
