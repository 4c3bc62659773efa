"""A result's manifest: everything needed to reproduce or compare it (models, decoding,
options, split, versions)."""

from __future__ import annotations

import importlib.metadata
import platform
from typing import Any

from memprobe_core import __version__ as memprobe_version
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.snippets.split import SplitSnippet


def package_versions() -> dict[str, str | None]:
    """Versions of the packages a result depends on (``None``: not installed)."""
    out: dict[str, str | None] = {"memprobe": memprobe_version, "python": platform.python_version()}
    # nltk: its Porter stemmer is ROUGE-L's (rouge-score uses it; so does memprobe.metrics).
    for name in ("torch", "transformers", "rouge-score", "nltk", "rapidfuzz"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def build_manifest(
    method: str,
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    alpha: float,
    alpha_source: str,
    decoding: dict[str, Any],
    extra: dict[str, Any] | None = None,
    *,
    answer_model: str = "victim",
) -> dict[str, Any]:
    """Everything needed to reproduce or compare a result.

    ``answer_model`` is the role of the model whose output was scored (``victim`` or ``base``).
    """
    manifest: dict[str, Any] = {
        "method": method,
        "compat": options.compat,
        "selection": options.selection,
        "answer_model": answer_model,
        "models": models.manifest(),
        "decoding": decoding,
        "options": options_record(options),
        "scoring": options.scoring.to_dict(),
        "rouge_variant": options.scoring.variant,
        "alpha": alpha,
        "alpha_source": alpha_source,
        "seed": options.seed,
        "split": {
            "length": split.length,
            "prefix_tokens": len(split.prefix_ids),
            "suffix_tokens": split.suffix_tokens,
            "tokenizer": split.tokenizer_name,
            "bos_in_prefix": split_bos_in_prefix(split),
            # The texts too, so any stored unit can be replayed against its true suffix.
            "prefix": split.prefix,
            "suffix": split.suffix,
        },
        "tokenizer": split.tokenizer_name,
        "versions": package_versions(),
    }
    if extra:
        manifest.update(extra)
    return manifest


def options_record(options: AttackOptions) -> dict[str, Any]:
    """``options.to_dict()`` as a unit keeps it: DC-PDD's token-count table (up to ~100 kB,
    kept once in the run's config) is named by its summary and digest, not copied per unit."""
    record = options.to_dict()
    counted = options.measure.dc_pdd_frequencies
    if counted is not None:
        record["measure"]["dc_pdd_frequencies"] = counted.summary()
    return record


def split_bos_in_prefix(split: SplitSnippet) -> bool:
    """Whether the split counted a BOS token among the prefix tokens (reference convention)."""
    return bool(getattr(split, "bos_in_prefix", False))
