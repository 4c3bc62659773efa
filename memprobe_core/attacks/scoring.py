"""Scoring a method's candidates: α for the probe, Mem / LCS_P / objective, trace rows.

Each method module (prefix_suffix, interactive, gcg, reverse_lm) does its own search, scores its
candidates here and hands them to :func:`memprobe_core.attacks.result.build_result`, so every
method reports the same fields the same way."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.result import Candidate
from memprobe_core.attacks.victim import VictimAnswer, scoring_tokenizer
from memprobe_core.config import alpha_for, family_of
from memprobe_core.metrics import score_candidates
from memprobe_core.models.base import Generator
from memprobe_core.snippets.split import SplitSnippet


def resolve_alpha(
    split: SplitSnippet, models: ModelSet, options: AttackOptions
) -> tuple[float, str]:
    """α for this probe and its source: the option, else the paper's table for the victim."""
    return alpha_for(
        domain=split.snippet.domain,
        length=split.length,
        family=family_of(getattr(models.victim, "model_id", "")),
        override=options.alpha,
    )


def score(
    meter: CostMeter,
    prompts: Sequence[str],
    outputs: Sequence[str],
    split: SplitSnippet,
    victim: Generator,
    options: AttackOptions,
    alpha: float,
    *,
    windowed: bool = False,
) -> list[Any]:
    """Mem, LCS_P and objective of each (prompt, output), suffix tokenized once.

    ``windowed=True``: the outputs are already the scored windows (``VictimAnswer.scored``);
    otherwise each output is cut to ``len(suffix)`` tokens of re-tokenized text first.
    """
    t0 = time.perf_counter()
    scores = score_candidates(
        prompts,
        outputs,
        split.suffix,
        config=options.scoring,
        alpha=alpha,
        tokenizer=scoring_tokenizer(split, victim),
        suffix_tokens=None if windowed else split.suffix_tokens,
    )
    meter.add_seconds("scoring", time.perf_counter() - t0)
    return scores


def make_candidate(
    round_: int, index: int, prompt: str, output: str | VictimAnswer, scores: Any, **kw: Any
) -> Candidate:
    """A trace row from scores (``metrics.Scores``).

    ``output`` may be a :class:`VictimAnswer`: the trace keeps everything the victim wrote and,
    when the window cut part of it, the scored part in ``extra["scored_output"]``.
    """
    if isinstance(output, VictimAnswer):
        if output.scored != output.text:
            kw["extra"] = {**kw.get("extra", {}), "scored_output": output.scored}
        output = output.text
    return Candidate(
        round=round_,
        index=index,
        prompt=prompt,
        output=output,
        mem=float(scores.mem),
        lcs_p=float(scores.lcs_p),
        objective=float(scores.objective),
        **kw,
    )
