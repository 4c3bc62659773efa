"""What is measured beside every extraction result, and the one list of membership signals.

Every unit (one snippet, method and length) gets, besides Mem:

- **verbatim-extraction metrics** of the chosen output against the true suffix
  (:mod:`memprobe_core.membership.verbatim`): k-extractability and the longest verbatim span;
- **membership signals** of the snippet on the victim (:mod:`memprobe_core.membership.signals`):
  how the model scores the text itself, computed from one batched forward pass.

:data:`SIGNALS` is the single place that names each signal, says which way points to "member"
and how it is shown; reports, CSV columns and pages read it from here (docs/method.md §8).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from memprobe_core.errors import UsageError

DEFAULT_MIN_K_PERCENT = 20.0  # Shi et al. 2024 report k = 20 as their default
DEFAULT_EXTRACT_K = 50  # Carlini et al. 2023 ("Quantifying Memorization") use 50-token suffixes


@dataclass(frozen=True)
class SignalSpec:
    """One membership signal.

    Attributes:
        name: key in ``AttackResult.membership`` (the CSV column is ``signal_<name>``).
        label: what tables and charts call it.
        higher_is_member: True when a larger value points to a member; evaluation scores
            ``value`` (True) or ``-value`` (False), so AUROC > 0.5 always means "separates
            members the expected way".
        needs_reference: only computed when a reference model is given.
        description: one line for the manual and tooltips.
    """

    name: str
    label: str
    higher_is_member: bool
    needs_reference: bool
    description: str

    @property
    def column(self) -> str:
        return f"signal_{self.name}"


SIGNALS: tuple[SignalSpec, ...] = (
    SignalSpec("loss", "Loss", False, False, "mean negative log-likelihood of the whole text"),
    SignalSpec("ppl", "Perplexity", False, False, "exp(loss)"),
    SignalSpec(
        "suffix_loss", "Suffix loss", False, False, "mean NLL of the suffix given the prefix"
    ),
    SignalSpec(
        "zlib", "zlib ratio", False, False, "loss / zlib-compressed bits (Carlini et al. 2021)"
    ),
    SignalSpec("lowercase", "Lowercase ratio", False, False, "loss(x) / loss(lower(x))"),
    SignalSpec("min_k", "Min-K%", True, False, "mean of the lowest k % token log-probs"),
    SignalSpec(
        "min_k_pp", "Min-K%++", True, False, "Min-K% of calibrated log-probs (Zhang et al. 2024)"
    ),
    SignalSpec(
        "ref_ratio",
        "Reference ratio",
        False,
        True,
        "victim NLL − reference NLL, per UTF-8 byte (tokenizers may differ)",
    ),
)
SIGNAL_BY_NAME: dict[str, SignalSpec] = {s.name: s for s in SIGNALS}


@dataclass(frozen=True)
class MeasureOptions:
    """What is measured beside each result (recorded in the run's config).

    Attributes:
        signals: compute membership signals (white-box victims; skipped for black-box ones).
        min_k_percent: k of Min-K% and Min-K%++, in percent of the text's tokens (0 < k ≤ 100).
        extract_k: k of k-extractability: the first k suffix tokens must come out exactly.
    """

    signals: bool = True
    min_k_percent: float = DEFAULT_MIN_K_PERCENT
    extract_k: int = DEFAULT_EXTRACT_K

    def __post_init__(self) -> None:
        if not 0.0 < float(self.min_k_percent) <= 100.0:
            raise UsageError(
                f"min_k_percent {self.min_k_percent} is out of range; give a percentage in "
                "(0, 100], e.g. 20"
            )
        if int(self.extract_k) < 1:
            raise UsageError(
                f"extract_k {self.extract_k} is out of range; give a positive token count, e.g. 50"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> MeasureOptions:
        """Options from a stored config (keys it does not know are ignored; missing: defaults)."""
        data = data or {}
        known = {"signals", "min_k_percent", "extract_k"}
        return cls(**{k: v for k, v in data.items() if k in known})


def signals_frame(membership: dict[str, Any] | None) -> pd.DataFrame:
    """A result's membership signals as rows to show: signal, value, which way means member.

    Empty when nothing was measured; a recorded failure, or a black-box victim whose server
    cannot score a text, shows as one row with its message.
    """
    membership = membership or {}
    for why in ("error", "not_measured"):  # a failed pass; a server that cannot score a text
        if why in membership:
            return pd.DataFrame(
                [
                    {
                        "signal": why.replace("_", " "),
                        "value": None,
                        "member if": "",
                        "what": str(membership[why]),
                    }
                ]
            )
    rows = [
        {
            "signal": spec.label,
            "value": float(membership[spec.name]),
            "member if": "higher" if spec.higher_is_member else "lower",
            "what": spec.description,
        }
        for spec in SIGNALS
        if membership.get(spec.name) is not None
    ]
    return pd.DataFrame(rows, columns=["signal", "value", "member if", "what"])
