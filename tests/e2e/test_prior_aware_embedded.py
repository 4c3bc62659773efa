"""The prior-aware check on the embedded Gemma-3-270M (262k vocabulary, a BOS in front, sliding-
window layers; docs/method.md §24): the rows of one check, scored in calls of several rows, give
each row's log-likelihood as a call of that row alone does, and the record is the statistic of
those numbers."""

from __future__ import annotations

import pytest

from memprobe_core.measuring.prior_aware import PAM_VERDICTS, PriorAwareCheck
from memprobe_core.membership import prior_aware as pam
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import split

K = 9  # two calls of rows (8 + 2), cheap on a CPU


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_check_on_gemma_scores_each_row_as_it_scores_alone(embedded_base) -> None:
    tokenizer = embedded_base.tokenizer
    snippet = next(s for s in demo_corpus() if s.id.startswith("legal:apache"))
    piece = split(snippet, tokenizer, 64)
    pam.clear_cache()
    record = pam.measure_prior_aware(embedded_base, piece, K)
    assert "pam_not_measured" not in record, record
    assert record["pam_verdict"] in PAM_VERDICTS and record["pam_prefixes"] == K
    prefixes, source = pam.unrelated_prefixes(tokenizer, piece, len(piece.prefix_ids), K)
    assert record["pam_source"] == source == f"{K} built-in legal snippets"
    front = [tokenizer.bos_token_id]  # Gemma's tokenizer puts its BOS before a text
    own = list(piece.prefix_ids)
    rows = pam.check_rows(front, own, piece.suffix_ids, prefixes)
    n = len(piece.suffix_ids)
    batched = pam.suffix_log_likelihoods(embedded_base.torch_model, rows, n)
    alone = [pam.suffix_log_likelihoods(embedded_base.torch_model, [r], n)[0] for r in rows]
    assert batched == pytest.approx(alone, abs=1e-3 * n)
    check = PriorAwareCheck(own=batched[0], unrelated=tuple(batched[1:]), tokens=n)
    assert record["pam_p"] == check.p_value and record["pam_verdict"] == check.verdict
