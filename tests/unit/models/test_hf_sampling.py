"""The decoding loop's sampler (``hf_decode.draw``) samples the distribution it is given."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

from memprobe_core.models.hf_decode import BatchDecoding, _picker, draw

PROBS = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.04, 0.01, 0.0, 0.0], dtype=torch.float64)


def _counts(picker_or_draw, rows: int = 400, calls: int = 50) -> torch.Tensor:
    counts = torch.zeros(len(PROBS), dtype=torch.long)
    for _ in range(calls):
        tokens = picker_or_draw(PROBS.expand(rows, -1))
        counts += torch.bincount(tokens, minlength=len(PROBS))
    return counts


def test_frequencies_follow_the_probabilities():
    generator = torch.Generator().manual_seed(0)
    counts = _counts(lambda p: draw(p, generator))
    assert counts[6:].sum() == 0  # zero-probability entries never come out
    drawable = PROBS > 0
    expected = PROBS[drawable] * counts.sum()
    # 20,000 draws; seeded, so the verdict is fixed: a wrong sampler (say, the next entry
    # after the one u falls in) gives p-values of ~0.
    assert chisquare(counts[drawable].double(), expected).pvalue > 1e-3


def test_same_distribution_as_torch_multinomial_through_the_picker():
    """Temperature and top-p (transformers' warpers), then the draw: frequencies as multinomial's."""
    spec = BatchDecoding(max_new_tokens=1, temperature=0.7, top_p=0.9, stop_ids=(), pad_id=0)
    logits = torch.log(PROBS.float().clamp_min(1e-12))
    pick = _picker(spec, torch.Generator().manual_seed(1))  # one stream: 20,000 distinct draws
    ours = _counts(lambda p: pick(logits.expand(400, -1)))
    generator = torch.Generator().manual_seed(2)
    scaled = torch.softmax(logits / 0.7, dim=-1)
    nucleus = torch.cumsum(scaled, 0) - scaled < 0.9  # higher-ranked mass below top_p: kept
    kept = torch.where(nucleus, scaled, torch.zeros_like(scaled))
    theirs = torch.bincount(
        torch.multinomial(kept.expand(20_000, -1), 1, generator=generator).squeeze(-1),
        minlength=len(PROBS),
    )
    assert torch.equal(ours > 0, theirs > 0)  # the same tokens are drawable at all
    drawable = theirs > 0
    table = torch.stack([ours[drawable], theirs[drawable]]).double()
    expected = table.sum(0, keepdim=True) / 2
    assert chisquare(table.flatten(), expected.expand_as(table).flatten()).pvalue > 1e-3


def test_top_k_through_the_picker_samples_the_k_most_likely_renormalised():
    """Top-k (transformers' warper) then the draw: only the 3 most likely come out, in the
    proportions of their own probabilities."""
    spec = BatchDecoding(
        max_new_tokens=1, temperature=1.0, top_p=1.0, stop_ids=(), pad_id=0, top_k=3
    )
    logits = torch.log(PROBS.float().clamp_min(1e-12))
    pick = _picker(spec, torch.Generator().manual_seed(3))  # one stream: 20,000 distinct draws
    counts = _counts(lambda p: pick(logits.expand(400, -1)))
    assert counts[3:].sum() == 0
    kept = PROBS[:3] / PROBS[:3].sum()
    assert chisquare(counts[:3].double(), kept * counts.sum()).pvalue > 1e-3


def test_seeded_draws_repeat():
    first = draw(PROBS.expand(50, -1), torch.Generator().manual_seed(5))
    again = draw(PROBS.expand(50, -1), torch.Generator().manual_seed(5))
    other = draw(PROBS.expand(50, -1), torch.Generator().manual_seed(6))
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_a_uniform_rounded_up_to_the_total_still_draws_a_possible_token(monkeypatch):
    def ones(shape, generator=None, dtype=None, device=None):
        return torch.ones(shape, dtype=dtype, device=device)

    monkeypatch.setattr(torch, "rand", ones)  # u = 1 × total: past every entry's cumulative mass
    assert draw(PROBS.expand(3, -1), None).tolist() == [5, 5, 5]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "all zero"])
def test_broken_probabilities_are_refused(bad):
    probs = torch.zeros_like(PROBS) if bad == "all zero" else PROBS.clone()
    if bad != "all zero":
        probs[2] = bad
    with pytest.raises(ValueError, match="not finite"):
        draw(probs.expand(2, -1), torch.Generator().manual_seed(0))
