"""PAC, Polarized Augment Calibration: how far a text's most and least likely tokens lie apart,
against the same for copies of the text with words swapped (docs/method.md §8).

Ye et al. 2024, "Data Contamination Calibration for Black-box LLMs" (ACL 2024 Findings);
reference code github.com/yyy01/PAC (``attack.py``: ``calculate_Polarized_Distance``,
``calculate_PAC``; ``src/eda.py``: ``eda``, ``random_swap``, ``swap_word``).

- **Polarized distance** of token log-probs ``ℓ``, sorted: the mean of the highest
  ``max(1, int(n · k_far))`` minus the mean of the lowest ``max(1, int(n · k_local))``
  (``k_far`` = 5 %, ``k_local`` = 30 %).
- **Augmentation**: ``N`` = 5 copies of the text, each split on single spaces into words and
  given ``max(1, int(r · words))`` successive random swaps of two words (``r`` = 0.3): EDA's
  random swap, whose draw gives up after four tries that hit the same word.
- ``pac = PD(x) − mean_i PD(x̃_i)``; a member's own text is uniformly likely, so its distance is
  small next to its swapped copies': lower is member (the reference ranks by ``−PAC``).

It needs only each text's token log-probs, so a black-box victim whose server returns prompt
log-probs gets it too. The draws are seeded by the text itself (sha256), so a unit measures the
same copies in any order, process or worker; the reference seeds Python's ``random`` once per
run, which ties each text's copies to the texts before it.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

DEFAULT_PAC_SWAP_RATE = 0.3  # eda(alpha=0.3)
DEFAULT_PAC_LOW_PERCENT = 30.0  # ratio_local
DEFAULT_PAC_HIGH_PERCENT = 5.0  # ratio_far
PAPER_PAC_AUGMENTATIONS = 5  # calculate_PAC(N=5)
MAX_PAC_AUGMENTATIONS = 32


def polarized_distance(
    log_probs: Sequence[float], low_percent: float, high_percent: float
) -> float:
    """Mean of the highest ``high_percent`` % of ``log_probs`` minus mean of the lowest
    ``low_percent`` % (each at least one value; ``int()`` truncation as the reference)."""
    if not log_probs:
        raise ValueError("polarized_distance of no values: nothing was scored")
    ordered = sorted(log_probs)
    n_low = max(int(len(ordered) * (low_percent / 100.0)), 1)
    n_high = max(int(len(ordered) * (high_percent / 100.0)), 1)
    return sum(ordered[-n_high:]) / n_high - sum(ordered[:n_low]) / n_low


def _swap_word(words: list[str], rng: random.Random) -> list[str]:
    """``src/eda.py`` ``swap_word``: swap two random words (in place); after four draws that
    hit the first word, give up (the fourth draw is not used even when it differs)."""
    first = rng.randint(0, len(words) - 1)
    second = first
    tries = 0
    while second == first:
        second = rng.randint(0, len(words) - 1)
        tries += 1
        if tries > 3:
            return words
    words[first], words[second] = words[second], words[first]
    return words


def augment(text: str, count: int, swap_rate: float) -> list[str]:
    """``count`` copies of ``text`` with ``max(1, int(swap_rate · words))`` random swaps each
    (words: ``text.split(" ")``, joined back with single spaces), drawn from a generator seeded
    by the text."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    rng = random.Random(seed)
    words = text.split(" ")
    swaps = max(1, int(swap_rate * len(words)))
    copies = []
    for _ in range(count):
        swapped = words.copy()
        for _ in range(swaps):
            swapped = _swap_word(swapped, rng)
        copies.append(" ".join(swapped))
    return copies


def pac_score(
    log_probs: Sequence[float],
    augmented: Sequence[Sequence[float]],
    low_percent: float,
    high_percent: float,
) -> float | None:
    """``PD(x) − mean PD(x̃_i)``; ``None`` when a copy has no scored token."""
    if not augmented or not log_probs or not all(augmented):
        return None
    own = polarized_distance(log_probs, low_percent, high_percent)
    copies = [polarized_distance(lps, low_percent, high_percent) for lps in augmented]
    return own - sum(copies) / len(copies)
