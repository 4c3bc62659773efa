"""Canaries: a labelled demo where membership is the only difference (docs/method.md §11).

A split of real texts into "member" and "non-member" by date, source or generator always differs
in form too, and a blind baseline (a classifier that never sees the model) tells such halves
apart — as on the demo's generated split (AUROC 1.000) and on a dated changelog split (0.941).
The one construction whose two halves differ by chance alone is random assignment: take a pool
of texts no model has seen, put a **random half** of it into the model's training data, keep the
other half out. Here:

1. **Pool**: ``2 · per_side`` texts of one domain from the generated non-member generator
   (§11: made on this machine, seeded by its non-member set's seed, at indices the audited
   non-member set never uses), so no model has seen any of them before.
2. **Assignment**: a seeded random half (``random.Random``) becomes the members.
3. **Training**: the embedded victim is fine-tuned on the members' first ``max_tokens`` tokens
   (causal LM loss, AdamW, ``epochs`` passes, the input embeddings — tied to the output layer —
   frozen, so the 262k-row vocabulary matrix needs no optimizer state), then saved (bfloat16
   safetensors) under ``<memprobe home>/models/canary-<key>/`` with a record of what it was
   trained on. The key hashes every setting and the pool seed: the same settings on the same
   machine reuse the folder; a resume or a Ray worker loads the victim by that path.

The labelled audit (``memprobe audit --corpus --canaries``) then audits the fine-tuned model on
both halves. The blind baseline's AUROC is near 0.5 by construction (up to chance on 2 ·
``per_side`` texts), so the signals' AUROC measures membership. It is the membership of a
*fine-tuning* set (a few epochs on few texts, far stronger than one pass of pre-training): a
test of the audit's machinery and of the signals' direction, not an estimate of what a
pre-training audit would find.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from memprobe_core import paths
from memprobe_core.errors import OptionError
from memprobe_core.snippets import nonmembers
from memprobe_core.snippets.split import MEMBER, NONMEMBER, Snippet

log = logging.getLogger(__name__)

# The pool's texts come from these indices of the non-member generator: far past the few hundred
# the audited non-member set uses, so the two never share a text.
POOL_START = 100_000
RECORD = "canaries.json"
ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True)
class CanarySettings:
    """What the canary victim is fine-tuned from and on (every field is part of its key).

    Attributes:
        base_model: the embedded model fine-tuned (a name ``models.embedded`` knows).
        domain: the generator's domain of the pool (``legal`` or ``code``).
        per_side: members, and as many non-members.
        epochs / learning_rate / batch_size: the fine-tuning.
        max_tokens: tokens of each member trained on (its first ones); audit lengths up to it
            are inside what was trained.
        seed: the assignment's and the training's seed.
    """

    base_model: str = "gemma-3-270m"
    domain: str = "legal"
    per_side: int = 20
    epochs: int = 3
    learning_rate: float = 1e-4
    batch_size: int = 4
    max_tokens: int = 128
    seed: int = 0

    def __post_init__(self) -> None:
        if self.domain not in nonmembers.NONMEMBER_DOMAINS:
            raise OptionError("domain", self.domain, f"give one of {nonmembers.NONMEMBER_DOMAINS}")
        for name, low, high in (
            ("per_side", 2, 10_000),
            ("epochs", 1, 100),
            ("batch_size", 1, 256),
            ("max_tokens", 8, 4096),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise OptionError(name, value, f"give a whole number from {low} to {high}")
        if not 0.0 < float(self.learning_rate) < 1.0:
            raise OptionError("learning_rate", self.learning_rate, "give a rate in (0, 1)")

    def key(self, pool_seed: int) -> str:
        """A short hash of the settings, the pool seed and the generator version."""
        return settings_key(self, pool_seed)


def settings_key(settings: Any, pool_seed: int) -> str:
    """A short hash of a fine-tuned copy's settings (a dataclass), the pool seed and the
    generator version: the same settings on the same machine name the same folder."""
    record = {**asdict(settings), "pool_seed": pool_seed, "generator": nonmembers.GENERATOR_VERSION}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Canaries:
    """A built canary victim and its labelled texts.

    Attributes:
        model_path: the fine-tuned model's folder (a model name any backend option accepts).
        snippets: the pool, labelled (members: trained on), in pool order.
        record: what ``canaries.json`` in that folder says (settings, trained ids, loss, time).
    """

    model_path: Path
    snippets: list[Snippet]
    record: dict[str, Any]


def pool(settings: CanarySettings, pool_seed: int) -> list[Snippet]:
    """The ``2 · per_side`` pool texts, labelled by the seeded random assignment."""
    texts = [
        nonmembers.generate_text(settings.domain, pool_seed, POOL_START + i)
        for i in range(2 * settings.per_side)
    ]
    members = set(
        random.Random(f"canaries:{settings.seed}:{pool_seed}").sample(
            range(len(texts)), settings.per_side
        )
    )
    out = []
    for i, text in enumerate(texts):
        digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]
        out.append(
            Snippet(
                id=f"canary-{settings.domain}:{digest}",
                text=text,
                domain=settings.domain,
                source=f"non-member generator v{nonmembers.GENERATOR_VERSION}, seed {pool_seed}, "
                f"text {POOL_START + i}; {'trained on' if i in members else 'held out'}",
                label=MEMBER if i in members else NONMEMBER,
            )
        )
    return out


def model_dir(settings: CanarySettings, pool_seed: int) -> Path:
    return paths.model_cache_dir() / f"canary-{settings.key(pool_seed)}"


class FineTuning(Protocol):
    """What :func:`fine_tune` reads of a settings object (snippet and document canaries)."""

    @property
    def epochs(self) -> int: ...
    @property
    def learning_rate(self) -> float: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def seed(self) -> int: ...


def _batches(rows: list[list[int]], settings: FineTuning, epoch: int) -> list[list[int]]:
    """Indices of ``rows`` per step of ``epoch`` (a seeded shuffle per epoch)."""
    order = list(range(len(rows)))
    random.Random(f"canaries:shuffle:{settings.seed}:{epoch}").shuffle(order)
    return [order[i : i + settings.batch_size] for i in range(0, len(order), settings.batch_size)]


def _step(
    model: Any, rows: list[list[int]], pad_id: int, optimizer: Any, *, bf16: bool = False
) -> float:
    """One optimizer step on ``rows`` (right-padded; padding masked and not in the loss);
    ``bf16``: the forward under bfloat16 autocast (float32 weights and optimizer state)."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, T)
    mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, T)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    labels = ids.masked_fill(mask == 0, -100)  # -100: ignored by the loss
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], max_norm=1.0)
    optimizer.step()
    optimizer.zero_grad()
    return float(loss.detach())


def _rate_factor(warmup: int, decay_from: int, total: int) -> Callable[[int], float]:
    """The learning rate's factor at each step (warm-up, stable, decay): it rises linearly over
    the first ``warmup`` steps, stays at 1, and from step ``decay_from`` falls linearly to 0 at
    ``total``."""

    def factor(step: int) -> float:
        rise = min(1.0, (step + 1) / warmup) if warmup else 1.0
        if step < decay_from or decay_from >= total:  # no fall (the scheduler also asks at total)
            fall = 1.0
        else:
            fall = max(0.0, (total - step) / (total - decay_from))
        return min(rise, fall)

    return factor


def fine_tune(
    model: Any,
    tokenizer: Any,
    texts: list[str],
    settings: FineTuning,
    on_progress: ProgressFn | None = None,
) -> list[float]:
    """Fine-tune ``model`` in place on ``texts`` (each as its tokenizer encodes it, cut to
    ``max_tokens``); returns each step's loss.

    Settings that also have ``warmup_steps`` (the rate rises linearly over them),
    ``decay_epochs`` (over the last so many epochs the rate falls linearly to 0) or
    ``bf16_autocast`` (forward passes in bfloat16, weights in float32) use them: the document
    canary's. The snippet canaries' settings have none, so their copies are unchanged.
    """
    import torch

    rows = [list(tokenizer(t)["input_ids"])[: settings.max_tokens] for t in texts]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    model.get_input_embeddings().weight.requires_grad_(False)  # tied to the output layer
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=settings.learning_rate, weight_decay=0.0)
    bf16 = bool(getattr(settings, "bf16_autocast", False))
    plan = [_batches(rows, settings, epoch) for epoch in range(settings.epochs)]
    total = sum(len(steps) for steps in plan)
    decay_epochs = min(int(getattr(settings, "decay_epochs", 0)), settings.epochs)
    decay_from = sum(len(steps) for steps in plan[: settings.epochs - decay_epochs])
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        _rate_factor(int(getattr(settings, "warmup_steps", 0)), decay_from, total),
    )
    losses: list[float] = []
    model.train()
    with torch.random.fork_rng():
        torch.manual_seed(settings.seed)  # dropout, if the model has any
        for epoch, steps in enumerate(plan):
            for batch in steps:
                losses.append(
                    _step(model, [rows[i] for i in batch], int(pad), optimizer, bf16=bf16)
                )
                schedule.step()
                if on_progress is not None:
                    message = f"epoch {epoch + 1}/{settings.epochs}, loss {losses[-1]:.3f}"
                    on_progress(len(losses), total, message)
    model.eval()
    return losses


def _remove_dead_partials(out: Path) -> None:
    """Remove the ``*.partial`` copies beside ``out`` of processes no longer running (a SIGKILL
    mid-save cannot clean its own); another live process's copy is left to it."""
    for partial in out.parent.glob(f"{out.name}.*.partial"):
        pid = partial.name[len(out.name) + 1 : -len(".partial")]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)  # signal 0: is the process alive?
        except ProcessLookupError:
            shutil.rmtree(partial, ignore_errors=True)
        except (PermissionError, OverflowError):
            continue  # alive under another user, or no such pid possible: left alone


def fine_tuned_copy(
    base_model: str,
    texts: list[str],
    settings: FineTuning,
    out: Path,
    record: dict[str, Any],
    on_progress: ProgressFn | None,
) -> dict[str, Any]:
    """Fine-tune a fresh float32 copy of embedded ``base_model`` on ``texts``, save it
    (bfloat16 safetensors, its tokenizer, ``record`` plus the training's figures in
    ``canaries.json``) whole at ``out``, and return the record written.

    The folder appears whole or not at all: the copy is written beside it and renamed; a save
    that fails removes its copy, and copies left by processes no longer running (a SIGKILL)
    are removed before the next save.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from memprobe_core.models.embedded import ensure_cache

    started = time.perf_counter()
    source = ensure_cache(base_model)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    # A fresh copy in float32: the cached victim other jobs may be using is never touched.
    model: Any = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32)
    losses = fine_tune(model, tokenizer, texts, settings, on_progress)
    record = {
        **record,
        "steps": len(losses),
        "first_loss": losses[0],
        "final_loss": losses[-1],
        "train_seconds": round(time.perf_counter() - started, 1),
        "saved_dtype": "bfloat16",
    }
    _remove_dead_partials(out)
    partial = out.with_name(out.name + f".{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        model.to(torch.bfloat16).save_pretrained(str(partial))
        tokenizer.save_pretrained(str(partial))
        (partial / RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
        shutil.rmtree(out, ignore_errors=True)
        partial.rename(out)  # whole or absent
    except BaseException:
        # A full disk, an unwritable folder, Ctrl-C: the half-written copy (hundreds of MB for
        # an embedded model) goes, so no failed try leaves one behind.
        shutil.rmtree(partial, ignore_errors=True)
        raise
    log.info(
        "fine-tuned copy %s: %d steps, loss %.3f → %.3f, %.0f s",
        out,
        len(losses),
        losses[0],
        losses[-1],
        record["train_seconds"],
    )
    return record


def _build(
    settings: CanarySettings, pool_seed: int, out: Path, on_progress: ProgressFn | None
) -> dict[str, Any]:
    snippets = pool(settings, pool_seed)
    members = [s for s in snippets if s.label == MEMBER]
    record = {
        "settings": asdict(settings),
        "pool_seed": pool_seed,
        "key": settings.key(pool_seed),
        "trained_ids": [s.id for s in members],
        "held_out_ids": [s.id for s in snippets if s.label == NONMEMBER],
    }
    return fine_tuned_copy(
        settings.base_model, [s.text for s in members], settings, out, record, on_progress
    )


def ensure_canaries(
    settings: CanarySettings | None = None, *, on_progress: ProgressFn | None = None
) -> Canaries:
    """The canary victim for ``settings`` (fine-tuned and saved on first use) and its texts.

    Raises:
        ModelError: the embedded base model is not installed.
        DataError: the machine's non-member set is unreadable.
    """
    settings = settings or CanarySettings()
    pool_seed = nonmembers.ensure().seed
    out = model_dir(settings, pool_seed)
    try:
        record = json.loads((out / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        log.info("canary victim %s is missing: fine-tuning %s", out, settings.base_model)
        record = _build(settings, pool_seed, out, on_progress)
    return Canaries(out, pool(settings, pool_seed), record)


def summary(canaries: Canaries) -> dict[str, Any]:
    """What a run records about the construction (no texts)."""
    record = dict(canaries.record)
    return {
        "construction": "random half of a generated pool fine-tuned into the victim",
        "model_path": str(canaries.model_path),
        **{k: record.get(k) for k in ("settings", "pool_seed", "key", "steps", "final_loss")},
        "trained": len(record.get("trained_ids", [])),
        "held_out": len(record.get("held_out_ids", [])),
    }
