"""What a method declares about the figures it records, so every view can show them unnamed.

A method that measures something of its own (ACR's compression ratio, divergence's spans) puts
per-unit figures into ``AttackResult.verbatim`` and lists them in ``MethodSpec.figures``. From
those declarations, and nothing else:

- the store's results frame gets one column per figure (``column``), the per-unit CSV with it;
- Table 1 (text, CSV, JSON, HTML) aggregates a figure per cell (``table1``) under its headings;
- the dashboard's tables label the column (``label``);
- a method's per-run table (``MethodSpec.report_table``, divergence's totals) is built by the
  method and rendered by the text and HTML reports from its :class:`TableColumn` list;
- the one-line description of a result (``MethodSpec.describe``) is shown by the CLI and pages.

So no file outside a method's module names the method or its figures
(docs/adding-a-method.md walks through a complete example).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memprobe_core.measuring.prior_aware import PAM_KEYS

# How a Table 1 cell aggregates a figure over its units (NaN where no unit measured it):
# ``mean`` and ``median`` of the numeric values, ``share`` the fraction of true values among
# the units that recorded one (a boolean verdict such as "ACR > 1").
Aggregate = Literal["mean", "median", "share"]
AGGREGATES: tuple[str, ...] = ("mean", "median", "share")
# What a figure holds (for the docs, the pages' column types and the CSV reader).
FigureKind = Literal["int", "float", "bool", "text", "json"]
FIGURE_KINDS: tuple[str, ...] = ("int", "float", "bool", "text", "json")


@dataclass(frozen=True)
class Table1Entry:
    """How Table 1 shows a figure: one column per cell of method × domain × length.

    Attributes:
        aggregate: ``mean``, ``median`` or ``share`` (see :data:`Aggregate`).
        text: the column heading of the plain-text report (short).
        html: the column heading of the HTML report (may say how it aggregates).
        digits: decimals shown.
    """

    aggregate: Aggregate
    text: str
    html: str
    digits: int = 2

    def __post_init__(self) -> None:
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"Table 1 aggregate {self.aggregate!r}: use one of {AGGREGATES}")


@dataclass(frozen=True)
class Figure:
    """One per-unit figure a method records in ``AttackResult.verbatim``.

    Attributes:
        name: its key in ``verbatim`` and its column in the results frame and per-unit CSV
            (prefix it with the method's name: columns of every method share one frame).
        label: what the dashboard's tables call it.
        kind: what it holds (:data:`FigureKind`).
        help: one line for the docs.
        table1: how Table 1 aggregates it (``None``: not in Table 1).
        column: a column of the results frame and per-unit CSV (``False``: kept in the stored
            result only, e.g. a count the method's own table derives).
    """

    name: str
    label: str
    kind: FigureKind
    help: str = ""
    table1: Table1Entry | None = None
    column: bool = True

    def __post_init__(self) -> None:
        if self.kind not in FIGURE_KINDS:
            raise ValueError(f"figure {self.name!r}: kind {self.kind!r}, use one of {FIGURE_KINDS}")


@dataclass(frozen=True)
class TableColumn:
    """A column of a method's own report table.

    Attributes:
        key: the column of the frame ``MethodTable.build`` returns.
        text: heading in the plain-text report.
        html: heading in the HTML report.
        missing: a column that may be empty in a row: shown as this there, its other values as
            integers (``None``: every value as it is).
    """

    key: str
    text: str
    html: str
    missing: str | None = None


@dataclass(frozen=True)
class MethodTable:
    """A per-run table a method adds to the report (divergence: its totals per length).

    Attributes:
        title: the HTML section's heading.
        text_title: the plain-text report's heading line.
        notes: the HTML section's notes.
        columns: what is shown, in order (the frame may hold more, e.g. ``method``).
        frame_columns: every column of the frame (also the JSON record's keys).
        build: ``results frame -> frame`` of ``frame_columns`` (empty when the method did not
            run: the section is then left out).
    """

    title: str
    text_title: str
    columns: Sequence[TableColumn]
    frame_columns: Sequence[str]
    build: Callable[[Any], Any]
    notes: Sequence[str] = field(default_factory=tuple)


# --- the results frame's fixed columns --------------------------------------------------------
# Declared here, below the store and the chance level that fill them, so that registering a
# method can refuse a figure that would take one of their names (two columns of one name break
# every frame and report built from the store).

# The results frame's columns before the verbatim ones (store.frames).
UNIT_COLUMNS: list[str] = [
    "run_id",
    "snippet_id",
    "domain",
    "method",
    "method_label",
    "length",
    "mem",
    "lcs_p",
    "dis",
    "objective",
    "alpha",
    "status",
    "prompt",
    "output",
    "prefix",  # the split's prefix and true suffix, so an exported row can be checked alone
    "suffix",
    "victim_queries",
    "attacker_queries",
    "generated_tokens",
    "seconds",
    "pii_truth",
    "pii_copied",
    "pii_invented",
    "victim",
    "base",
    "attacker",
    "init",
    "reverse",
    "rouge_variant",
    "rouge_stemmer",
    "rouge_tokenizer",
    "output_window",
    "seed",
    "mem_init",
    "mem_best",
    "mem_reference",
    "selection",
    "compat",
    "meta_prompts",
    "answer_model",
    "generation_budget",
    "label",
]

# The common verbatim-extraction columns (``AttackResult.verbatim``), in the order shown; the
# methods' own figures follow them (:func:`verbatim_columns`).
COMMON_VERBATIM_COLUMNS: list[str] = [
    "extract_k",
    "extractable",
    "match_tokens",
    "span_tokens",
    "span_chars",
    # probabilistic extraction (membership.extraction_probability)
    "log10_p_z",
    "n_at_p",
    "log10_n_at_p",
    "discover_p",
    "pz_scheme",
    "pz_outside_support",
    # the extraction-risk bracket around p_z (measuring.bracket; docs/method.md §14): its lower
    # side, the near-verbatim bound, and its upper side, the rank-based cost (§21)
    "near_verbatim_log10_lower",
    "near_verbatim_edits",
    "near_verbatim_not_measured",
    "extraction_bits",
    "extraction_not_measured",
    "extraction_window_tokens",
    # the prior-aware check (measuring.prior_aware; docs/method.md §24), with --pam
    *PAM_KEYS,
]

# Mem's chance level (memprobe_core.chance; docs/method.md §2): the results frame's last columns.
CHANCE_COLUMNS: list[str] = [
    "chance_n",
    "mem_unprompted",
    "chance_mean",
    "mem_chance",
    "chance_spread",
    "mem_above_chance",
    "beats_chance",
    "chance_p",
    "chance_values",
    "chance_note",
    "chance_source",
]


def fixed_columns() -> frozenset[str]:
    """Every column of the results frame that no method's figure may be named."""
    return frozenset((*UNIT_COLUMNS, *COMMON_VERBATIM_COLUMNS, *CHANCE_COLUMNS))
