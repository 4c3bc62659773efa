"""memprobe's own membership signals (docs/method.md §8), registered as a plugin's are.

Declared in memprobe's pyproject.toml under the ``memprobe.signals`` entry-point group (and
imported directly when that metadata is missing, :mod:`memprobe_core.plugins`). The order here
is the order of every list of signals: reports, CSV columns, evaluation, the CLI's choices. They
have no ``compute``: memprobe's scoring pass computes them itself
(:mod:`memprobe_core.membership.token_stats`, :mod:`memprobe_core.membership.signals`).
"""

from __future__ import annotations

from memprobe_core.membership.signals_registry import SignalSpec, register_signal

BUILTIN_SIGNALS: tuple[SignalSpec, ...] = (
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
        "min_k_pp",
        "Min-K%++",
        True,
        False,
        "Min-K% of calibrated log-probs (Zhang et al. 2024)",
        needs_weights=True,
    ),
    SignalSpec(
        "ref_ratio",
        "Reference ratio",
        False,
        True,
        "victim NLL − reference NLL, per UTF-8 byte (tokenizers may differ)",
    ),
    SignalSpec(
        "recall",
        "ReCaLL",
        True,
        False,
        "LL(x | non-member prefix) / LL(x) (Xie et al. 2024)",
        needs_prefixes=True,
    ),
    SignalSpec(
        "con_recall",
        "Con-ReCall",
        True,
        False,
        "(LL(x | non-member prefix) − LL(x | member prefix)) / LL(x) (Wang et al. 2024)",
        needs_prefixes=True,
    ),
    SignalSpec(
        "dc_pdd",
        "DC-PDD",
        True,
        False,
        "mean over first occurrences of min(p_t · log 1/f_t, a), f_t the token's frequency in "
        "a reference corpus (Zhang et al. 2024)",
        needs_option=True,
    ),
    SignalSpec(
        "pac",
        "PAC",
        False,
        False,
        "polarized distance of the token log-probs minus its mean over word-swapped copies "
        "(Ye et al. 2024)",
        needs_option=True,
    ),
    SignalSpec(
        "samia",
        "SaMIA",
        True,
        False,
        "mean ROUGE-1 recall of sampled continuations of the prefix against the suffix "
        "(Kaneko et al. 2024)",
        needs_samples=True,
    ),
    SignalSpec(
        "samia_zlib",
        "SaMIA*zlib",
        True,
        False,
        "mean of each sample's ROUGE-1 recall × its zlib-compressed bytes (Kaneko et al. 2024)",
        needs_samples=True,
    ),
)

for _spec in BUILTIN_SIGNALS:
    register_signal(_spec)
