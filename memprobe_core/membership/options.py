"""The one list of membership signals, and how a result's are shown (what is measured beside
every result, ``MeasureOptions``, is :mod:`memprobe_core.measuring.options`).

Every unit (one snippet, method and length) gets, besides Mem:

- **verbatim-extraction metrics** of the chosen output against the true suffix
  (:mod:`memprobe_core.membership.verbatim`): k-extractability and the longest verbatim span;
- **membership signals** of the snippet on the victim (:mod:`memprobe_core.membership.signals`):
  how the model scores the text itself, computed from one batched forward pass.

:data:`SIGNALS` lists every registered signal (:mod:`memprobe_core.membership.signals_registry`:
memprobe's own, docs/method.md §8, and plugins', docs/adding-a-signal.md), saying which way
points to "member" and how each is shown; reports, CSV columns and pages read it from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

# MeasureOptions lives below the methods (memprobe_core.measuring); re-exported here, where the
# membership package has always offered it.
from memprobe_core.measuring.options import (
    DEFAULT_EXTRACT_K,
    DEFAULT_MIN_K_PERCENT,
    MAX_RECALL_SHOTS,
    MAX_SAMIA_SAMPLES,
    MeasureOptions,
)
from memprobe_core.membership.signals_registry import SignalList, SignalsByName, SignalSpec
from memprobe_core.records import MembershipRecord

__all__ = [
    "DEFAULT_EXTRACT_K",
    "DEFAULT_MIN_K_PERCENT",
    "MAX_RECALL_SHOTS",
    "MAX_SAMIA_SAMPLES",
    "SIGNALS",
    "SIGNAL_BY_NAME",
    "MeasureOptions",
    "SignalSpec",
    "signals_frame",
]

# Every registered signal, memprobe's own (membership.builtin_signals) then plugins', read from
# the registry at each use (membership.signals_registry; docs/adding-a-signal.md).
SIGNALS: Sequence[SignalSpec] = SignalList()
SIGNAL_BY_NAME: Mapping[str, SignalSpec] = SignalsByName()


def signals_frame(membership: MembershipRecord | None) -> pd.DataFrame:
    """A result's membership signals as rows to show: signal, value, which way means member.

    Empty when nothing was measured; a recorded failure, or a black-box victim whose server
    cannot score a text, shows as one row with its message (first), and so does SaMIA not
    measured; the signals that were measured (SaMIA needs no log-probs) follow.
    """
    membership = membership or {}
    # A failed pass; a server that cannot score a text; SaMIA's sampling that could not be done.
    notes = {
        "error": "error",
        "not_measured": "not measured",
        "samia_not_measured": "SaMIA not measured",
    }
    rows: list[dict[str, Any]] = [
        {"signal": shown, "value": None, "member if": "", "what": str(membership[why])}
        for why, shown in notes.items()
        if why in membership
    ]
    rows += [
        {
            "signal": spec.label,
            "value": float(value),
            "member if": "higher" if spec.higher_is_member else "lower",
            "what": spec.description,
        }
        for spec in SIGNALS
        if isinstance(value := membership.get(spec.name), (int, float))
    ]
    return pd.DataFrame(rows, columns=["signal", "value", "member if", "what"])
