"""The prior-aware check's statistic: is a likely suffix tied to its own prefix, or merely common?
(Tiwari, Trachtenberg & Suh 2026, "Prior-Aware Memorization", arXiv 2602.18733; docs/method.md,
"Prior-aware check").

A suffix the victim writes after its prefix may be memorised, or it may be text the model finds
likely after almost anything (licence boilerplate, ``return a + b``): then no metric that looks
at one prefix can tell the two apart. The check compares the suffix's log-likelihood after its
own prefix with its log-likelihood after ``K`` **unrelated** prefixes of the same domain (the
first as many tokens of other built-in snippets of the domain; every domain when it has too few):

    ℓ_own = log P(z | own prefix),  ℓ_j = log P(z | unrelated prefix j),  j = 1 … K

each the sum of the model's own (temperature 1, unwarped) log-probabilities of the suffix's
tokens, teacher-forced. The average over unrelated prefixes, ``log mean_j exp ℓ_j``, estimates
the suffix's **prior** probability in its domain. From them:

- ``pam_log_ratio = (ℓ_own − log mean_j exp ℓ_j) / ln 10``: how many powers of ten more likely
  the suffix is after its own prefix than after an unrelated one;
- ``pam_p = (1 + #{j : ℓ_j ≥ ℓ_own}) / (K + 1)``: the rank test's p-value (as the chance level of
  Mem's, :mod:`memprobe_core.chance`): if the own prefix were just one more unrelated prefix, the
  ``K + 1`` values are exchangeable and ``pam_p ≤ α`` happens with probability at most α;
- ``pam_own_token_p = exp(ℓ_own / n)`` and ``pam_prior_token_p = exp(log mean_j exp ℓ_j / n)``:
  the geometric-mean probability per suffix token (``n`` tokens) after the own prefix and under
  the prior.

``pam_verdict``:

- ``"not memorised"``: ``pam_own_token_p < LIKELY_TOKEN_P`` — the victim does not find the suffix
  likely even after its own prefix, so there is nothing for the prior to explain;
- ``"memorised"``: likely after its own prefix, and tied to it: ``pam_p ≤ PAM_ALPHA`` and
  ``pam_log_ratio ≥ PAM_MARGIN_LOG10``;
- ``"common, not memorised"``: likely after its own prefix but not tied to it: about as likely
  after unrelated prefixes of its domain.

A black-box victim (no weights) gets ``pam_not_measured`` with why: the check needs the suffix's
log-probs after prefixes nobody asked the victim for, which its server does not score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memprobe_core.records import VerbatimRecord

# K: 19 unrelated prefixes make the rank test's smallest p-value 1/20 = PAM_ALPHA.
DEFAULT_PAM_PREFIXES = 19
MAX_PAM_PREFIXES = 200
# Fewer unrelated prefixes than this: not measured (a rank test on 4 values cannot go below 0.2).
PAM_MIN_PREFIXES = 5
PAM_ALPHA = 0.05
# "Tied to its own prefix" also needs the own prefix to make the suffix at least ten times more
# likely than the prior: a rank test alone calls any small, consistent lift significant.
PAM_MARGIN_LOG10 = 1.0
# "Likely after its own prefix": each suffix token more likely than not, on geometric average.
LIKELY_TOKEN_P = 0.5

MEMORISED = "memorised"
COMMON = "common, not memorised"
NOT_MEMORISED = "not memorised"
PAM_VERDICTS = (MEMORISED, COMMON, NOT_MEMORISED)
# The ``pam_*`` keys of a unit's record (:meth:`PriorAwareCheck.to_record`, or the reason it was
# not measured): the results frame's columns of the check (attacks.figures).
PAM_KEYS = (
    "pam_verdict",
    "pam_log_ratio",
    "pam_p",
    "pam_own_token_p",
    "pam_prior_token_p",
    "pam_prefixes",
    "pam_source",
    "pam_not_measured",
)
# A verdict in one or two words, where counts stand beside each other (a report's Table 1 cell).
_SHORT = {MEMORISED: "memorised", COMMON: "common", NOT_MEMORISED: "not memorised"}


def short_verdict(verdict: str) -> str:
    """``verdict`` (one of :data:`PAM_VERDICTS`) as a report's Table 1 cell counts it."""
    return _SHORT[verdict]


@dataclass(frozen=True)
class PriorAwareCheck:
    """The suffix's log-likelihoods after its own prefix and after unrelated ones.

    Attributes:
        own: ``ℓ_own``, natural log.
        unrelated: ``ℓ_j`` for each unrelated prefix, natural log.
        tokens: the suffix's tokens ``n`` (> 0).
    """

    own: float
    unrelated: tuple[float, ...]
    tokens: int

    @property
    def prior(self) -> float:
        """``log mean_j exp ℓ_j``, the suffix's log prior probability in its domain."""
        top = max(self.unrelated)
        if top == -math.inf:
            return -math.inf
        total = math.fsum(math.exp(v - top) for v in self.unrelated)
        return top + math.log(total / len(self.unrelated))

    @property
    def log10_ratio(self) -> float:
        return (self.own - self.prior) / math.log(10)

    @property
    def p_value(self) -> float:
        return (1 + sum(v >= self.own for v in self.unrelated)) / (len(self.unrelated) + 1)

    @property
    def own_token_p(self) -> float:
        return math.exp(self.own / self.tokens)

    @property
    def prior_token_p(self) -> float:
        return math.exp(self.prior / self.tokens)

    @property
    def verdict(self) -> str:
        if self.own_token_p < LIKELY_TOKEN_P:
            return NOT_MEMORISED
        tied = self.p_value <= PAM_ALPHA and self.log10_ratio >= PAM_MARGIN_LOG10
        return MEMORISED if tied else COMMON

    def to_record(self, source: str) -> VerbatimRecord:
        """The ``pam_*`` keys of a result's ``verbatim`` record (``source``: where the
        unrelated prefixes came from)."""
        return {
            "pam_log_ratio": _finite(self.log10_ratio),
            "pam_p": self.p_value,
            "pam_verdict": self.verdict,
            "pam_own_token_p": self.own_token_p,
            "pam_prior_token_p": self.prior_token_p,
            "pam_prefixes": len(self.unrelated),
            "pam_source": source,
        }


def _finite(value: float) -> float | None:
    # JSON has no infinity: a suffix impossible under the prior (or after its own prefix) has no
    # finite ratio; the verdict still says what it means.
    return value if math.isfinite(value) else None


def describe_prior_aware(verbatim: VerbatimRecord | None) -> str:
    """One plain-text line on a result's prior-aware check (the CLI and the Probe page)."""
    verbatim = verbatim or {}
    if "pam_not_measured" in verbatim:
        return f"Prior-aware check: not measured: {verbatim['pam_not_measured']}"
    verdict = verbatim.get("pam_verdict")
    if verdict is None:
        return "Prior-aware check: not measured."
    ratio = verbatim.get("pam_log_ratio")
    ratio_text = "no finite ratio" if ratio is None else f"10^{_number(ratio):.1f} times"
    return (
        f"Prior-aware check: {verdict}. After its own prefix the suffix is {ratio_text} as likely "
        f"as after {verbatim.get('pam_prefixes')} unrelated prefixes ({verbatim.get('pam_source')}"
        f"; rank p = {_number(verbatim.get('pam_p')):.3f}); per token "
        f"{_number(verbatim.get('pam_own_token_p')):.3f} after its own prefix, "
        f"{_number(verbatim.get('pam_prior_token_p')):.3f} after unrelated ones."
    )


def _number(value: object) -> float:
    # A stored record's number (JSON); anything else reads as nan rather than failing a view.
    return float(value) if isinstance(value, int | float) else math.nan
