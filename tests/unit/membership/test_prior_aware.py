"""The prior-aware check (docs/method.md, "Prior-aware check"): a suffix the model writes after
any prefix is "common, not memorised", one it writes only after its own prefix is "memorised",
one it does not write is "not memorised" — on an exact bigram model whose probabilities are set by
hand, so every log-likelihood is known in closed form — and the check rides on the unit's
measurement (``--pam``), in ``memprobe probe --json``, and refuses a black-box victim."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from memprobe_core.measuring import prior_aware as stat
from memprobe_core.measuring.prior_aware import (
    COMMON,
    MEMORISED,
    NOT_MEMORISED,
    PAM_VERDICTS,
    PriorAwareCheck,
    describe_prior_aware,
)
from memprobe_core.membership import MeasureOptions
from memprobe_core.membership import prior_aware as pam
from tests.helpers.tiny_models import tiny_hf_generator

VOCAB = 50
STRONG = 10.0  # a logit this far above the rest: probability ≈ 0.998 among 50 tokens
OWN_LAST = 5  # the own prefix's last token
TIED = [20, 21, 22, 23]  # likely only after OWN_LAST
COMMON_SUFFIX = [30, 31, 32, 33]  # likely after any token
UNLIKELY = [40, 41, 42, 43]  # every token 1/50 after anything
# 19 unrelated prefixes ending in tokens other than OWN_LAST and the suffixes' own.
UNRELATED_LAST = [*range(6, 20), *range(24, 29)]


class Bigram:
    """A causal LM whose next-token logits depend on the last token only (``table[token]``),
    called as a Hugging Face model is (``logits_to_keep`` keeps the last positions)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def __call__(self, input_ids: Any, logits_to_keep: int = 0, **_: Any) -> Any:
        logits = self.table[input_ids]  # (B, T, V)
        return SimpleNamespace(logits=logits[:, -logits_to_keep:] if logits_to_keep else logits)


def bigram_table() -> Any:
    import torch

    table = torch.zeros(VOCAB, VOCAB)
    table[OWN_LAST, TIED[0]] = STRONG
    table[:, COMMON_SUFFIX[0]] = STRONG
    # Inside a suffix its own chain rules.
    table[[*TIED[:-1], *COMMON_SUFFIX[:-1]], COMMON_SUFFIX[0]] = 0.0
    for suffix in (TIED, COMMON_SUFFIX):
        for a, b in zip(suffix, suffix[1:]):
            table[a, b] = STRONG
    return table


def closed_form(table: Any, prefix: list[int], suffix: list[int]) -> float:
    """``log P(suffix | prefix)`` of the bigram model, written out with numpy."""
    logits = table.numpy().astype(np.float64)
    total, previous = 0.0, prefix[-1]
    for token in suffix:
        row = logits[previous]
        total += row[token] - (row.max() + math.log(np.exp(row - row.max()).sum()))
        previous = token
    return total


def check_of(suffix: list[int], table: Any = None) -> PriorAwareCheck:
    table = bigram_table() if table is None else table
    unrelated = [[1, 2, last] for last in UNRELATED_LAST]
    return pam.prior_aware_check(Bigram(table), [], [1, 2, OWN_LAST], suffix, unrelated)


def test_the_log_likelihoods_are_the_models_own_in_closed_form() -> None:
    table = bigram_table()
    check = check_of(TIED, table)
    assert check.own == pytest.approx(closed_form(table, [1, 2, OWN_LAST], TIED), abs=1e-5)
    expected = [closed_form(table, [1, 2, last], TIED) for last in UNRELATED_LAST]
    assert check.unrelated == pytest.approx(expected, abs=1e-5)
    # 20 rows cross the calls of 8: each row scores as it does alone.
    alone = [
        pam.suffix_log_likelihoods(Bigram(table), [[1, 2, last, *TIED]], len(TIED))[0]
        for last in UNRELATED_LAST
    ]
    assert check.unrelated == pytest.approx(alone, abs=1e-6)


def test_a_suffix_likely_only_after_its_own_prefix_is_memorised() -> None:
    check = check_of(TIED)
    assert check.p_value == pytest.approx(1 / 20)  # above all 19 unrelated prefixes
    assert check.log10_ratio > stat.PAM_MARGIN_LOG10
    assert check.own_token_p > stat.LIKELY_TOKEN_P > check.prior_token_p
    assert check.verdict == MEMORISED


def test_a_suffix_likely_after_any_prefix_is_common_not_memorised() -> None:
    check = check_of(COMMON_SUFFIX)
    # Likely after its own prefix, and even more after the unrelated ones (there the tied
    # suffix does not compete for the first token).
    assert check.own_token_p > stat.LIKELY_TOKEN_P and check.prior_token_p > 0.99
    assert check.log10_ratio < 0 and check.p_value == 1.0
    assert check.verdict == COMMON


def test_a_suffix_the_model_does_not_write_is_not_memorised() -> None:
    table = bigram_table()
    check = check_of(UNLIKELY, table)
    own = closed_form(table, [1, 2, OWN_LAST], UNLIKELY)
    assert check.own_token_p == pytest.approx(math.exp(own / 4), rel=1e-4)
    assert check.own_token_p < 1e-3 and check.p_value == 1.0  # as unlikely everywhere
    assert check.verdict == NOT_MEMORISED


def test_the_statistic_and_its_thresholds_by_hand() -> None:
    ln10 = math.log(10)
    # Own 10^1.5 times the prior, above all 19: memorised.
    check = PriorAwareCheck(own=-1.0, unrelated=(-1.0 - 1.5 * ln10,) * 19, tokens=2)
    assert check.log10_ratio == pytest.approx(1.5) and check.p_value == 0.05
    assert check.verdict == MEMORISED
    # Above all 19, but by less than the margin: common.
    near = PriorAwareCheck(own=-1.0, unrelated=(-1.0 - 0.5 * ln10,) * 19, tokens=2)
    assert near.verdict == COMMON
    # Ten times the prior on mean, but two unrelated prefixes beat it: p = 3/20 > 0.05.
    beaten = PriorAwareCheck(own=-1.0, unrelated=(-0.5, -0.5, *(-30.0,) * 17), tokens=2)
    assert beaten.p_value == pytest.approx(3 / 20) and beaten.verdict == COMMON
    # The prior is the log of the MEAN probability, not the mean log.
    mixed = PriorAwareCheck(own=0.0, unrelated=(math.log(0.5), -math.inf), tokens=1)
    assert mixed.prior == pytest.approx(math.log(0.25))
    record = PriorAwareCheck(own=-50.0, unrelated=(-math.inf,) * 5, tokens=10).to_record("x")
    assert record["pam_log_ratio"] is None and record["pam_verdict"] == NOT_MEMORISED


def test_rows_must_have_one_length() -> None:
    with pytest.raises(ValueError, match="own prefix's length"):
        pam.check_rows([], [1, 2, 3], [4], [[1, 2]])
    with pytest.raises(ValueError, match="at least one unrelated prefix"):
        pam.prior_aware_check(Bigram(bigram_table()), [], [1], [2], [])


# --- on a Hugging Face model: the unit's measurement ------------------------------------------


@pytest.fixture(scope="module")
def victim() -> Any:
    return tiny_hf_generator(seed=5, adds_bos=True)


@pytest.fixture(autouse=True)
def fresh_cache() -> Any:
    pam.clear_cache()
    yield
    pam.clear_cache()


def _piece(victim: Any, length: int = 24) -> Any:
    from memprobe_core.snippets.corpus import demo_corpus
    from memprobe_core.snippets.split import split

    snippet = next(s for s in demo_corpus() if s.domain == "legal")
    return split(snippet, victim.tokenizer, length)


def test_the_unrelated_prefixes_are_other_snippets_of_the_domain_cut_to_the_prefix(victim) -> None:
    piece = _piece(victim)
    n_prefix = len(piece.prefix_ids)
    prefixes, source = pam.unrelated_prefixes(victim.tokenizer, piece, n_prefix, 19)
    assert len(prefixes) == 19 and source == "19 built-in legal snippets"
    assert all(len(p) == n_prefix for p in prefixes)
    assert list(piece.prefix_ids) not in prefixes
    again, _ = pam.unrelated_prefixes(victim.tokenizer, piece, n_prefix, 19)
    assert again == prefixes  # seeded by the snippet's id


def test_the_check_is_measured_beside_p_z_when_asked(victim) -> None:
    from memprobe_core.attacks.model_set import ModelSet
    from memprobe_core.attacks.result import AttackResult
    from memprobe_core.membership.measure import measure_result

    piece = _piece(victim)

    def result() -> AttackResult:
        return AttackResult(
            "ps_base", piece.snippet.id, "legal", 24, piece.prefix, "x", 0, 0, 0, 0.5
        )

    on = measure_result(result(), piece, ModelSet(victim=victim), MeasureOptions(pam=True))
    verbatim = on.verbatim
    assert verbatim["pam_verdict"] in PAM_VERDICTS and verbatim["pam_prefixes"] == 19
    assert 0 < verbatim["pam_p"] <= 1 and "log10_p_z" in verbatim
    # The stored numbers are the check's own: recompute it from the rows.
    ids = [*piece.prefix_ids, *piece.suffix_ids]
    prefixes, _ = pam.unrelated_prefixes(victim.tokenizer, piece, len(piece.prefix_ids), 19)
    front = [victim.tokenizer.bos_token_id]
    check = pam.prior_aware_check(
        victim.torch_model, front, ids[: len(piece.prefix_ids)], piece.suffix_ids, prefixes
    )
    assert verbatim["pam_p"] == check.p_value
    assert verbatim["pam_log_ratio"] == pytest.approx(check.log10_ratio, abs=1e-9)
    assert describe_prior_aware(verbatim).startswith(f"Prior-aware check: {check.verdict}.")
    off = measure_result(result(), piece, ModelSet(victim=victim), MeasureOptions())
    assert not any(key.startswith("pam_") for key in off.verbatim)


def test_a_black_box_victim_is_not_measured_and_says_why(victim) -> None:
    from memprobe_core.models import load

    record = pam.measure_prior_aware(load("fake:victim"), _piece(victim), 19)
    assert record == {"pam_not_measured": pam.BLACK_BOX}
    assert describe_prior_aware(record) == f"Prior-aware check: not measured: {pam.BLACK_BOX}"
