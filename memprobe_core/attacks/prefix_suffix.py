"""P-S-Base and P-S-Inst: the true prefix as the prompt, greedy, ``max_new_tokens = len(suffix)``
(``length`` with the ``last`` output window, whose last ``len(suffix)`` tokens are scored).

P-S-Base asks the base model; P-S-Inst the (instruction-tuned) victim. An instruct victim with a
chat template gets the prefix twice in one batched call when ``options.ps.chat_template``: raw
(as a base model would see it) and as a user message inside its chat template. Both rows stay in
the trace (``extra["format"]``); the better by objective is the result, and the manifest records
which (``ps_format``).
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from memprobe_core.attacks.events import EventCallback
from memprobe_core.attacks.model_set import ModelSet, require
from memprobe_core.attacks.one_round import RoundPrompts, run_one_round
from memprobe_core.attacks.options import AttackOptions, PrefixSuffixOptions
from memprobe_core.attacks.registry import MethodSpec, register
from memprobe_core.attacks.result import AttackResult
from memprobe_core.models.base import Request
from memprobe_core.snippets.split import SplitSnippet


def run_prefix_suffix(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    variant: Literal["base", "inst"] = "base",
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
) -> AttackResult:
    """Run P-S-Base (``variant="base"``) or P-S-Inst (``variant="inst"``) on one split.

    Args:
        split: the snippet cut into prefix and suffix (by the victim's tokenizer).
        models: ``base`` for P-S-Base, ``victim`` for P-S-Inst.
        options: scoring, α and ``ps_chat_template``.
        variant: ``"base"`` or ``"inst"``.
        on_event: receives ``round_started``, ``candidate_scored``, ``round_finished``, ``finished``.
        cancel: when set, the run stops before the next query and returns what it has.

    Returns:
        An AttackResult with ``dis=None`` (the prompt is the true prefix by construction).

    Raises:
        ValueError: an unknown variant; MissingModelError: no base model for P-S-Base.
    """
    if variant not in ("base", "inst"):
        raise ValueError(f"variant {variant!r} is unknown; use 'base' or 'inst'")
    method = f"ps_{variant}"
    model = (
        require(models.base, "base", method, "the victim's pre-instruction-tuning parent")
        if variant == "base"
        else models.victim
    )
    formats = ["raw"]
    if variant == "inst" and options.ps.chat_template and model.has_chat_template:
        formats.append("chat")
    requests: list[Request] = [
        split.prefix if fmt == "raw" else [{"role": "user", "content": split.prefix}]
        for fmt in formats
    ]
    asked = RoundPrompts(
        requests=requests,
        prompts=[split.prefix] * len(formats),
        answer_model="base" if variant == "base" else "victim",
        extras=[{"format": fmt} for fmt in formats],
        manifest_extra=lambda chosen: {
            "ps_formats": formats,
            "ps_format": chosen.extra["format"] if chosen else None,
        },
    )
    return run_one_round(
        method, split, models, options, model, asked, on_event=on_event, cancel=cancel
    )


def run_ps_base(
    split: SplitSnippet, models: ModelSet, options: AttackOptions, **kw: Any
) -> AttackResult:
    """P-S-Base: :func:`run_prefix_suffix` on the base model."""
    return run_prefix_suffix(split, models, options, variant="base", **kw)


def run_ps_inst(
    split: SplitSnippet, models: ModelSet, options: AttackOptions, **kw: Any
) -> AttackResult:
    """P-S-Inst: :func:`run_prefix_suffix` on the instruction-tuned victim."""
    return run_prefix_suffix(split, models, options, variant="inst", **kw)


register(
    MethodSpec(
        name="ps_base",
        label="P-S-Base",
        run=run_ps_base,
        roles=("base",),
        rank=10,
        options_key="ps",
        options_class=PrefixSuffixOptions,
        default_in_audit=True,
        baseline_rank=2,
        summary="the true prefix as the prompt, greedy, on the base model",
        # One answer from the victim: 10 to 12 s at length 60 on a 2-core CPU (the embedded
        # models; docs/benchmarks.md, "Estimates"), far cheaper than the attacker loop's rate.
        rough_rate=0.2,
    )
)
register(
    MethodSpec(
        name="ps_inst",
        label="P-S-Inst",
        run=run_ps_inst,
        roles=("victim",),
        rank=20,
        options_key="ps",
        options_class=PrefixSuffixOptions,
        default_in_audit=True,
        baseline_rank=1,
        summary="the true prefix as the prompt, greedy, on the instruction-tuned victim",
        # One answer from the victim: 10 to 12 s at length 60 on a 2-core CPU (the embedded
        # models; docs/benchmarks.md, "Estimates"), far cheaper than the attacker loop's rate.
        rough_rate=0.2,
    )
)
