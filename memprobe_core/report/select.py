"""Which Mem a report shows for each result: the selection rule, named (docs/method.md §2).

Every stored result keeps three figures besides Mem(p*):

- ``objective`` (default): Mem of ``p* = argmax O`` over ``p_init`` and all rounds, Algorithm 1's
  answer (the ``mem`` column as stored);
- ``max_mem``: the highest Mem seen in the trace (``mem_best``): an upper bound, since the
  attacker cannot pick by Mem without knowing the suffix;
- ``reference``: the paper's reference code's ``best_rougeL = max(Mem_init, Mem(p*_rounds))``
  (``mem_reference``).

Methods without an initial prompt of their own (P-S, Reverse-LM, GCG) have no ``mem_reference``:
their Mem(p*) is used under ``reference``, as the reference code reports them. Results stored
before these columns existed likewise fall back to ``mem``; the ``selection_fallback`` column
counts on which rows that happened.
"""

from __future__ import annotations

import pandas as pd

from memprobe_core.config import SELECTIONS
from memprobe_core.errors import OptionError

# The column each rule reads; ``None``: the stored ``mem`` itself.
SELECTION_COLUMNS: dict[str, str | None] = {
    "objective": None,
    "max_mem": "mem_best",
    "reference": "mem_reference",
}
# Words for a table's title ("Mem of ...").
SELECTION_LABELS: dict[str, str] = {
    "objective": "Mem of p* = argmax O (Algorithm 1)",
    "max_mem": "highest Mem in the trace (max_mem)",
    "reference": "reference code's best_rougeL = max(Mem_init, Mem(p*))",
}


def apply_selection(results: pd.DataFrame, select: str = "objective") -> pd.DataFrame:
    """A copy of a results frame whose ``mem`` is the one ``select`` picks.

    Args:
        results: a frame with ``store.frames.RESULT_COLUMNS`` (at least ``mem``).
        select: ``objective``, ``max_mem`` or ``reference``.

    Returns:
        The frame with ``mem`` replaced, the stored value kept as ``mem_objective``, the rule in
        ``selection`` and ``selection_fallback`` True where the rule's column was missing (the
        stored ``mem`` was used). ``frame.attrs["selection"]`` and ``["selection_label"]`` name
        the rule for a table's title.

    Raises:
        UsageError: an unknown ``select``.
    """
    if select not in SELECTION_COLUMNS:
        raise OptionError("select", select, f"unknown; use one of {', '.join(SELECTIONS)}")
    frame = results.copy()
    frame["mem_objective"] = frame["mem"]
    column = SELECTION_COLUMNS[select]
    if column is None or column not in frame.columns:
        chosen = frame["mem"]
        fallback = pd.Series(column is not None, index=frame.index)
    else:
        picked = pd.to_numeric(frame[column], errors="coerce")
        fallback = picked.isna()
        chosen = picked.where(~fallback, frame["mem"])
    frame["mem"] = chosen.astype(float) if len(frame) else chosen
    frame["selection"] = select
    frame["selection_fallback"] = fallback.astype(bool)
    frame.attrs["selection"] = select
    frame.attrs["selection_label"] = SELECTION_LABELS[select]
    return frame
