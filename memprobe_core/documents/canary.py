"""The document canary: a known answer for whole-document audits (docs/method.md §19).

A long document no model has seen — generated on this machine by the non-member generator
(§11), seeded by the machine's non-member seed, from indices nothing else uses — is fine-tuned
into a copy of the embedded Gemma, as ``--canaries`` does for snippets
(:func:`memprobe_core.membership.canaries.fine_tuned_copy`). The base model has never seen the
text, so its map must be empty and its continuation's nv-recall near 0; the copy was trained on
it, so its map must be full. Both are measured, never assumed (tests and
``bench/document.py``).

Training rows are ``max_tokens``-token windows of the document's own token ids, every
``stride`` tokens (overlapping), each decoded to text and encoded with the tokenizer's BOS, as
the map's windows are fed: every token is trained on after several different contexts, short
ones included. The copy is saved under ``<memprobe home>/models/document-canary-<key>/``; the key
hashes every setting and the pool seed, so the same settings on the same machine reuse it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from memprobe_core import paths
from memprobe_core.membership.canaries import (
    RECORD,
    ProgressFn,
    fine_tuned_copy,
    settings_key,
)
from memprobe_core.option_fields import check_options, option
from memprobe_core.snippets import nonmembers

log = logging.getLogger(__name__)

# The document's texts come from these indices of the generator: past the snippet canaries'
# pool (100,000 on) and the audited non-member set (the first few hundred).
DOCUMENT_START = 300_000


@dataclass(frozen=True)
class DocumentCanarySettings:
    """What the document canary is made of and how it is trained (every field is in its key).

    Attributes:
        base_model: the embedded model fine-tuned.
        domain: the generator's domain (``legal`` or ``code``).
        words: the document has at least this many words (whole generated paragraphs).
        unique_words: no run of this many words appears twice in the document.
        numbers_alike: runs that differ only in their numbers count as the same run.
        epochs / learning_rate / warmup_steps / decay_epochs / batch_size: the fine-tuning.
        max_tokens: tokens of each training row. stride: tokens between two rows' starts.
        bf16_autocast: forward passes in bfloat16 (the copy is trained in float32).
        seed: the training's seed.
    """

    base_model: str = "gemma-3-270m"
    domain: Literal["legal", "code"] = option(
        "legal", help="the generator's domain of the document's texts"
    )
    words: int = option(3000, help="the document's least word count", low=100, high=1_000_000)
    unique_words: int = option(
        12, help="no run of this many words appears twice in the document", low=2, high=1000
    )
    numbers_alike: bool = option(
        True,
        help="two runs that differ only in their numbers (section 6 and section 8) count as "
        "the same run",
    )
    # Measured here (see docs/benchmarks.md, "Document canary"): batches of 4 rows of 256
    # tokens, 16 epochs at 4e-4: 18 of 105 windows extractable (loss 0.23); the map's own
    # windows as rows (100 tokens every 50), 8 epochs: 29 of 105 (loss 0.37); the same rows one
    # at a time at 3e-4: loss 0.55 after 5 epochs. Single rows make four times the optimizer
    # steps for the same compute, and a warm-up lets the rate go higher; 1e-3 without one
    # diverged (loss 6).
    epochs: int = option(16, help="passes over the rows", low=1, high=100)
    learning_rate: float = option(
        6e-4, help="AdamW's rate", low=0, low_open=True, high=1, high_open=True
    )
    warmup_steps: int = option(
        40, help="steps over which the rate rises linearly to learning_rate", low=0, high=100_000
    )
    # The rate's fall at the end is what settles the document: with the rate held at 6e-4 for
    # all 16 epochs, 40 of 103 windows were extractable (loss 0.23: single rows at a high rate
    # leave the rows seen last best known); that copy trained one more epoch with the rate
    # falling from 3e-4 to 0 gave 98 of 103 (see docs/benchmarks.md, "Document canary").
    decay_epochs: int = option(
        4,
        help="over the last this many epochs the rate falls linearly to 0 (all epochs when "
        "larger than epochs)",
        low=0,
        high=100,
    )
    batch_size: int = option(1, help="rows a step", low=1, high=256)
    # The map's windows (Gemma's BOS and 50 + 50 tokens, stride 50): every suffix token is
    # trained on after exactly the prefix the map gives it.
    max_tokens: int = option(
        101, help="tokens of each training row, the tokenizer's BOS included", low=16, high=4096
    )
    stride: int = option(50, help="tokens between two rows' starts", low=1, high=4096)
    bf16_autocast: bool = option(
        True,
        help="forward passes under bfloat16 autocast (weights and optimizer state stay "
        "float32): 1.6x faster a step on a CPU with AMX or AVX512-BF16",
    )
    seed: int = option(0, help="the training's seed", low=0, high=2**63 - 1)

    def __post_init__(self) -> None:
        check_options(self)

    def key(self, pool_seed: int) -> str:
        return settings_key(self, pool_seed)


@dataclass(frozen=True)
class DocumentCanary:
    """A built document canary: the fine-tuned copy's folder, the document and its record."""

    model_path: Path
    text: str
    record: dict[str, Any]


def canary_document(settings: DocumentCanarySettings, pool_seed: int) -> str:
    """The document: paragraphs of generated texts of ``settings.domain`` until it has
    ``settings.words`` words, leaving out any paragraph that would repeat a run of
    ``settings.unique_words`` words already in it (the same arguments always give the same text).

    Why: the generator fills templates, so its texts share whole clauses ("The Holder shall not
    rent the Product out …") followed by different text. A window whose prefix is such a shared
    run has two true continuations, and no model, however well it knows the document, writes
    both back (measured: a copy trained to loss 0.08 on the undeduplicated document wrote back 62
    of 105 windows, and its continuation jumped from one licence to another after a shared
    clause). Without a repeated run, every window's prefix (about 35 words) occurs once.

    Runs that differ only in a number repeat too, for a model: after "... learned of it." a
    copy wrote "8. governing law" where the document has "6.", a clause that ends another
    agreement, and its continuation carried on there (measured with the 12-word rule on
    words as written). With ``numbers_alike``, every number is one word for the rule.
    """
    n = settings.unique_words
    shape = _numbers_alike if settings.numbers_alike else _as_written
    seen: set[tuple[str, ...]] = set()
    kept: list[str] = []
    tail: list[str] = []
    count, index = 0, DOCUMENT_START
    while count < settings.words:
        text = nonmembers.generate_text(settings.domain, pool_seed, index)
        index += 1
        for paragraph in text.split("\n\n"):
            words = [shape(word) for word in paragraph.split()]
            grams = _runs([*tail, *words], n)
            if not words or any(g in seen for g in grams):
                continue
            seen.update(grams)
            kept.append(paragraph)
            tail = [*tail, *words][-(n - 1) :]
            count += len(words)
    return "\n\n".join(kept)


def _numbers_alike(word: str) -> str:
    return _NUMBER.sub("0", word)


def _as_written(word: str) -> str:
    return word


_NUMBER = re.compile(r"\d+")


def _runs(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def training_rows(text: str, tokenizer: Any, settings: DocumentCanarySettings) -> list[str]:
    """Overlapping windows of the document's ids, decoded (the fine-tuning encodes each with
    the tokenizer's BOS, as the map feeds its windows, and keeps ``max_tokens`` of a row)."""
    from memprobe_core.documents.extraction_map import front_ids

    ids = tokenizer.encode(text, add_special_tokens=False)
    width = settings.max_tokens - len(front_ids(tokenizer, text))
    last = max(len(ids) - width, 0)
    starts = list(range(0, last + 1, settings.stride))
    if starts[-1] != last:
        starts.append(last)  # the document's end is trained on too
    return [tokenizer.decode(ids[s : s + width]) for s in starts]


def model_dir(settings: DocumentCanarySettings, pool_seed: int) -> Path:
    return paths.model_cache_dir() / f"document-canary-{settings.key(pool_seed)}"


def ensure_document_canary(
    settings: DocumentCanarySettings | None = None, *, on_progress: ProgressFn | None = None
) -> DocumentCanary:
    """The document canary for ``settings`` (fine-tuned and saved on first use: minutes on a
    2-core CPU) and its document.

    Raises:
        ModelError: the embedded base model is not installed.
    """
    from transformers import AutoTokenizer

    from memprobe_core.models.embedded import ensure_cache

    settings = settings or DocumentCanarySettings()
    pool_seed = nonmembers.ensure().seed
    text = canary_document(settings, pool_seed)
    out = model_dir(settings, pool_seed)
    try:
        record = json.loads((out / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        log.info("document canary %s is missing: fine-tuning %s", out, settings.base_model)
        tokenizer = AutoTokenizer.from_pretrained(str(ensure_cache(settings.base_model)))
        rows = training_rows(text, tokenizer, settings)
        record = {
            "construction": "a generated document fine-tuned into the victim",
            "settings": asdict(settings),
            "pool_seed": pool_seed,
            "key": settings.key(pool_seed),
            "document_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "document_words": len(text.split()),
            "rows": len(rows),
        }
        record = fine_tuned_copy(settings.base_model, rows, settings, out, record, on_progress)
    return DocumentCanary(out, text, record)
