"""What is measured beside each extraction result: :class:`MeasureOptions`, part of every run's
options (``AttackOptions.measure``).

It sits below the methods, with the pure scores whose parameters it holds
(:mod:`.dc_pdd`, :mod:`.pac`, :mod:`.sampler`), so that ``attacks`` reads it without importing
``membership``, which reads the methods' results (the layers: tests/unit/test_architecture.py).
The signals themselves and their registry are in :mod:`memprobe_core.membership`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from memprobe_core.measuring.dc_pdd import DEFAULT_DC_PDD_CAP, TokenFrequencies
from memprobe_core.measuring.inextractability import InextractabilityOptions, declared_as
from memprobe_core.measuring.near_verbatim import (
    DEFAULT_BEAM_WIDTH,
    DEFAULT_EDITS,
    MAX_BEAM_WIDTH,
    check_edits,
)
from memprobe_core.measuring.pac import (
    DEFAULT_PAC_HIGH_PERCENT,
    DEFAULT_PAC_LOW_PERCENT,
    DEFAULT_PAC_SWAP_RATE,
    MAX_PAC_AUGMENTATIONS,
)
from memprobe_core.measuring.prior_aware import (
    DEFAULT_PAM_PREFIXES,
    MAX_PAM_PREFIXES,
    PAM_MIN_PREFIXES,
)
from memprobe_core.measuring.sampler import (
    DEFAULT_DISCOVER_P,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_K,
    DEFAULT_TOP_P,
    SamplingScheme,
)
from memprobe_core.option_fields import check_options, option

DEFAULT_MIN_K_PERCENT = 20.0  # Shi et al. 2024 report k = 20 as their default
DEFAULT_EXTRACT_K = 50  # Carlini et al. 2023 ("Quantifying Memorization") use 50-token suffixes
# Labelled texts per class that ReCaLL / Con-ReCall put in front of every text. Off by default:
# the texts used are left out of the evaluated set, and each shot lengthens every forward pass.
MAX_RECALL_SHOTS = 32
# Continuations SaMIA samples per snippet and length. Off by default: each sample is a decode of
# len(suffix) tokens; its paper and reference code use 10.
MAX_SAMIA_SAMPLES = 64


@dataclass(frozen=True)
class MeasureOptions:
    """What is measured beside each result (recorded in the run's config).

    Attributes:
        signals: compute membership signals (white-box victims; skipped for black-box ones).
        min_k_percent: k of Min-K% and Min-K%++, in percent of the text's tokens (0 < k ≤ 100).
        extract_k: k of k-extractability: the first k suffix tokens must come out exactly.
        recall_shots: labelled texts of each class put in front of every text for ReCaLL and
            Con-ReCall (0: those two are not measured). An audit picks them
            (:func:`memprobe_core.membership.recall.with_recall_prefixes`) and fills the three
            fields below; the report leaves those texts out of the membership table.
        recall_prefix_ids: the snippet ids of the texts picked (members, then non-members).
        recall_member_prefix / recall_nonmember_prefix: their texts, in the order used.
        samia_samples: continuations of the prefix SaMIA samples from the victim per snippet
            and length (0: SaMIA is not measured; its paper uses 10), in one generate call
            seeded with the run's seed (:mod:`memprobe_core.membership.samia`).
        dc_pdd_frequencies: DC-PDD's token counts of a reference corpus under the victim's
            tokenizer (``None``: DC-PDD is not measured); counted once when an audit starts
            (:mod:`memprobe_core.measuring.dc_pdd`), from ``--dc-pdd-corpus`` or the audit's
            own non-members.
        dc_pdd_cap: ``a``, DC-PDD's upper bound of each token's score (> 0).
        pac_augmentations: word-swapped copies of each text PAC compares it with (0: PAC is
            not measured; its paper uses 5); they go through the victim in the signals' one
            forward call (:mod:`memprobe_core.measuring.pac`).
        pac_swap_rate: swaps per copy, as a share of the text's words (0 < r ≤ 1).
        pac_low_percent / pac_high_percent: the lowest / highest k % of the token log-probs
            whose means the polarized distance subtracts (0 < k ≤ 100).
        pz: measure probabilistic extraction: ``log10_p_z``, the log10 probability that one
            sample of the victim under the scheme below writes the true suffix after the prefix,
            and ``n_at_p``, the samples needed to see it with probability ``discover_p``
            (:mod:`memprobe_core.membership.extraction_probability`; one forward pass per
            snippet and length).
        pz_temperature / pz_top_k / pz_top_p: that sampling scheme (default: temperature 1,
            top-k 40, no top-p, as Hayes et al.; temperature 0 is greedy: p_z is 0 or 1;
            ``top_k`` 0 and ``top_p`` 1 turn those off).
        near_verbatim: measure the near-verbatim lower bound under the p_z scheme
            (:mod:`memprobe_core.membership.near_verbatim`; a beam search of a white-box victim).
        near_verbatim_edits: its edit budget, a share of the suffix below 1 or whole tokens.
        near_verbatim_beams: its beam width.
        discover_p: the chance of extraction ``n_at_p`` is sized for (0 < p < 1).
        extraction_window_tokens / extraction_rank_cap: ``l`` and ``m`` of the rank-based
            extraction cost measured from p_z's pass (``extraction_bits``; docs/method.md §21,
            :class:`InextractabilityOptions`, whose declarations these repeat).
    """

    signals: bool = option(
        True,
        help="membership signals of each snippet: one extra forward pass of a white-box victim "
        "per snippet and length, or two log-prob requests to a black-box victim's server",
        switch_help="skip the membership signals (per snippet and length: one extra forward "
        "pass of a white-box victim, or two log-prob requests to a black-box victim's server; "
        "default: computed)",
        flag="--no-signals",
    )
    min_k_percent: float = option(
        DEFAULT_MIN_K_PERCENT,
        help="k of the Min-K% and Min-K%++ signals, in percent of the text's tokens",
        low=0,
        low_open=True,
        high=100,
        example="20",
        flag="--min-k-percent",
        metavar="K",
    )
    extract_k: int = option(
        DEFAULT_EXTRACT_K,
        help="k of k-extractability: the output's first k tokens must equal the suffix's",
        low=1,
        example="50",
        flag="--extract-k",
        metavar="K",
    )
    recall_shots: int = option(
        0,
        help="labelled audits: put the first N members and the first N non-members in front of "
        "every text to measure ReCaLL and Con-ReCall; those 2N texts are left out of the "
        "membership table (0: off)",
        low=0,
        high=MAX_RECALL_SHOTS,
        flag="--recall-shots",
        metavar="N",
        page="ReCaLL shots",
        needs_labels=True,
        commands=("audit",),
    )
    recall_prefix_ids: tuple[str, ...] = ()
    recall_member_prefix: tuple[str, ...] = ()
    recall_nonmember_prefix: tuple[str, ...] = ()
    samia_samples: int = option(
        0,
        help="measure SaMIA: sample N continuations of each prefix from the victim (temperature "
        "1, seeded with the run's seed) and score them by ROUGE-1 recall against the true "
        "suffix; needs no log-probs (its paper uses 10; 0: off)",
        low=0,
        high=MAX_SAMIA_SAMPLES,
        example="10",
        flag="--samia-samples",
        metavar="N",
        page="SaMIA samples",
    )
    dc_pdd_frequencies: TokenFrequencies | None = None
    dc_pdd_cap: float = option(
        DEFAULT_DC_PDD_CAP,
        help="DC-PDD: upper bound a of each token's score",
        low=0,
        low_open=True,
        example="0.01",
        flag="--dc-pdd-cap",
        metavar="A",
        commands=("audit",),
    )
    pac_augmentations: int = option(
        0,
        help="measure PAC: compare each text's polarized distance with N copies of it with words "
        "swapped; the copies join the signals' forward call (N more rows) or the server's "
        "log-prob requests (N more texts) (its paper uses 5; 0: off)",
        low=0,
        high=MAX_PAC_AUGMENTATIONS,
        example="5",
        flag="--pac-augmentations",
        metavar="N",
        page="PAC copies",
    )
    pac_swap_rate: float = option(
        DEFAULT_PAC_SWAP_RATE,
        help="PAC: swaps per copy as a share of the text's words",
        low=0,
        low_open=True,
        high=1,
        example="0.3",
        flag="--pac-swap-rate",
        metavar="R",
    )
    pac_low_percent: float = option(
        DEFAULT_PAC_LOW_PERCENT,
        help="PAC: the lowest k % of the token log-probs whose mean the polarized distance "
        "subtracts",
        low=0,
        low_open=True,
        high=100,
        example="30",
    )
    pac_high_percent: float = option(
        DEFAULT_PAC_HIGH_PERCENT,
        help="PAC: the highest k % of the token log-probs whose mean it takes",
        low=0,
        low_open=True,
        high=100,
        example="5",
    )
    pz: bool = option(
        True,
        help="probabilistic extraction: log10 p_z of the true suffix under the sampling scheme "
        "below and the samples n needed at discover_p (one forward pass per snippet and "
        "length)",
        switch_help="skip probabilistic extraction (log10 p_z of the true suffix and the samples "
        "n needed at --discover-p; default: measured)",
        flag="--no-pz",
    )
    pz_temperature: float = option(
        DEFAULT_TEMPERATURE,
        help="the sampling scheme p_z is measured under: temperature (0: greedy, p_z is 0 or 1)",
        low=0,
        flag="--pz-temperature",
        metavar="T",
        page="p_z temperature",
    )
    pz_top_k: int = option(
        DEFAULT_TOP_K,
        help="... and top-k (0: off; Hayes et al.: 40)",
        low=0,
        high=1_000_000,
        flag="--pz-top-k",
        metavar="K",
        page="p_z top-k",
    )
    pz_top_p: float = option(
        DEFAULT_TOP_P,
        help="... and top-p (1: off)",
        low=0,
        low_open=True,
        high=1,
        flag="--pz-top-p",
        page="p_z top-p",
        metavar="P",
    )
    near_verbatim: bool = option(
        True,
        help="near-verbatim lower bound: log10 of a certified lower bound on the chance that one "
        "sample under the p_z scheme writes a suffix within the edit budget, by beam search (a "
        "white-box victim: one pass of the prefix, then one batched pass of at most B tokens per "
        "suffix token, so at most the cost of B samples of the suffix; beside p_z, so off "
        "with it)",
        switch_help="skip the near-verbatim lower bound (its beam search costs at most what "
        "--near-verbatim-beams samples of the suffix cost; default: measured)",
        flag="--no-near-verbatim",
        page="Near-verbatim bound",
        advanced=True,
    )
    near_verbatim_edits: float = option(
        DEFAULT_EDITS,
        help="the near-verbatim edit budget, Levenshtein over token ids: a share of the suffix's "
        "L tokens below 1 (⌊share·L⌋ edits; 0: verbatim, the bound equals p_z) or a whole "
        "number of tokens from 1",
        low=0,
        example="0.1",
        flag="--near-verbatim-edits",
        metavar="E",
        page="Near-verbatim edits E",
        advanced=True,
    )
    near_verbatim_beams: int = option(
        DEFAULT_BEAM_WIDTH,
        help="the near-verbatim search's beam width B: partial suffixes kept per token (a "
        "wider beam searches more of them and costs more)",
        low=1,
        high=MAX_BEAM_WIDTH,
        example="20",
        flag="--near-verbatim-beams",
        metavar="B",
        page="Near-verbatim beams B",
        advanced=True,
    )
    discover_p: float = option(
        DEFAULT_DISCOVER_P,
        help="the chance of extraction n_at_p is sized for: the fewest samples that write the "
        "suffix at least once with this probability",
        low=0,
        low_open=True,
        high=1,
        high_open=True,
        example="0.5",
        flag="--discover-p",
        metavar="P",
        page="Extraction chance p",
    )
    pam: bool = option(
        False,
        help="the prior-aware check: is the suffix tied to its own prefix (memorised) or about "
        "as likely after unrelated prefixes of its domain (common, not memorised)? K more "
        "teacher-forced rows per snippet and length of a white-box victim",
        flag="--pam",
        page="Prior-aware check",
        advanced=True,
    )
    pam_prefixes: int = option(
        DEFAULT_PAM_PREFIXES,
        help="the prior-aware check: K, the unrelated prefixes (built-in snippets of the "
        "snippet's domain) the suffix is also scored after",
        low=PAM_MIN_PREFIXES,
        high=MAX_PAM_PREFIXES,
        example="19",
        flag="--pam-prefixes",
        metavar="K",
        page="Prior-aware prefixes K",
        advanced=True,
    )
    extraction_window_tokens: int = declared_as(
        "window_tokens", flag="--extraction-window", metavar="L"
    )
    extraction_rank_cap: int = declared_as("rank_cap", flag="--extraction-rank-cap", metavar="M")

    @property
    def inextractability(self) -> InextractabilityOptions:
        """``l`` and ``m`` of the rank-based extraction cost measured beside p_z."""
        return InextractabilityOptions(self.extraction_window_tokens, self.extraction_rank_cap)

    @property
    def pz_scheme(self) -> SamplingScheme:
        """The sampler whose probability of the suffix ``p_z`` is (checked when built)."""
        return SamplingScheme(self.pz_temperature, self.pz_top_k, self.pz_top_p)

    def __post_init__(self) -> None:
        check_options(self)
        self.pz_scheme  # noqa: B018  (built to check the three pz_* options together)
        check_edits(self.near_verbatim_edits)  # a share below 1 or whole tokens
        for name in ("recall_prefix_ids", "recall_member_prefix", "recall_nonmember_prefix"):
            object.__setattr__(self, name, tuple(getattr(self, name)))  # lists from a stored config
        if isinstance(self.dc_pdd_frequencies, dict):  # from a stored config
            object.__setattr__(
                self, "dc_pdd_frequencies", TokenFrequencies.from_dict(self.dc_pdd_frequencies)
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> MeasureOptions:
        """Options from a stored config (keys it does not know are ignored; missing: defaults)."""
        data = data or {}
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
