"""The near-verbatim lower bound of a document's least protected windows (docs/method.md §19, §22).

A map gives every window's exact ``p_z`` (§14) and the document its rank-based upper bound ``b``
(§21). The lower side of the bracket is the beam search of :mod:`memprobe_core.measuring
.near_verbatim`: a certified lower bound on the chance that one sample under the map's scheme
writes a window's suffix within ``d`` token edits after its prefix. It costs at most what ``B``
samples of the suffix cost (on the embedded Gemma-3-270M, 45 s and 343 s for two 50 + 50-token
windows on a busy 2-core CPU), against a share of one batched forward pass for a window's
``p_z``, so a map measures it on the ``N`` windows with the highest
``p_z`` only (ties: the earliest): those the scheme writes most readily, its least protected.

Each window's record (the keys probe stores, ``near_verbatim_log10_lower`` …, with the window
and its ``log10_p_z``) is kept in the run's config as it is made, like the rank cost, so a resume
of a killed map redoes none that finished and :func:`read_map` hands them back.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memprobe_core.documents.extraction_map import WindowScore
from memprobe_core.measuring.near_verbatim import (
    DEFAULT_BEAM_WIDTH,
    DEFAULT_EDITS,
    check_beam_width,
    check_edits,
    near_verbatim_bound,
)
from memprobe_core.measuring.sampler import SamplingScheme
from memprobe_core.option_fields import check_options, option
from memprobe_core.secrets import redact_secrets

log = logging.getLogger(__name__)

# One window's stored record: probe's near_verbatim_* keys with the window, its suffix's place
# and its log10_p_z (JSON from the run's config).
WindowBound = dict[str, Any]

# The run config's keys: the setting the run was started with, and the records made.
SETTING_KEY = "near_verbatim"
BOUNDS_KEY = "near_verbatim_bounds"
# More windows than this is a map's worth of beam searches (hours on a CPU): the rank cost and
# the windows' p_z already cover every window.
MAX_BOUND_WINDOWS = 1000


# What a map does after its last window, said where its progress is shown: the search of one
# window can take minutes on a CPU, with no window left to count.
AFTER_WINDOWS = (
    "every window scored; now the document's rank cost (one pass) and the near-verbatim lower "
    "bound of its least protected window(s) (a beam search each)"
)


@dataclass(frozen=True)
class MapBoundOptions:
    """Which windows of a map get the near-verbatim lower bound, and the search's budget.

    Attributes:
        windows: ``N``, the windows with the highest ``p_z`` measured (0: none).
        edits / beams: the search's edit budget and beam width, as probe's
            ``--near-verbatim-edits`` / ``--near-verbatim-beams`` (declared once, in
            :class:`memprobe_core.measuring.options.MeasureOptions`; checked the same way here).
    """

    windows: int = option(
        1,
        help="the document's near-verbatim lower bound: measured on the N windows with the "
        "highest p_z (its least protected; ties: the earliest) once every window is scored, "
        "under the map's sampling scheme and --near-verbatim-edits / --near-verbatim-beams "
        "(a beam search per window, costing at most what B samples of its suffix cost; 0: off)",
        low=0,
        high=MAX_BOUND_WINDOWS,
        example="1",
        flag="--near-verbatim-windows",
        metavar="N",
    )
    edits: float = DEFAULT_EDITS
    beams: int = DEFAULT_BEAM_WIDTH

    def __post_init__(self) -> None:
        check_options(self)
        check_edits(self.edits)
        check_beam_width(self.beams)


def least_protected(scores: Sequence[WindowScore], n: int) -> list[WindowScore]:
    """The ``n`` windows with the highest ``p_z``, highest first (ties: the earliest; a window
    of ``p_z = 0`` after every other)."""

    def lowest_first(score: WindowScore) -> tuple[float, int]:
        log10_p_z = score.pz.get("log10_p_z")
        return (math.inf if log10_p_z is None else -float(log10_p_z), score.index)  # type: ignore[arg-type]

    return sorted(scores, key=lowest_first)[:n]


def window_bound(
    model: Any,
    ids: Sequence[int],
    front: Sequence[int],
    score: WindowScore,
    scheme: SamplingScheme,
    options: MapBoundOptions,
) -> WindowBound:
    """One window's record: probe's ``near_verbatim_*`` keys for its suffix after
    ``front + prefix`` (the row its ``p_z`` was read from), with the window and its
    ``log10_p_z``. A failure (e.g. out of memory) is recorded as not measured, with why: the
    map stands without its bound."""
    end = score.suffix_start + score.suffix_tokens
    record: WindowBound = {
        "window": score.index,
        "suffix_start": score.suffix_start,
        "suffix_tokens": score.suffix_tokens,
        "log10_p_z": score.pz.get("log10_p_z"),
        "pz_scheme": scheme.label(),
    }
    try:
        bound = near_verbatim_bound(
            model,
            [*front, *ids[score.start : score.suffix_start]],
            list(ids[score.suffix_start : end]),
            scheme,
            options.edits,
            options.beams,
        )
    except Exception as exc:  # recorded: the map's figures stand without the bound
        message = redact_secrets(f"{type(exc).__name__}: {exc}")
        log.warning("near-verbatim bound of window %s not measured: %s", score.index, message)
        return {**record, "near_verbatim_log10_lower": None, "near_verbatim_not_measured": message}
    return {**record, **bound.to_record()}


def stored_setting(config: dict[str, Any]) -> MapBoundOptions:
    """The run's setting; a run recorded before memprobe measured the bound gets the defaults
    when it is resumed (as its rank cost gets the paper's l and m)."""
    return MapBoundOptions(**config.get(SETTING_KEY, {}))


def measure_bounds(
    config: dict[str, Any],
    scores: Sequence[WindowScore],
    *,
    model: Any,
    ids: Sequence[int],
    front: Sequence[int],
    scheme: SamplingScheme,
    save: Callable[[dict[str, Any]], None],
    cancel: threading.Event | None = None,
) -> bool:
    """Measure the bound of each chosen window that has no record in ``config`` yet, calling
    ``save(config)`` after each (a killed run keeps those that finished); stops between windows
    when ``cancel`` is set, and says whether every chosen window has its record."""
    setting = stored_setting(config)
    bounds: dict[str, Any] = config.setdefault(BOUNDS_KEY, {})
    for score in least_protected(scores, setting.windows):
        if str(score.index) in bounds:  # made before a kill: kept, not measured again
            continue
        if cancel is not None and cancel.is_set():
            return False
        bounds[str(score.index)] = window_bound(model, ids, front, score, scheme, setting)
        save(config)
    return True


def stored_bounds(config: dict[str, Any]) -> list[WindowBound]:
    """The window records a run holds, in document order (none for a run from before them)."""
    found = config.get(BOUNDS_KEY) or {}
    return [found[key] for key in sorted(found, key=int)]


@dataclass(frozen=True)
class DocumentBound:
    """The document's near-verbatim lower bound: the highest of its measured windows'.

    Attributes:
        log10_lower: that window's ``near_verbatim_log10_lower`` (``None``: no window's search
            certified any probability, a bound of 0).
        window: the record of the window it is from (its ``log10_p_z``, edits, …).
        measured: windows whose bound was measured.
    """

    log10_lower: float | None
    window: WindowBound
    measured: int


def document_bound(records: Sequence[WindowBound]) -> DocumentBound | None:
    """The highest bound over ``records`` (ties: the earliest window); ``None`` when none was
    measured (a run from before the bound, ``N = 0``, or every search failed)."""
    measured = [r for r in records if "near_verbatim_not_measured" not in r]
    if not measured:
        return None

    def lower(record: WindowBound) -> float:
        value = record.get("near_verbatim_log10_lower")
        return -math.inf if value is None else float(value)

    best = max(measured, key=lambda r: (lower(r), -int(r["window"])))
    log10_lower = best.get("near_verbatim_log10_lower")
    return DocumentBound(
        None if log10_lower is None else float(log10_lower),
        best,
        len(measured),
    )
