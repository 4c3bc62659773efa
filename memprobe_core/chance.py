"""The chance level of Mem, a validity control for extraction (docs/method.md §2, "Chance level
of Mem").

ROUGE-L recall of *unrelated* English text against a suffix is far from 0 (function words alone
give an LCS), so a Mem of 0.3 may say nothing. For each finished unit of an extracting method,
its scored output is scored again, with the unit's own :class:`~memprobe_core.config.ScoringConfig`,
against the true suffixes of the **other** snippets of the same domain and length in the same
run (no model call: the suffixes are in the units' manifests). Those Mem values are the unit's
chance distribution; from it:

- ``mem_chance``, the **chance level**: the ``⌈0.95·(k+1)⌉``-th smallest of the ``k`` values,
  which is their maximum up to ``k = 38`` (a value actually reached, no interpolation);
- ``beats_chance``: ``Mem > mem_chance``. If the output were no closer to its own suffix than to
  the others (the ``k + 1`` Mem values exchangeable), this happens with probability at most
  ``max(0.05, 1/(k+1))``: it is a one-sided rank test at that level;
- ``chance_mean`` and ``mem_above_chance = Mem − chance_mean`` (the mean, as Table 1's means);
- ``chance_p = (1 + #{values ≥ Mem}) / (k + 1)``, the rank test's p-value.

With fewer than :data:`CHANCE_MIN_OTHERS` other suffixes, or when the stored output is not the
text Mem was computed on (recomputing Mem from it against the unit's own suffix must give the
stored Mem), the chance level is undefined (``None``) and ``chance_note`` says why. Methods that
do not extract (``registry.extracts``) get no chance level.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memprobe_core.attacks.registry import extracts
from memprobe_core.config import ScoringConfig
from memprobe_core.metrics import rouge_l_matrix

# Fewer other suffixes than this: no chance level (a rank test on 4 values cannot go below 0.2).
CHANCE_MIN_OTHERS = 5
# More other suffixes than this: a seeded sample of this many (the cost grows with the square
# of a domain's snippets; 200 keeps the rank test's level at 5 %: (201 - 191) / 201).
CHANCE_MAX_OTHERS = 200
# The chance level is the upper 95 % order statistic of the chance distribution.
CHANCE_QUANTILE = 0.95
# A recomputed Mem this close to the stored one confirms the stored output is the scored text.
_SAME_MEM = 1e-9

CHANCE_EXPLANATION = (
    "chance: Mem of the same output against other snippets' suffixes of the same domain and length"
)
CHANCE_RULE = (
    "chance level = the ⌈0.95·(k+1)⌉-th smallest of the k chance values (their maximum up to 38 "
    "others); beats chance: Mem above it (a rank test, false positives ≤ max(5 %, 1/(k+1))); "
    f"Mem − chance: Mem minus the chance mean; undefined below {CHANCE_MIN_OTHERS} other suffixes"
)

NOT_EXTRACTING = "the method asks no model for the suffix"
NO_MEM = "the unit has no Mem"
NO_SUFFIX = "the unit's manifest keeps no suffix (stored by an older version)"
NO_SCORING = "the unit's ROUGE settings are not recorded"
NOT_SCORED_TEXT = (
    "the stored output is not the text Mem was computed on (cut by the store, or an output "
    "window whose scored part was not kept)"
)


def too_few(minimum: int = CHANCE_MIN_OTHERS) -> str:
    """The note of a unit with fewer than ``minimum`` other suffixes (how many: ``chance_n``)."""
    return f"fewer than {minimum} other snippets of the same domain and length"


# The per-unit columns a results frame gets (``store.frames.RESULT_COLUMNS``), in this order.
CHANCE_COLUMNS: list[str] = [
    "chance_n",
    "chance_mean",
    "mem_chance",
    "mem_above_chance",
    "beats_chance",
    "chance_p",
    "chance_values",
    "chance_note",
]


@dataclass(frozen=True)
class ChanceLevel:
    """One unit's chance control.

    Attributes:
        values: Mem of the unit's scored output against each other suffix (the chance
            distribution), in the order of the other snippets' ids.
        n: how many other suffixes there were (also when too few for a level).
        mean: mean of ``values`` (``None`` when undefined).
        level: the chance level (see the module docstring; ``None`` when undefined).
        mem_above: ``Mem − mean``.
        beats: ``Mem > level``.
        p_value: ``(1 + #{values ≥ Mem}) / (n + 1)``.
        note: why the level is undefined (``None`` when it is defined).
    """

    values: tuple[float, ...] = ()
    n: int = 0
    mean: float | None = None
    level: float | None = None
    mem_above: float | None = None
    beats: bool | None = None
    p_value: float | None = None
    note: str | None = None

    def columns(self) -> dict[str, Any]:
        """The unit's :data:`CHANCE_COLUMNS` (a method that does not extract: all ``None``)."""
        if self.note == NOT_EXTRACTING:
            return dict.fromkeys(CHANCE_COLUMNS)
        return {
            "chance_n": self.n,
            "chance_mean": self.mean,
            "mem_chance": self.level,
            "mem_above_chance": self.mem_above,
            "beats_chance": self.beats,
            "chance_p": self.p_value,
            "chance_values": list(self.values) if self.level is not None else None,
            "chance_note": self.note,
        }


def upper_level(values: Sequence[float], quantile: float = CHANCE_QUANTILE) -> float:
    """The ``⌈quantile·(k+1)⌉``-th smallest of ``k`` values, the maximum when that is past ``k``.

    Raises:
        ValueError: no values.
    """
    if not values:
        raise ValueError("no chance values: pass at least one")
    ordered = sorted(values)
    k = len(ordered)
    rank = min(k, math.ceil(quantile * (k + 1) - 1e-12))
    return ordered[rank - 1]


def chance_level(
    mem: float, values: Sequence[float], *, min_others: int = CHANCE_MIN_OTHERS
) -> ChanceLevel:
    """The chance control of a Mem given its chance distribution ``values``."""
    k = len(values)
    if k < min_others:
        return ChanceLevel(values=tuple(values), n=k, note=too_few(min_others))
    mean = math.fsum(values) / k
    level = upper_level(values)
    return ChanceLevel(
        values=tuple(values),
        n=k,
        mean=mean,
        level=level,
        mem_above=mem - mean,
        beats=bool(mem > level),
        p_value=(1 + sum(v >= mem for v in values)) / (k + 1),
    )


def _suffix(unit: Mapping[str, Any]) -> str | None:
    split = (unit.get("manifest") or {}).get("split") or {}
    suffix = split.get("suffix")
    return suffix if isinstance(suffix, str) else None


def _scoring(unit: Mapping[str, Any], config: Mapping[str, Any]) -> ScoringConfig | None:
    # As store.frames.result_row: the unit's manifest first, then the run's configured options.
    scoring = (unit.get("manifest") or {}).get("scoring") or (config.get("options") or {}).get(
        "scoring"
    )
    if not isinstance(scoring, Mapping):
        return None
    try:
        return ScoringConfig(**scoring)
    except (TypeError, ValueError):
        return None


def _at_most(items: list[int], cap: int, seed: str) -> list[int]:
    """``items``, or a sample of ``cap`` of them in their order (``random.Random(seed)``: a str
    seed is hashed with SHA-512, the same in every process)."""
    if len(items) <= cap:
        return items
    kept = sorted(random.Random(seed).sample(range(len(items)), cap))
    return [items[k] for k in kept]


def _group(unit: Mapping[str, Any]) -> tuple[str, int]:
    return (str(unit.get("domain") or "unknown"), int(unit["length"]))


def chance_levels(
    units: Sequence[Mapping[str, Any]],
    *,
    config: Mapping[str, Any] | None = None,
    scored_outputs: Mapping[tuple[str, str, int], str] | None = None,
    min_others: int = CHANCE_MIN_OTHERS,
    max_others: int = CHANCE_MAX_OTHERS,
) -> list[ChanceLevel]:
    """The chance control of every unit of one run, in the order given.

    Args:
        units: the run's finished units (``Store.units(run_id, status="done")``: ``snippet_id``,
            ``method``, ``length``, ``domain``, ``output``, ``mem`` and ``manifest`` with
            ``split.suffix`` and ``scoring``). Every unit lends its suffix, whatever its
            method; only extracting units get a level.
        config: the run's config (ROUGE settings for units whose manifest lacks them).
        scored_outputs: the scored part of an output by ``(snippet_id, method, length)`` where it
            differs from the stored output (the ``last`` output window).
        min_others: fewest other suffixes for a level.
        max_others: most other suffixes scored; past it, a sample seeded by the unit's snippet
            and length (every method of a snippet gets the same).
    """
    config = config or {}
    scored_outputs = scored_outputs or {}
    # (domain, length) -> snippet id -> suffix; every finished unit of the snippet has the same.
    suffixes: dict[tuple[str, int], dict[str, str]] = {}
    for unit in units:
        suffix = _suffix(unit)
        if suffix is not None:
            suffixes.setdefault(_group(unit), {}).setdefault(str(unit["snippet_id"]), suffix)

    out: list[ChanceLevel | None] = [None] * len(units)
    # Units to score, batched per (domain, length, ROUGE settings): each text tokenized once.
    batches: dict[tuple[Any, ...], list[tuple[int, str]]] = {}
    for i, unit in enumerate(units):
        mem = unit.get("mem")
        if not extracts(str(unit["method"])):
            out[i] = ChanceLevel(note=NOT_EXTRACTING)
        elif mem is None or (isinstance(mem, float) and math.isnan(mem)):
            out[i] = ChanceLevel(note=NO_MEM)
        elif _suffix(unit) is None:
            out[i] = ChanceLevel(note=NO_SUFFIX)
        elif (scoring := _scoring(unit, config)) is None:
            out[i] = ChanceLevel(note=NO_SCORING)
        else:
            key = (str(unit["snippet_id"]), str(unit["method"]), int(unit["length"]))
            text = scored_outputs.get(key, unit.get("output") or "")
            batch = (*_group(unit), scoring.variant, scoring.stemmer, scoring.tokenizer)
            batches.setdefault(batch, []).append((i, text))

    for (domain, length, variant, stemmer, tokenizer), members in batches.items():
        by_id = suffixes[(domain, length)]
        texts = sorted(set(by_id.values()))
        column = {text: j for j, text in enumerate(texts)}
        # The other suffixes in their snippets' id order, each distinct text once; the unit's
        # own text is never one (a duplicated snippet is not an unrelated one).
        order = list(dict.fromkeys(column[by_id[other]] for other in sorted(by_id)))
        wanted = []
        for i, _ in members:
            own = str(units[i]["snippet_id"])
            mine = column[by_id[own]]
            others = _at_most([j for j in order if j != mine], max_others, f"{own}\0{length}")
            wanted.append([mine, *others])  # the own suffix first: Mem, recomputed
        table = rouge_l_matrix(
            [text for _, text in members],
            texts,
            columns=wanted,
            variant=variant,
            stemmer=stemmer,
            tokenizer=tokenizer,
        )
        for (i, _), row in zip(members, table):
            mem = float(units[i]["mem"])
            if abs(row[0] - mem) > _SAME_MEM:
                out[i] = ChanceLevel(note=NOT_SCORED_TEXT)
                continue
            out[i] = chance_level(mem, row[1:], min_others=min_others)
    return [level if level is not None else ChanceLevel(note=NO_MEM) for level in out]


def chance_rows(
    units: Sequence[Mapping[str, Any]],
    *,
    config: Mapping[str, Any] | None = None,
    scored_outputs: Mapping[tuple[str, str, int], str] | None = None,
) -> list[dict[str, Any]]:
    """:data:`CHANCE_COLUMNS` of every unit, in the order given (see :func:`chance_levels`)."""
    return [
        level.columns()
        for level in chance_levels(units, config=config, scored_outputs=scored_outputs)
    ]


def chance_notes(meta: Mapping[str, Any]) -> list[str]:
    """What a report's chance columns mean and why some units have none, one line each, from
    a report's meta (``chance``, ``chance_rule``, ``chance_undefined``, ``selection``)."""
    if not meta.get("chance"):
        return []
    notes = [f"{meta['chance'][0].upper()}{meta['chance'][1:]}; {meta.get('chance_rule', '')}."]
    if meta.get("selection") not in (None, "objective"):
        notes.append(
            "The chance columns compare Mem(p*), the stored result's output, whatever Mem the "
            "table shows."
        )
    undefined = meta.get("chance_undefined") or {}
    if undefined:
        reasons = "; ".join(f"{why} ({n})" for why, n in undefined.items())
        notes.append(f"No chance level for {sum(undefined.values())} unit(s): {reasons}.")
    return notes


def undefined_reasons(notes: Iterable[Any]) -> dict[str, int]:
    """How many units have each reason for an undefined chance level (``None`` notes skipped;
    a method that does not extract has no note in a results frame)."""
    counts: dict[str, int] = {}
    for note in notes:
        if isinstance(note, str) and note:
            counts[note] = counts.get(note, 0) + 1
    return counts


# --- one snippet's run: a reference pool from the built-in corpus -------------------------------

# A probe or a comparison has one snippet: no other suffix in its run. Its chance distribution is
# taken against the built-in demo corpus instead (the same domain, cut at the same length by the
# same rule), so the Probe and Compare pages can draw a chance line too.
REFERENCE_EXPLANATION = (
    "chance: Mem of the same output against the suffixes of the built-in corpus's other "
    "snippets of the same domain, cut at the same length"
)


def reference_suffixes(
    snippet_id: str, domain: str, cut: Callable[[Any], Any]
) -> tuple[list[tuple[str, int]], str]:
    """Suffixes of the demo corpus's other snippets of ``domain`` (all domains if it has too few),
    each cut by ``cut(snippet)`` (a ``SplitSnippet``; snippets too short for it are skipped).

    Returns ``(suffix, suffix tokens)`` pairs and a line saying where they come from.
    """
    from memprobe_core.snippets.corpus import demo_corpus  # the corpus is read only when asked
    from memprobe_core.snippets.split import DataError

    def pool(snippets: Iterable[Any]) -> list[tuple[str, int]]:
        out = []
        for snippet in snippets:
            if snippet.id == snippet_id:
                continue
            try:
                piece = cut(snippet)
            except DataError:
                continue
            out.append((piece.suffix, piece.suffix_tokens))
        return out

    corpus = list(demo_corpus())
    same = pool(s for s in corpus if s.domain == domain)
    if len(same) >= CHANCE_MIN_OTHERS:
        return same, f"{len(same)} built-in {domain} snippets"
    every = pool(corpus)
    return every, f"{len(every)} built-in snippets of every domain (too few of domain {domain})"


def reference_chance(
    output: str,
    mem: float,
    suffixes: Sequence[tuple[str, int]],
    scoring: ScoringConfig,
    tokenizer: Any = None,
) -> ChanceLevel:
    """The chance control of one output's ``mem`` against reference ``(suffix, tokens)`` pairs,
    each scored as Mem is (:func:`memprobe_core.metrics.mem`, the output window applied the same
    way with the victim's ``tokenizer``)."""
    from memprobe_core.metrics import mem as mem_of

    values = [
        mem_of(output, suffix, scoring, suffix_tokens=tokens, tokenizer=tokenizer)
        for suffix, tokens in suffixes
    ]
    return chance_level(mem, values)
