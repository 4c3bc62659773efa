"""The JSON-shaped records a unit's result carries beside its scores.

``AttackResult.verbatim`` holds the verbatim-extraction figures of the output (k-extractability,
spans, probabilistic extraction) and every registered method's own figures
(``MethodSpec.figures``); ``AttackResult.membership`` holds the snippet's membership signals and
how they were scored. Both are stored as JSON and read back by key, and their keys are declared
where they are computed (``attacks.figures.COMMON_VERBATIM_COLUMNS``, the methods' figures,
``membership.options.SIGNALS``).

They are ``dict[str, JsonValue]`` rather than ``TypedDict``: a method adds figures of its own to
``verbatim`` without touching this module, and a ``TypedDict`` open to extra keys (PEP 728's
``extra_items``) is not supported by mypy yet. The value type still says what JSON can hold, so
a tensor or a set put into one is a type error rather than a failed write at the store.
"""

from __future__ import annotations

from typing import TypeAlias

# What JSON can hold, recursively (a list of spans, SaMIA's sampling settings).
JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"

# Verbatim-extraction figures and the methods' own figures, by name.
VerbatimRecord: TypeAlias = dict[str, JsonValue]
# Membership signals by name, plus ``tokens``, ``min_k_percent``, ``scored_by``; or
# ``{"not_measured": why}`` / ``{"error": message}``; ``{}`` when not measured.
MembershipRecord: TypeAlias = dict[str, JsonValue]
