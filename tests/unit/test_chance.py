"""Mem's chance level (docs/method.md §2, "Chance level of Mem"): the same output scored against
the other snippets' suffixes of its domain and length, from stored units, no model."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.chance import (
    CHANCE_COLUMNS,
    CHANCE_MIN_OTHERS,
    FUNCTION_WORDS,
    NOT_EXTRACTING,
    NOT_SCORED_TEXT,
    chance_level,
    chance_levels,
    upper_level,
)
from memprobe_core.metrics import rouge_l, rouge_l_matrix
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import RESULT_COLUMNS, Store, UnitKey

# Seven licence-like suffixes of one domain and length; they share function words only.
SUFFIXES = [
    "the licensee shall keep this notice in all copies of the software and the documentation "
    "that is provided with it",
    "you may not use the name of the author to endorse or promote products derived from this "
    "software without permission",
    "the software is provided as is and the authors are not liable for any claim or damages "
    "arising from its use",
    "redistribution of the source code must retain the above copyright notice and this list of "
    "conditions in the files",
    "a copy of the license is included in the section of the documentation that is entitled "
    "terms and conditions",
    "permission is granted to any person who obtains a copy of the work to deal in it without "
    "restriction of any kind",
    "the contributors grant you a worldwide and royalty free license to make use of their "
    "contributions to the project",
]
# English about something else: only "the", "of", "and", "in", "to" … in common with them.
UNRELATED = (
    "in the spring the farmers of the valley plant rows of beans and the children of the village "
    "help them with the work of the day"
)
OWN = 3  # the unit whose output is UNRELATED: its Mem is above the others' mean, not their max


def content(text: str) -> str:
    """``text`` less English function words (the control does not credit them); the texts here
    are lowercase words without punctuation, so this is the control's own filtering."""
    return " ".join(w for w in text.split() if w not in FUNCTION_WORDS)


SCORING = {"variant": "recall", "stemmer": True, "tokenizer": "rouge", "output_window": "first"}


def unit(
    snippet_id: str,
    suffix: str,
    output: str,
    *,
    domain: str = "legal",
    length: int = 100,
    method: str = "ps_base",
    mem: float | None = None,
) -> dict[str, Any]:
    """A stored finished unit as ``Store.units`` gives it; Mem computed as the method did."""
    return {
        "run_id": 1,
        "snippet_id": snippet_id,
        "method": method,
        "length": length,
        "domain": domain,
        "prompt": "prefix",
        "output": output,
        "mem": rouge_l(output, suffix) if mem is None else mem,
        "manifest": {"scoring": SCORING, "split": {"suffix": suffix, "length": length}},
    }


def run_units(output_of_own: str = UNRELATED, n: int = len(SUFFIXES)) -> list[dict[str, Any]]:
    # Every other unit reproduces its suffix badly (its own first words only).
    return [
        unit(f"s{i}", s, output_of_own if i == OWN else " ".join(s.split()[:3]))
        for i, s in enumerate(SUFFIXES[:n])
    ]


def test_unrelated_text_has_a_chance_level_well_above_0_and_does_not_beat_it() -> None:
    units = run_units()
    level = chance_levels(units)[OWN]
    mem = units[OWN]["mem"]
    assert mem == pytest.approx(0.263, abs=1e-3)  # the "Mem 0.28 that won" kind of score
    whole = [rouge_l(UNRELATED, s) for i, s in enumerate(SUFFIXES) if i != OWN]
    assert max(whole) > 0.25  # scored whole, function words alone reach far from 0 …
    # … the control does not credit them: the same output less them, against every suffix.
    others = [rouge_l(content(UNRELATED), s) for i, s in enumerate(SUFFIXES) if i != OWN]
    assert list(level.values) == others  # in the other snippets' id order
    assert level.mem_unprompted == rouge_l(content(UNRELATED), SUFFIXES[OWN]) == 0.0
    assert level.n == len(SUFFIXES) - 1
    assert level.level == max(others)
    assert level.spread == pytest.approx(statistics.pstdev(others))
    assert level.mean == pytest.approx(sum(others) / len(others))
    assert level.beats is False
    assert level.mem_above == pytest.approx(0.0 - level.mean)
    assert level.p_value == pytest.approx((1 + sum(v >= 0.0 for v in others)) / len(SUFFIXES))
    assert level.note is None


def test_an_exact_reproduction_beats_chance() -> None:
    units = run_units(output_of_own=SUFFIXES[OWN])
    level = chance_levels(units)[OWN]
    assert units[OWN]["mem"] == 1.0
    assert level.beats is True
    assert level.mem_above is not None and level.mem_above > 0.5
    assert level.p_value == pytest.approx(1 / len(SUFFIXES))


def test_fewer_than_the_minimum_of_other_suffixes_leaves_it_undefined() -> None:
    assert CHANCE_MIN_OTHERS == 5
    few = chance_levels(run_units(n=CHANCE_MIN_OTHERS))[OWN]  # 4 other suffixes
    assert few.n == CHANCE_MIN_OTHERS - 1
    assert (few.level, few.mean, few.beats, few.mem_above, few.p_value, few.spread) == (None,) * 6
    assert few.note is not None and "fewer than 5 other snippets" in few.note
    enough = chance_levels(run_units(n=CHANCE_MIN_OTHERS + 1))[OWN]
    assert enough.n == CHANCE_MIN_OTHERS and enough.level is not None and enough.note is None


def test_only_the_same_domain_and_length_count() -> None:
    units = run_units(output_of_own=SUFFIXES[OWN])
    # Suffixes equal to the output in another domain, and in the same domain at another length:
    # counted, they would be chance values of 1.0 and the exact copy would no longer beat chance.
    units += [
        unit("c0", SUFFIXES[OWN] + " x", "x", domain="code"),
        unit("l200", SUFFIXES[OWN] + " y", "y", length=200),
    ]
    level = chance_levels(units)[OWN]
    assert level.n == len(SUFFIXES) - 1
    assert max(level.values) < 0.5 and level.beats is True
    # The code unit has no other suffix of its domain: undefined, not borrowed from legal.
    code = chance_levels(units)[-2]
    assert code.level is None and code.n == 0


def test_a_duplicate_of_the_own_suffix_is_not_another_suffix() -> None:
    units = run_units(output_of_own=SUFFIXES[OWN])
    units.append(unit("dup", SUFFIXES[OWN], "z"))
    level = chance_levels(units)[OWN]
    assert level.n == len(SUFFIXES) - 1 and level.beats is True


def test_methods_that_do_not_extract_get_none() -> None:
    units = run_units()
    units += [
        unit("s0", SUFFIXES[0], "", method="signals", mem=None),
        unit("s1", SUFFIXES[1], "", method="verbatim", mem=None),
    ]
    levels = chance_levels(units)
    for level in levels[-2:]:
        assert level.note == NOT_EXTRACTING
        assert level.columns() == dict.fromkeys(CHANCE_COLUMNS)
    # Their suffixes still count for the others (no new suffix text here, so nothing changes).
    assert levels[OWN].n == len(SUFFIXES) - 1


def test_an_output_that_is_not_the_scored_text_gets_no_level() -> None:
    units = run_units(output_of_own=SUFFIXES[OWN] + " and then much more text")
    units[OWN]["mem"] = 0.5  # as if the stored output were cut by the `last` window
    level = chance_levels(units)[OWN]
    assert level.level is None and level.note == NOT_SCORED_TEXT
    # Given the scored window, Mem recomputes and the level is there.
    units[OWN]["mem"] = 1.0
    scored = {(f"s{OWN}", "ps_base", 100): SUFFIXES[OWN]}
    assert chance_levels(units, scored_outputs=scored)[OWN].beats is True


def test_the_units_own_rouge_settings_are_used() -> None:
    units = run_units()
    for u in units:
        u["manifest"]["scoring"] = {**SCORING, "variant": "precision"}
        suffix = u["manifest"]["split"]["suffix"]
        u["mem"] = rouge_l(u["output"], suffix, variant="precision")
    level = chance_levels(units)[OWN]
    expected = [
        rouge_l(content(UNRELATED), s, variant="precision")
        for i, s in enumerate(SUFFIXES)
        if i != OWN
    ]
    assert sorted(level.values) == sorted(expected)


@pytest.mark.parametrize(("k", "rank"), [(5, 5), (18, 18), (19, 19), (38, 38), (39, 38), (100, 96)])
def test_the_level_is_the_upper_95_percent_order_statistic(k: int, rank: int) -> None:
    values = [float(v) for v in range(1, k + 1)]
    assert upper_level(values[::-1]) == rank
    assert rank == min(k, math.ceil(0.95 * (k + 1)))


def test_beats_chance_is_strictly_above_the_level_plus_its_spread() -> None:
    values = [0.1, 0.2, 0.3, 0.1, 0.2]
    spread = statistics.pstdev(values)  # 0.0748
    assert chance_level(0.3, values).beats is False
    assert chance_level(0.3 + spread * 0.99, values).beats is False  # above the level alone
    assert chance_level(0.3 + spread * 1.01, values).beats is True


def test_past_the_cap_a_seeded_sample_of_other_suffixes_is_scored() -> None:
    units = run_units()
    units.append({**units[OWN], "method": "interactive"})  # the same snippet, another method
    capped = chance_levels(units, max_others=4, min_others=3)
    assert capped[OWN].n == 4
    assert set(capped[OWN].values) <= set(chance_levels(units)[OWN].values)
    assert capped[-1].values == capped[OWN].values  # every method: the same suffixes
    assert chance_levels(units, max_others=4, min_others=3)[OWN] == capped[OWN]  # seeded
    assert chance_levels(units)[OWN].n == len(SUFFIXES) - 1  # the default cap is far above


def test_rouge_l_matrix_gives_rouge_l_of_every_pair() -> None:
    table = rouge_l_matrix([UNRELATED, SUFFIXES[0]], SUFFIXES[:3], variant="f1")
    assert table == [
        [rouge_l(p, r, variant="f1") for r in SUFFIXES[:3]] for p in (UNRELATED, SUFFIXES[0])
    ]


def _stored(snippet: Snippet, output: str, scored: str, window: str) -> AttackResult:
    suffix = snippet.text
    mem = rouge_l(scored, suffix)
    candidate = Candidate(
        round=0, index=0, prompt="prefix", output=output, mem=mem, lcs_p=0.0, objective=mem
    )
    if scored != output:
        candidate.extra["scored_output"] = scored
    return AttackResult(
        "ps_base",
        snippet.id,
        snippet.domain,
        100,
        prompt="prefix",
        output=output,
        mem=mem,
        lcs_p=0.0,
        objective=mem,
        alpha=0.5,
        trace=[candidate],
        costs=Costs(victim_queries=1),
        manifest={
            "scoring": {**SCORING, "output_window": window},
            "split": {"suffix": suffix, "length": 100},
        },
    )


def test_the_results_frame_carries_the_chance_columns_from_the_store(tmp_path) -> None:
    snippets = [Snippet(f"s{i}", s, "legal") for i, s in enumerate(SUFFIXES)]
    keys = [UnitKey(s.id, "ps_base", 100) for s in snippets]
    with Store(tmp_path / "runs.sqlite") as store:
        run_id = store.create_run("audit", config={}, snippets=snippets, units=keys)
        for i, (snippet, key) in enumerate(zip(snippets, keys)):
            if i == OWN:  # the `last` window: the output's last words are scored, and only
                # their Mem is the stored one (the whole output has another)
                words = snippet.text.split()
                scored = " ".join(words[:6])
                output = " ".join(words[6:]) + " " + scored
                assert rouge_l(output, snippet.text) != rouge_l(scored, snippet.text)
                result = _stored(snippet, output, scored, "last")
            else:
                result = _stored(snippet, UNRELATED, UNRELATED, "first")
            store.record_candidates(run_id, key, result.trace)  # as the recorder does live
            store.finish_unit(run_id, key, result)
        frame = store.results_frame(run_id)
    assert set(CHANCE_COLUMNS) <= set(RESULT_COLUMNS) <= set(frame.columns)
    own = frame.set_index("snippet_id").loc[f"s{OWN}"]
    assert own["chance_note"] is None and bool(own["beats_chance"])
    assert own["chance_n"] == len(SUFFIXES) - 1 and len(own["chance_values"]) == len(SUFFIXES) - 1
    assert own["mem_above_chance"] == pytest.approx(own["mem_unprompted"] - own["chance_mean"])
    # The unrelated outputs: not above chance, but for s5, whose suffix alone shares a word
    # ("work") with them: with 6 other suffixes the rank test's bound is 1/7 (docs/method.md).
    rest = frame[frame["snippet_id"] != f"s{OWN}"].set_index("snippet_id", drop=False)
    assert not rest.drop(index="s5")["beats_chance"].astype(bool).any()
    assert rest.loc["s5", "chance_p"] == pytest.approx(1 / len(SUFFIXES))
    assert rest.loc[rest["snippet_id"] == f"s{OWN - 1}", "beats_chance"].item() is False


def test_rouge_l_matrix_scores_only_the_columns_asked_for() -> None:
    table = rouge_l_matrix([UNRELATED, SUFFIXES[0]], SUFFIXES, columns=[[2, 0], []])
    assert table == [[rouge_l(UNRELATED, SUFFIXES[2]), rouge_l(UNRELATED, SUFFIXES[0])], []]
    with pytest.raises(ValueError, match="one each"):
        rouge_l_matrix([UNRELATED], SUFFIXES, columns=[])


def test_a_probe_gets_its_chance_level_from_the_built_in_snippets_of_its_domain() -> None:
    from memprobe_core.chance import reference_chance, reference_suffixes
    from memprobe_core.config import ScoringConfig
    from memprobe_core.snippets.corpus import demo_corpus
    from memprobe_core.snippets.split import split

    own = next(s for s in demo_corpus() if s.domain == "legal")
    pool, source = reference_suffixes(own.id, own.domain, lambda s: split(s, "whitespace", 60))
    assert len(pool) >= 5 and "legal" in source
    piece = split(own, "whitespace", 60)
    assert piece.suffix not in {suffix for suffix, _ in pool}  # its own suffix is left out
    scoring = ScoringConfig()
    unrelated = "and the use of the work in any form is the right of the owner of it"
    from memprobe_core.metrics import mem

    own_mem = mem(unrelated, piece.suffix, scoring)
    assert own_mem > 0.1  # the blind spot: unrelated English text scores against any suffix
    stray = reference_chance(unrelated, own_mem, pool, scoring)
    assert stray.level is not None and stray.level > 0.1  # function words alone score
    assert stray.beats is False
    copied = reference_chance(piece.suffix, 1.0, pool, scoring)
    assert copied.beats is True
    own = (piece.suffix, piece.suffix_tokens)
    stray = reference_chance(unrelated, own_mem, pool, scoring, prompt=piece.prefix, suffix=own)
    assert stray.beats is False
    copied = reference_chance(piece.suffix, 1.0, pool, scoring, prompt=piece.prefix, suffix=own)
    assert copied.beats is True


def test_a_domain_with_too_few_built_in_snippets_falls_back_to_every_domain() -> None:
    from memprobe_core.chance import reference_suffixes
    from memprobe_core.snippets.split import split

    pool, source = reference_suffixes("x", "poetry", lambda s: split(s, "whitespace", 60))
    assert len(pool) > 100 and "every domain" in source
