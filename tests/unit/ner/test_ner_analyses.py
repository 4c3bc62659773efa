"""Analyses on constructed scores: ranking, spread, properties, Kendall τ, ensembles,
leave-one-token-out on a scripted model, attention on a tiny eager BERT."""

from __future__ import annotations

import numpy as np
import pytest

from memprobe_core.ner import analyses
from memprobe_core.ner.attention import NAME_LABEL, compare_attention
from memprobe_core.ner.importance import (
    best_worst_importance,
    iterative_importance,
    split_tokens,
)
from memprobe_core.ner.names import NamePair
from memprobe_core.ner.prompts import Prompt, fill
from memprobe_core.ner.scoring import NerScores
from tests.helpers.ner_models import tiny_ner

PROMPTS = [
    Prompt("Did {name} call?", "interrogative"),
    Prompt("{name} said so.", "declarative"),
    Prompt("Tell {name} to come back home now, please.", "imperative"),
]
PAIRS = [NamePair(f"in{i}", f"out{i}") for i in range(4)]
# Rows: prompts; columns: pairs.
CONF_IN = np.array([[0.9, 0.8, 0.7, 0.6], [0.2, 0.9, 0.5, 0.4], [0.6, 0.6, 0.9, 0.1]])
CONF_OUT = np.array([[0.1, 0.9, 0.6, 0.5], [0.3, 0.1, 0.5, 0.5], [0.5, 0.7, 0.2, 0.2]])


def scores(metric: str = "pairwise") -> NerScores:
    return NerScores(PROMPTS, PAIRS, CONF_IN, CONF_OUT, metric)  # type: ignore[arg-type]


def test_rank_and_spread() -> None:
    s = scores()
    np.testing.assert_allclose(s.m_mem, [0.75, 0.25, 0.5])
    ranked = analyses.rank_prompts(s)
    assert ranked["prompt_id"].tolist() == [0, 2, 1] and ranked["rank"].tolist() == [1, 2, 3]
    spread = analyses.spread(s)
    assert spread["spread"] == pytest.approx(0.5)
    assert (spread["best_id"], spread["worst_id"]) == (0, 1)


def test_m_mem_by_property() -> None:
    by_type = analyses.m_mem_by_property(scores(), "type").set_index("group")
    assert by_type.loc["imperative", "mean"] == pytest.approx(0.5)
    by_length = analyses.property_groups(scores(), "length")
    assert by_length["group"].tolist() == ["≤5", "≤5", "6-8"]  # 3, 3 and 8 words
    positions = analyses.m_mem_by_property(scores(), "name_position").set_index("group")
    assert positions.loc["middle", "count"] == 2 and positions.loc[
        "middle", "mean"
    ] == pytest.approx(0.625)
    with pytest.raises(ValueError):
        analyses.property_groups(scores(), "colour")  # type: ignore[arg-type]


def test_kendall_tau_b_known_values() -> None:
    assert analyses.kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert analyses.kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # scipy.stats.kendalltau's documented example (tau-b, with ties): -0.47140452079103173.
    assert analyses.kendall_tau_b([12, 2, 1, 12, 2], [1, 4, 7, 1, 0]) == pytest.approx(
        -0.47140452079103173
    )
    assert np.isnan(analyses.kendall_tau_b([1, 1, 1], [1, 2, 3]))


def test_tau_matrix_and_dev_test_tau() -> None:
    matrix = analyses.tau_matrix({"a": [1, 2, 3], "b": [3, 2, 1], "c": [1, 3, 2]})
    assert matrix.loc["a", "a"] == pytest.approx(1.0) and matrix.loc["a", "b"] == pytest.approx(
        -1.0
    )
    assert matrix.loc["a", "c"] == pytest.approx(1 / 3)
    s = scores()
    dev, test = s.subset([0, 2]), s.subset([1, 3])
    np.testing.assert_allclose(dev.m_mem, [1.0, 0.0, 1.0])
    np.testing.assert_allclose(test.m_mem, [0.5, 0.5, 0.0])
    # one discordant pair (1, 2), the other two tied in one vector: -1 / sqrt(2 * 2)
    assert analyses.dev_test_tau(dev, test) == pytest.approx(-0.5)


def test_ensembles_by_hand() -> None:
    s = scores()
    # mean over prompts: in = [.5667, .7667, .7, .3667], out = [.3, .5667, .4333, .4] → 3/4
    assert analyses.ensemble_m_mem(s, "mean") == pytest.approx(0.75)
    # max: in [.9,.9,.9,.6], out [.5,.9,.6,.5] → pairs 0,2,3 win, 1 ties → 3/4
    assert analyses.ensemble_m_mem(s, "max") == pytest.approx(0.75)
    # min: in [.2,.6,.5,.1], out [.1,.1,.2,.2] → 3/4
    assert analyses.ensemble_m_mem(s, "min") == pytest.approx(0.75)
    # votes per pair (in>out, tie ½): [2, 1, 2.5, 1] of 3 → [1, 0, 1, 0] → ½
    assert analyses.ensemble_m_mem(s, "majority_vote") == pytest.approx(0.5)
    # weights only on prompt 1 = prompt 1 alone
    assert analyses.ensemble_m_mem(s, "score_weighted", weights=[0, 1, 0]) == pytest.approx(0.25)
    assert analyses.ensemble_m_mem(s, "max", prompt_ids=[1]) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="one weight per"):
        analyses.ensemble_m_mem(s, "score_weighted")


def test_majority_vote_all_pairs_matches_brute_force() -> None:
    s = scores("all_pairs")
    k = len(PROMPTS)
    total = 0.0
    for i in range(4):
        for j in range(4):
            votes = sum(
                (CONF_IN[p, i] > CONF_OUT[p, j]) + 0.5 * (CONF_IN[p, i] == CONF_OUT[p, j])
                for p in range(k)
            )
            total += 1.0 if votes > k / 2 else 0.5 if votes == k / 2 else 0.0
    assert analyses.ensemble_m_mem(s, "majority_vote") == pytest.approx(total / 16)


def test_ensemble_table_uses_dev_ranking() -> None:
    s = scores()
    dev, test = s.subset([0, 1]), s.subset([2, 3])
    table = analyses.ensemble_table(dev, test, top_k=(1, 2, 10))
    assert sorted(table["k"].unique()) == [1, 2, 3]
    assert set(table["method"]) == set(analyses.ENSEMBLE_METHODS)
    best_dev = int(np.argmax(dev.m_mem))
    one = table[(table.k == 1) & (table.method == "mean")].iloc[0]
    assert (
        one.m_mem_test == pytest.approx(test.m_mem[best_dev]) == pytest.approx(one.best_single_test)
    )


class ScriptedModel:
    """Confidence of in-names rises with the words "visited" (+0.1) and "the" (+0.05)."""

    def confidences(self, prompts, names, *, batch_size=64, on_progress=None):
        rows = []
        for prompt in prompts:
            text = prompt if isinstance(prompt, str) else prompt.text
            words = text.split()
            bonus = 0.1 * ("visited" in words) + 0.05 * ("the" in words)
            row = []
            for name in names:
                j = int(name[-1])
                row.append(0.5 + bonus if name.startswith("in") else 0.5 + 0.02 * j)
            rows.append(row)
        return np.array(rows)


def test_split_tokens_round_trip() -> None:
    assert [t for _, t in split_tokens("Don't call {name}, ok?")] == [
        "Don't",
        "call",
        "{name}",
        ",",
        "ok",
        "?",
    ]


def test_iterative_importance_follows_figure_4() -> None:
    pairs = [NamePair(f"in{j}", f"out{j}") for j in range(10)]
    prompt = "Anna visited the park with {name} again ."
    least = iterative_importance(ScriptedModel(), prompt, pairs, remove="least", steps=2)
    first = least.steps[0]
    tokens = least.tokens
    assert first.m_mem == pytest.approx(0.8)  # bonus .15 beats out_j for j ≤ 7
    assert first.importance[tokens.index("visited")] == pytest.approx(0.8 - 0.3)
    assert first.importance[tokens.index("the")] == pytest.approx(0.8 - 0.5)
    assert np.isnan(first.importance[tokens.index("{name}")])
    assert first.removed == tokens.index("Anna")  # least important (0), first of the ties
    assert least.steps[1].prompt == "visited the park with {name} again ."
    assert len(least.steps) == 3 and least.steps[-1].removed is None
    most = iterative_importance(ScriptedModel(), prompt, pairs, remove="most")
    assert [most.tokens[s.removed] for s in most.steps[:2]] == ["visited", "the"]
    assert most.steps[-1].prompt == "{name}" and len(most.steps) == 8
    heat = most.heatmap()
    assert heat["z"].shape == (8, len(tokens))
    assert np.nanmax(np.abs(heat["z"][0])) == pytest.approx(1.0)
    assert heat["text"][1][tokens.index("visited")] == ""  # removed after step 0
    best, worst = best_worst_importance(
        ScriptedModel(), prompt, "Call {name} now .", pairs, steps=1
    )
    assert best.remove == "least" and worst.remove == "most" and len(worst.steps) == 2


def test_attention_in_vs_out_on_tiny_bert() -> None:
    ner = tiny_ner(eager=True)
    pairs = [NamePair("john smithson", "anna"), NamePair("kim park", "maria lee")]
    comparison = compare_attention(ner, "hello {name} .", pairs)
    assert comparison.labels == ["[CLS]", "hello", NAME_LABEL, ".", "[SEP]"]
    assert comparison.in_train.shape == (5,) and comparison.per_name_out.shape == (2, 5)
    np.testing.assert_allclose(comparison.per_name_in.sum(1), 1.0, atol=1e-5)
    # The in-train mean is the mean of per-name rows computed from the raw attention tensor.
    text, start, end = fill("hello {name} .", "anna")
    weights, tokens = ner.attentions(text)
    row = weights.mean((0, 1))[tokens.index("anna")]
    expected = [row[0], row[1], row[2], row[3], row[4]]
    np.testing.assert_allclose(comparison.per_name_out[0], expected, atol=1e-5)
    heat = comparison.heatmap()
    assert heat["z"].shape == (2, 5) and heat["y"] == ["in-train", "out-of-train"]
