"""M-MEM pairwise and all_pairs on constructed confidences (ties included); NerScores tables."""

from __future__ import annotations

import numpy as np
import pytest

from memprobe_core.ner.names import NamePair
from memprobe_core.ner.prompts import Prompt
from memprobe_core.ner.scoring import NerScores, m_mem, m_mem_all_pairs, m_mem_pairwise


def test_pairwise_counts_strict_wins_and_ties_miss() -> None:
    c_in = np.array([0.9, 0.5, 0.3, 0.8])
    c_out = np.array([0.1, 0.5, 0.4, 0.7])
    assert m_mem_pairwise(c_in, c_out) == pytest.approx(2 / 4)  # the tie (0.5, 0.5) is a miss


def test_all_pairs_counts_ties_half() -> None:
    c_in = np.array([0.9, 0.5])
    c_out = np.array([0.5, 0.1])
    # 0.9>0.5, 0.9>0.1, 0.5=0.5 (½), 0.5>0.1 → 3.5 / 4
    assert m_mem_all_pairs(c_in, c_out) == pytest.approx(3.5 / 4)


def test_all_pairs_matches_brute_force_with_many_ties() -> None:
    rng = np.random.default_rng(0)
    c_in = rng.integers(0, 5, size=(3, 40)) / 4  # few distinct values → many ties
    c_out = rng.integers(0, 5, size=(3, 30)) / 4
    brute = [
        np.mean([(a > b) + 0.5 * (a == b) for a in c_in[p] for b in c_out[p]]) for p in range(3)
    ]
    np.testing.assert_allclose(m_mem_all_pairs(c_in, c_out), brute)


def test_all_pairs_differs_from_pairwise_on_purpose() -> None:
    c_in = np.array([0.9, 0.2])
    c_out = np.array([0.8, 0.1])
    # pairwise: 0.9>0.8 and 0.2>0.1 → 1; all pairs also compares 0.2 with 0.8 (a loss) → 3/4.
    assert m_mem(c_in, c_out, "pairwise") == pytest.approx(1.0)
    assert m_mem(c_in, c_out, "all_pairs") == pytest.approx(0.75)


def test_per_prompt_rows_and_bad_input() -> None:
    c_in = np.array([[1.0, 1.0], [0.0, 1.0]])
    c_out = np.array([[0.5, 0.5], [0.5, 0.5]])
    np.testing.assert_allclose(m_mem_pairwise(c_in, c_out), [1.0, 0.5])
    with pytest.raises(ValueError):
        m_mem_pairwise(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="unknown"):
        m_mem(c_in, c_out, "auc")  # type: ignore[arg-type]


def _scores() -> NerScores:
    prompts = [
        Prompt("Did {name} call?", "interrogative"),
        Prompt("{name} said so.", "declarative"),
    ]
    pairs = [NamePair("Ann Lee", "Bo Kim"), NamePair("Cy Park", "Di Wu"), NamePair("=Ed", "Fay")]
    conf_in = np.array([[0.9, 0.8, 0.7], [0.2, 0.9, 0.5]])
    conf_out = np.array([[0.1, 0.9, 0.6], [0.3, 0.1, 0.5]])
    return NerScores(prompts, pairs, conf_in, conf_out, "pairwise", model={"model_id": "x"})


def test_prompt_table_ranks_and_properties() -> None:
    table = _scores().prompt_table()
    assert table["m_mem"].tolist() == pytest.approx([2 / 3, 1 / 3])
    assert table["rank"].tolist() == [1, 2]
    assert table["name_position"].tolist() == ["middle", "start"]
    assert table["length"].tolist() == [3, 3]
    assert table["gap"][0] == pytest.approx((2.4 - 1.6) / 3)


def test_name_table_is_long_format() -> None:
    names = _scores().name_table()
    assert len(names) == 6
    row = names[(names.prompt_id == 1) & (names.pair_id == 2)].iloc[0]
    assert (row.name_in, row.conf_in, row.conf_out, bool(row.in_higher)) == ("=Ed", 0.5, 0.5, False)


def test_subset_and_metric_switch() -> None:
    scores = _scores()
    sub = scores.subset([0, 2])
    np.testing.assert_allclose(sub.m_mem, [1.0, 0.0])
    assert scores.with_metric("all_pairs").metric == "all_pairs"
    summary = scores.summary()
    assert (
        summary["spread"] == pytest.approx(1 / 3) and summary["best_prompt"] == "Did {name} call?"
    )


def test_shape_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="prompts, pairs"):
        NerScores([Prompt("{name}")], [NamePair("a", "b")], np.ones((2, 1)), np.ones((2, 1)))
