"""The chance level of Mem, a validity control for extraction (docs/method.md §2, "Chance level
of Mem").

ROUGE-L recall of *unrelated* English text against a suffix is far from 0 (function words alone
give an LCS), so a Mem of 0.3 may say nothing. For each finished unit of an extracting method,
its scored output is scored again, with the unit's own :class:`~memprobe_core.config.ScoringConfig`,
against the true suffixes of the **other** snippets of the same domain and length in the same
run (no model call: the suffixes are in the units' manifests). A run of one snippet (a probe, a
comparison) has no other suffix: the built-in corpus's snippets of its domain, cut the same way,
serve instead (:func:`reference_suffixes`, as the Probe and Compare pages).

**Words the output did not have to remember are not credited.** Before every score of the
control (its own suffix's included), the output's ROUGE tokens that its prompt contains, and
English :data:`FUNCTION_WORDS`, are dropped: the prompt "Definitions." makes any answer about
definitions share "definitions" with a suffix that has it, and "and … the … of …" is shared with
any English suffix. ``mem_unprompted`` is the Mem of what is left against the unit's own suffix;
the Mem values of the same filtered output against the other suffixes are the unit's chance
distribution; from it:

- ``mem_chance``, the **chance level**: the ``⌈0.95·(k+1)⌉``-th smallest of the ``k`` values,
  which is their maximum up to ``k = 38`` (a value actually reached, no interpolation);
- ``chance_spread``: the values' standard deviation;
- ``beats_chance``: ``mem_unprompted > mem_chance + chance_spread``: above the level by the
  level's own spread (a probe's best output is the highest Mem of many candidates, and one
  reference pool is one draw: a bare rank test at 5 % would call one unrelated answer in twenty
  "above chance"). If the output were no closer to its own suffix than to the others (the
  ``k + 1`` values exchangeable), this happens with probability at most ``max(0.05, 1/(k+1))``;
- ``chance_mean`` and ``mem_above_chance = mem_unprompted − chance_mean`` (the mean, as Table
  1's means);
- ``chance_p = (1 + #{values ≥ mem_unprompted}) / (k + 1)``, the rank test's p-value;
- ``chance_source``: what the other suffixes were (the built-in snippets'; empty: the run's).

With fewer than :data:`CHANCE_MIN_OTHERS` other suffixes, or when the stored output is not the
text Mem was computed on (recomputing Mem from it against the unit's own suffix must give the
stored Mem), the chance level is undefined (``None``) and ``chance_note`` says why. Methods that
do not extract (``registry.extracts``) get no chance level.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memprobe_core.attacks.figures import CHANCE_COLUMNS
from memprobe_core.attacks.registry import extracts
from memprobe_core.config import ScoringConfig
from memprobe_core.metrics import _Reference, apply_output_window, rouge_tokens

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
    "the output's words that its prompt contains, and English function words, are not credited "
    "(left out before every score of the control); chance level = the ⌈0.95·(k+1)⌉-th smallest "
    "of the k chance values (their maximum up to 38 others); beats chance: the Mem of the words "
    "left above the level plus the chance values' standard deviation (false positives ≤ "
    "max(5 %, 1/(k+1))); Mem − chance: that Mem minus the chance mean; undefined below "
    f"{CHANCE_MIN_OTHERS} other suffixes"
)
# The reading of one unit against its chance level: the words every view uses.
ABOVE_CHANCE = "above chance"
NOT_ABOVE_CHANCE = "NOT distinguishable from chance"

NOT_EXTRACTING = "the method asks no model for the suffix"
NO_MEM = "the unit has no Mem"
NO_SUFFIX = "the unit's manifest keeps no suffix (stored by an older version)"
NO_SCORING = "the unit's ROUGE settings are not recorded"
PROMPT_CUT = "the stored prompt is cut: which words it gave cannot be told"
NOT_SCORED_TEXT = (
    "the stored output is not the text Mem was computed on (cut by the store, or an output "
    "window whose scored part was not kept)"
)


def too_few(minimum: int = CHANCE_MIN_OTHERS) -> str:
    """The note of a unit with fewer than ``minimum`` other suffixes (how many: ``chance_n``)."""
    return f"fewer than {minimum} other snippets of the same domain and length"


@dataclass(frozen=True)
class ChanceLevel:
    """One unit's chance control.

    Attributes:
        values: Mem of the unit's scored output, less the prompt's words, against each other
            suffix (the chance distribution), in the order of the other snippets' ids.
        n: how many other suffixes there were (also when too few for a level).
        mem_unprompted: Mem of the scored output less the words its prompt contains (the value
            compared with the level; Mem itself when the prompt gives no word of the output).
        mean: mean of ``values`` (``None`` when undefined).
        level: the chance level (see the module docstring; ``None`` when undefined).
        mem_above: ``mem_unprompted − mean``.
        spread: the standard deviation of ``values`` (the margin ``beats`` asks above ``level``).
        beats: ``mem_unprompted > level + spread``.
        p_value: ``(1 + #{values ≥ mem_unprompted}) / (n + 1)``.
        note: why the level is undefined (``None`` when it is defined).
        source: where the other suffixes came from (``None``: the run's own).
    """

    values: tuple[float, ...] = ()
    n: int = 0
    mem_unprompted: float | None = None
    mean: float | None = None
    level: float | None = None
    spread: float | None = None
    mem_above: float | None = None
    beats: bool | None = None
    p_value: float | None = None
    note: str | None = None
    source: str | None = None

    @property
    def verdict(self) -> str | None:
        """:data:`ABOVE_CHANCE` or :data:`NOT_ABOVE_CHANCE` (``None`` without a level): the one
        reading of a unit's chance control, on the pages and in the reports."""
        if self.level is None:
            return None
        return ABOVE_CHANCE if self.beats else NOT_ABOVE_CHANCE

    def columns(self) -> dict[str, Any]:
        """The unit's :data:`CHANCE_COLUMNS` (a method that does not extract: all ``None``)."""
        if self.note == NOT_EXTRACTING:
            return dict.fromkeys(CHANCE_COLUMNS)
        return {
            "chance_n": self.n,
            "mem_unprompted": self.mem_unprompted,
            "chance_mean": self.mean,
            "mem_chance": self.level,
            "chance_spread": self.spread,
            "mem_above_chance": self.mem_above,
            "beats_chance": self.beats,
            "chance_p": self.p_value,
            "chance_values": list(self.values) if self.level is not None else None,
            "chance_note": self.note,
            "chance_source": self.source,
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
    mem: float,
    values: Sequence[float],
    *,
    min_others: int = CHANCE_MIN_OTHERS,
    source: str | None = None,
) -> ChanceLevel:
    """The chance control of a Mem given its chance distribution ``values`` (``mem``: the Mem
    compared, of the words the prompt did not give)."""
    k = len(values)
    if k < min_others:
        return ChanceLevel(
            values=tuple(values), n=k, mem_unprompted=mem, note=too_few(min_others), source=source
        )
    mean = math.fsum(values) / k
    level = upper_level(values)
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / k)
    return ChanceLevel(
        values=tuple(values),
        n=k,
        mem_unprompted=mem,
        source=source,
        mean=mean,
        level=level,
        mem_above=mem - mean,
        spread=spread,
        beats=bool(mem > level + spread),
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


def _at_most(items: list[str], cap: int, seed: str) -> list[str]:
    """``items``, or a sample of ``cap`` of them in their order (``random.Random(seed)``: a str
    seed is hashed with SHA-512, the same in every process)."""
    if len(items) <= cap:
        return items
    kept = sorted(random.Random(seed).sample(range(len(items)), cap))
    return [items[k] for k in kept]


def _group(unit: Mapping[str, Any]) -> tuple[str, int]:
    return (str(unit.get("domain") or "unknown"), int(unit["length"]))


# English function words: a common subsequence of them is what unrelated text shares with any
# suffix ("and … the … of …"), so the control does not credit them either.
FUNCTION_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves""".split()  # noqa: SIM905
)


@functools.lru_cache(maxsize=8)
def _function_tokens(stemmer: bool, tokenizer: str) -> frozenset[str]:
    text = " ".join(sorted(FUNCTION_WORDS))
    return frozenset(rouge_tokens(text, stemmer=stemmer, tokenizer=tokenizer))


def prompt_words(prompt: str, scoring: ScoringConfig) -> frozenset[str]:
    """The ROUGE tokens (lowercased, stemmed as Mem's) the control does not credit an output
    for: the prompt's own words, and :data:`FUNCTION_WORDS`."""
    given = rouge_tokens(prompt, stemmer=scoring.stemmer, tokenizer=scoring.tokenizer)
    return frozenset(given) | _function_tokens(scoring.stemmer, scoring.tokenizer)


def unprompted_tokens(text: str, words: frozenset[str], scoring: ScoringConfig) -> list[str]:
    """The ROUGE tokens of ``text`` (an already windowed output) less ``words``, in order."""
    tokens = rouge_tokens(text, stemmer=scoring.stemmer, tokenizer=scoring.tokenizer)
    return [t for t in tokens if t not in words]


class _References:
    """Suffixes tokenized once each, scored against token lists as :func:`rouge_l` scores."""

    def __init__(self, scoring: ScoringConfig) -> None:
        self.scoring = scoring
        self._refs: dict[str, _Reference] = {}

    def score(self, tokens: list[str], reference: str) -> float:
        ref = self._refs.get(reference)
        if ref is None:
            ref = _Reference(
                rouge_tokens(
                    reference, stemmer=self.scoring.stemmer, tokenizer=self.scoring.tokenizer
                )
            )
            self._refs[reference] = ref
        return ref.score(tokens, self.scoring.variant)


def _clipped_prompt(unit: Mapping[str, Any]) -> bool:
    from memprobe_core.attacks.result import CLIPPED

    return "prompt" in ((unit.get("manifest") or {}).get(CLIPPED) or ())


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
            ``method``, ``length``, ``domain``, ``prompt``, ``output``, ``mem`` and ``manifest``
            with ``split.suffix`` and ``scoring``). Every unit lends its suffix, whatever its
            method; only extracting units get a level.
        config: the run's config (ROUGE settings for units whose manifest lacks them; the
            ``prefix_ratio`` a one-snippet run's reference snippets are cut with).
        scored_outputs: the scored part of an output by ``(snippet_id, method, length)`` where it
            differs from the stored output (the ``last`` output window).
        min_others: fewest other suffixes for a level.
        max_others: most other suffixes scored; past it, a sample seeded by the unit's snippet
            and length (every method of a snippet gets the same).

    A run of exactly one snippet is compared with the built-in corpus instead
    (:func:`reference_suffixes`, cut as the unit's manifest records), as the pages do.
    """
    config = config or {}
    scored_outputs = scored_outputs or {}
    # (domain, length) -> snippet id -> suffix; every finished unit of the snippet has the same.
    suffixes: dict[tuple[str, int], dict[str, str]] = {}
    for unit in units:
        suffix = _suffix(unit)
        if suffix is not None:
            suffixes.setdefault(_group(unit), {}).setdefault(str(unit["snippet_id"]), suffix)
    one_snippet = len({str(u["snippet_id"]) for u in units}) == 1

    out: list[ChanceLevel] = []
    scorers: dict[ScoringConfig, _References] = {}
    for unit in units:
        mem = unit.get("mem")
        scoring = _scoring(unit, config)
        if not extracts(str(unit["method"])):
            out.append(ChanceLevel(note=NOT_EXTRACTING))
        elif mem is None or (isinstance(mem, float) and math.isnan(mem)):
            out.append(ChanceLevel(note=NO_MEM))
        elif _suffix(unit) is None:
            out.append(ChanceLevel(note=NO_SUFFIX))
        elif scoring is None:
            out.append(ChanceLevel(note=NO_SCORING))
        elif _clipped_prompt(unit):
            out.append(ChanceLevel(note=PROMPT_CUT))
        elif one_snippet:
            out.append(_reference_level(unit, float(mem), scoring, config))
        else:
            key = (str(unit["snippet_id"]), str(unit["method"]), int(unit["length"]))
            text = scored_outputs.get(key, unit.get("output") or "")
            refs = scorers.setdefault(scoring, _References(scoring))
            out.append(_run_level(unit, float(mem), text, refs, suffixes, min_others, max_others))
    return out


def _run_level(
    unit: Mapping[str, Any],
    mem: float,
    text: str,
    refs: _References,
    suffixes: Mapping[tuple[str, int], Mapping[str, str]],
    min_others: int,
    max_others: int,
) -> ChanceLevel:
    """One unit's control against the other suffixes of its domain and length in the run."""
    domain, length = _group(unit)
    by_id = suffixes[(domain, length)]
    own = str(unit["snippet_id"])
    mine = by_id[own]
    # The other suffixes in their snippets' id order, each distinct text once; the unit's own
    # text is never one (a duplicated snippet is not an unrelated one).
    order = [t for t in dict.fromkeys(by_id[other] for other in sorted(by_id)) if t != mine]
    others = _at_most(order, max_others, f"{own}\0{length}")
    scoring = refs.scoring
    if abs(refs.score(unprompted_tokens(text, frozenset(), scoring), mine) - mem) > _SAME_MEM:
        return ChanceLevel(note=NOT_SCORED_TEXT)
    kept = unprompted_tokens(text, prompt_words(str(unit.get("prompt") or ""), scoring), scoring)
    values = [refs.score(kept, other) for other in others]
    return chance_level(refs.score(kept, mine), values, min_others=min_others)


@functools.lru_cache(maxsize=4)
def _local_tokenizer(name: str) -> Any:
    """The victim's tokenizer by name, from this machine's cache only (``None``: not here)."""
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name, local_files_only=True)
    except Exception:  # not cached here, not an HF name, transformers missing: no reference cut
        return None


def _reference_level(
    unit: Mapping[str, Any], mem: float, scoring: ScoringConfig, config: Mapping[str, Any]
) -> ChanceLevel:
    """A one-snippet run's control against the built-in corpus, cut as the unit was."""
    from memprobe_core.snippets.split import DEFAULT_PREFIX_RATIO, split

    cut = (unit.get("manifest") or {}).get("split") or {}
    name = str(cut.get("tokenizer") or "whitespace")
    tokenizer = None if name == "whitespace" else _local_tokenizer(name)
    if name != "whitespace" and tokenizer is None:
        return ChanceLevel(
            note=f"the victim's tokenizer {name} is not on this machine to cut the built-in "
            "snippets (a run of one snippet is compared with them)"
        )
    ratio = float(config.get("prefix_ratio") or DEFAULT_PREFIX_RATIO)
    pool, source = reference_suffixes(
        str(unit["snippet_id"]),
        str(unit.get("domain") or "unknown"),
        lambda other: split(
            other,
            tokenizer if tokenizer is not None else "whitespace",
            int(unit["length"]),
            ratio,
            bos_in_prefix=bool(cut.get("bos_in_prefix")),
        ),
    )
    own = (str(cut["suffix"]), int(cut.get("suffix_tokens") or 0) or None)
    output = str(unit.get("output") or "")
    from memprobe_core.metrics import mem as mem_of

    if abs(mem_of(output, own[0], scoring, suffix_tokens=own[1], tokenizer=tokenizer) - mem) > (
        _SAME_MEM
    ):
        return ChanceLevel(note=NOT_SCORED_TEXT)
    return reference_chance(
        output,
        mem,
        pool,
        scoring,
        tokenizer,
        prompt=str(unit.get("prompt") or ""),
        suffix=own,
        source=source,
    )


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def from_columns(row: Mapping[str, Any]) -> ChanceLevel:
    """A unit's :class:`ChanceLevel` back from its :data:`CHANCE_COLUMNS` (a results-frame row)."""
    level = _number(row.get("mem_chance"))
    beats = row.get("beats_chance")
    values = row.get("chance_values")
    note, source = row.get("chance_note"), row.get("chance_source")
    n = _number(row.get("chance_n"))
    return ChanceLevel(
        values=tuple(values) if isinstance(values, list | tuple) else (),
        n=int(n) if n is not None else 0,
        mem_unprompted=_number(row.get("mem_unprompted")),
        mean=_number(row.get("chance_mean")),
        level=level,
        spread=_number(row.get("chance_spread")),
        mem_above=_number(row.get("mem_above_chance")),
        beats=None if level is None or beats is None else bool(beats),
        p_value=_number(row.get("chance_p")),
        note=note if isinstance(note, str) and note else None,
        source=source if isinstance(source, str) and source else None,
    )


def unit_chance(frame: Any, snippet_id: str, method: str, length: int) -> ChanceLevel | None:
    """One unit's chance control as its run's results frame keeps it (``store.results_frame``,
    read by :func:`from_columns`): what the reports read, and what a page shows for a stored
    unit, so the two give one verdict (``None``: the frame has no such unit)."""
    if frame is None or frame.empty or "mem_chance" not in frame:
        return None
    rows = frame[
        (frame["snippet_id"].astype(str) == str(snippet_id))
        & (frame["method"].astype(str) == str(method))
        & (frame["length"].astype(int) == int(length))
    ]
    return None if rows.empty else from_columns(rows.iloc[0])


def chance_reading(level: ChanceLevel) -> str:
    """One unit's chance control in one sentence, the same on the pages and in the reports:
    the Mem compared (of the words the prompt did not give), the level, and the verdict
    (:data:`ABOVE_CHANCE` / :data:`NOT_ABOVE_CHANCE`), or why there is no level."""
    if level.level is None or level.mem_unprompted is None or level.mean is None:
        return f"Chance level of Mem: undefined ({level.note or 'no chance values'})."
    against = level.source or f"{level.n} other suffixes of the run"
    margin = f" + spread {level.spread:.3f}" if level.spread is not None else ""
    return (
        f"Chance level of Mem {level.level:.3f}{margin} (mean {level.mean:.3f}, against "
        f"{against}); Mem of the words neither the prompt gave nor function words make "
        f"{level.mem_unprompted:.3f}: this Mem is {level.verdict}."
    )


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
    a report's meta (``chance``, ``chance_rule``, ``chance_readings``: each unit's
    :func:`chance_reading` in a run of one snippet, ``chance_undefined``, ``selection``)."""
    if not meta.get("chance"):
        return []
    notes = [f"{meta['chance'][0].upper()}{meta['chance'][1:]}; {meta.get('chance_rule', '')}."]
    if meta.get("selection") not in (None, "objective"):
        notes.append(
            "The chance columns compare Mem(p*), the stored result's output, whatever Mem the "
            "table shows."
        )
    notes.extend(meta.get("chance_readings") or [])
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
    *,
    prompt: str = "",
    suffix: tuple[str, int | None] | None = None,
    source: str | None = None,
) -> ChanceLevel:
    """The chance control of one output against reference ``(suffix, tokens)`` pairs, each
    scored as Mem is (:func:`memprobe_core.metrics.mem`: the output window applied the same way
    with the victim's ``tokenizer``), less the words of ``prompt``.

    Args:
        output / mem: the output and its Mem against its own suffix.
        prompt: the prompt that produced ``output``: its words are not credited (see the
            module docstring).
        suffix: the output's own ``(suffix, suffix tokens)``; the compared Mem is then the Mem
            of the words ``prompt`` did not give. Without it, ``mem`` is compared as it is
            (and ``prompt`` must be empty, else the two sides would be scored differently).
        source: where ``suffixes`` come from (:func:`reference_suffixes`' second value).
    """
    if suffix is None and prompt:
        raise ValueError("a prompt's words are left out of both sides: pass the output's suffix")
    words = prompt_words(prompt, scoring) if suffix is not None else frozenset()
    refs = _References(scoring)

    def score(reference: str, tokens: int | None) -> float:
        text = output
        if tokens is not None:
            text = apply_output_window(output, tokens, scoring.output_window, tokenizer)
        return refs.score(unprompted_tokens(text, words, scoring), reference)

    values = [score(reference, tokens) for reference, tokens in suffixes]
    compared = mem if suffix is None else score(*suffix)
    return chance_level(compared, values, source=source)
