"""Shared pieces of every extraction method: α, victim queries, scoring, costs, result, manifest.

Each method module (prefix_suffix, interactive, gcg, reverse_lm) does its own search and hands
the scored candidates to :func:`build_result`, so every method reports the same fields the same
way. Costs come from :class:`CostMeter`, which reads a Generator's ``stats`` before and after each
call; it works per call (not per model) so that one model object playing two roles (victim and
attacker) is still charged to the right role.
"""

from __future__ import annotations

import importlib.metadata
import logging
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memprobe_core import __version__ as memprobe_version
from memprobe_core.attacks.common import AttackOptions, ModelSet
from memprobe_core.attacks.result import AttackResult, Candidate, Costs
from memprobe_core.config import alpha_for, family_of
from memprobe_core.data import SplitSnippet
from memprobe_core.errors import MemprobeError
from memprobe_core.metrics import score_candidates, window_text
from memprobe_core.models.base import Completion, Decoding, Generator, Request
from memprobe_core.pii import pii_report

logger = logging.getLogger(__name__)


class MissingModelError(MemprobeError, ValueError):
    """A method needs a model the ModelSet does not have (or one that cannot do the job)."""


def require(model: Generator | None, role: str, method: str, what: str = "") -> Generator:
    """Return ``model`` or raise an error that says which role to fill for ``method``."""
    if model is None:
        hint = f" ({what})" if what else ""
        raise MissingModelError(
            f"method {method!r} needs a {role} model{hint}; set ModelSet.{role} "
            f"(e.g. memprobe_core.models.load(...)) or pick another method"
        )
    return model


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


def victim_request(prompt: str, victim: Generator, *, as_chat: bool) -> Request:
    """What the victim gets for ``prompt``: a one-message chat or the raw text."""
    if as_chat and victim.has_chat_template:
        return [{"role": "user", "content": prompt}]
    return prompt


@dataclass
class CostMeter:
    """Counts queries, tokens and seconds per role over one method run.

    Attributes:
        started: ``time.perf_counter()`` at creation (wall seconds are measured from it).
        costs: the running counters (``Costs``), filled as calls are made.
    """

    started: float = field(default_factory=time.perf_counter)
    costs: Costs = field(default_factory=Costs)

    def generate(
        self, role: str, model: Generator, requests: Sequence[Request], decoding: Decoding
    ) -> list[list[Completion]]:
        """Call ``model.generate`` and charge what it spent to ``role`` (victim or attacker).

        The charge is computed from this call's own completions and clock, never from the
        model's running counters: a model is shared (cached once per process), so another job
        generating on it at the same time would otherwise leak its work into this run's costs.
        """
        t0 = time.perf_counter()
        out = model.generate(list(requests), **decoding.kwargs())
        seconds = time.perf_counter() - t0
        sequences = [c for row in out for c in row]
        self.charge(
            role,
            queries=len(sequences),
            tokens=sum(c.num_tokens for c in sequences),
            seconds=seconds,
        )
        return out

    def charge(self, role: str, *, queries: int, tokens: int, seconds: float) -> None:
        """Add a call made outside ``Generator.generate`` (e.g. a white-box forward pass)."""
        c = self.costs
        c.generated_tokens += tokens
        if role == "victim":
            c.victim_queries += queries
            c.victim_seconds += seconds
        elif role == "attacker":
            c.attacker_queries += queries
            c.attacker_seconds += seconds
        else:
            raise ValueError(f"role {role!r} is unknown; use 'victim' or 'attacker'")

    def add_seconds(self, part: str, seconds: float) -> None:
        """Add seconds to ``scoring`` or ``search``."""
        setattr(self.costs, f"{part}_seconds", getattr(self.costs, f"{part}_seconds") + seconds)

    def finish(self) -> Costs:
        """The counters with the wall time filled in."""
        self.costs.wall_seconds = time.perf_counter() - self.started
        return self.costs


def ask_victim(
    meter: CostMeter,
    victim: Generator,
    prompts: Sequence[str],
    split: SplitSnippet,
    *,
    as_chat: bool,
) -> list[str]:
    """Greedy victim outputs for ``prompts`` in one batched call (``max_new_tokens = len(suffix)``)."""
    if not prompts:
        return []
    requests = [victim_request(p, victim, as_chat=as_chat) for p in prompts]
    greedy = Decoding(max_new_tokens=max(1, split.suffix_tokens))
    rows = meter.generate("victim", victim, requests, greedy)
    return [row[0].text for row in rows]


def victim_budget(split: SplitSnippet, options: AttackOptions) -> int:
    """New tokens the victim may write: ``len(suffix)`` for the ``first`` window, the whole
    snippet's ``length`` for ``last`` (the reference code: vLLM ``max_tokens = max_length``, then
    the last ``len(suffix)`` tokens scored), so that ``last`` can cut something."""
    if options.scoring.output_window == "last":
        return max(1, split.length)
    return max(1, split.suffix_tokens)


def victim_decoding(split: SplitSnippet, options: AttackOptions) -> Decoding:
    """How the victim (or the base model answering for it) decodes in every method: greedy, as
    the paper, with :func:`victim_budget` new tokens."""
    return Decoding(max_new_tokens=victim_budget(split, options))


@dataclass(frozen=True)
class VictimAnswer:
    """The victim's answer to one prompt and the part of it that is scored.

    Attributes:
        text: everything the victim generated.
        scored: the output window (``len(suffix)`` tokens) that Mem is computed on.
        source: how the window was cut: ``ids`` (generated ids), ``text`` (re-tokenized) or
            ``words`` (whitespace split).
    """

    text: str
    scored: str
    source: str


def answer_victim(
    meter: CostMeter,
    victim: Generator,
    prompts: Sequence[str],
    split: SplitSnippet,
    options: AttackOptions,
    *,
    as_chat: bool,
) -> list[VictimAnswer]:
    """Greedy victim answers to ``prompts`` in one batched call, each with its scored window."""
    requests = [victim_request(p, victim, as_chat=as_chat) for p in prompts]
    return answer_requests(meter, victim, requests, split, options)


def answer_requests(
    meter: CostMeter,
    model: Generator,
    requests: Sequence[Request],
    split: SplitSnippet,
    options: AttackOptions,
    *,
    role: str = "victim",
) -> list[VictimAnswer]:
    """Greedy answers of ``model`` (the victim, or the base model for P-S-Base), windowed.

    The budget is :func:`victim_budget`; the window (``options.scoring.output_window``) is cut
    from the generated ids when the backend returns them (see ``metrics.window_text``).
    """
    if not requests:
        return []
    rows = meter.generate(role, model, list(requests), victim_decoding(split, options))
    tokenizer = _scoring_tokenizer(split, model)
    out = []
    for row in rows:
        completion = row[0]
        # A whitespace split counts words, not model tokens: the ids do not apply then.
        ids = completion.token_ids if tokenizer is not None else None
        scored, source = window_text(
            completion.text,
            split.suffix_tokens,
            options.scoring.output_window,
            tokenizer=tokenizer,
            token_ids=ids,
        )
        out.append(VictimAnswer(completion.text, scored, source))
    return out


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
        tokenizer=_scoring_tokenizer(split, victim),
        suffix_tokens=None if windowed else split.suffix_tokens,
    )
    meter.add_seconds("scoring", time.perf_counter() - t0)
    return scores


def _scoring_tokenizer(split: SplitSnippet, victim: Generator) -> Any:
    # The output window counts tokens of the tokenizer that cut the split; that is the victim's
    # unless the split was cut by whitespace (then None: metrics counts whitespace words).
    if split.tokenizer_name == "whitespace":
        return None
    return victim.tokenizer


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
        "options": options.to_dict(),
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


def split_bos_in_prefix(split: SplitSnippet) -> bool:
    """Whether the split counted a BOS token among the prefix tokens (reference convention)."""
    return bool(getattr(split, "bos_in_prefix", False))


def generation_record(
    split: SplitSnippet, options: AttackOptions, answers: Sequence[VictimAnswer] = ()
) -> dict[str, Any]:
    """The victim's generation budget and the scored window, for the manifest."""
    sources = sorted({a.source for a in answers})
    return {
        "budget_tokens": victim_budget(split, options),
        "window": options.scoring.output_window,
        "window_tokens": split.suffix_tokens,
        "window_cut_from": sources[0] if len(sources) == 1 else (sources or None),
    }


def reference_mem(trace: Sequence[Candidate]) -> float | None:
    """The reference code's ``best_rougeL``: ``max(Mem(p_init), Mem(p*_rounds))``.

    ``p*_rounds`` is the argmax of the objective over the refinement rounds (round ≥ 1): the
    reference picks its optimized prompt among the iterations' best, then compares its Mem with
    the initial prompt's (run.py: ``max(rougel_init, opt_rougeL)``). ``None`` without p_init.
    """
    init = [c for c in trace if c.round == 0 and "empty" not in c.flags]
    if not init:
        return None
    best_round = best_of([c for c in trace if c.round >= 1])
    return max(init[0].mem, best_round.mem) if best_round is not None else init[0].mem


def best_mem(trace: Sequence[Candidate]) -> float | None:
    """The highest Mem among the trace's scored (non-empty) candidates."""
    mems = [c.mem for c in trace if "empty" not in c.flags]
    return max(mems) if mems else None


def best_of(candidates: Sequence[Candidate]) -> Candidate | None:
    """Highest objective among eligible candidates (not ``empty``); the first wins ties."""
    best = None
    for cand in candidates:
        if "empty" in cand.flags:
            continue
        if best is None or cand.objective > best.objective:
            best = cand
    return best


def build_result(
    method: str,
    split: SplitSnippet,
    *,
    chosen: Candidate | None,
    trace: list[Candidate],
    alpha: float,
    dis: float | None,
    meter: CostMeter,
    manifest: dict[str, Any],
    status: str = "finished",
    mem_init: float | None = None,
    mem_reference: float | None = None,
) -> AttackResult:
    """An AttackResult from the chosen candidate (``None``: cancelled before anything was scored).

    ``mem_best`` is filled from the trace; ``mem_init`` / ``mem_reference`` only by methods with
    an initial prompt of their own. PII is counted in the scored window of the output.
    """
    output = chosen.output if chosen else ""
    scored = chosen.extra.get("scored_output", output) if chosen else ""
    return AttackResult(
        method=method,
        snippet_id=split.snippet.id,
        domain=split.snippet.domain,
        length=split.length,
        prompt=chosen.prompt if chosen else "",
        output=output,
        mem=chosen.mem if chosen else 0.0,
        lcs_p=chosen.lcs_p if chosen else 0.0,
        objective=chosen.objective if chosen else 0.0,
        alpha=alpha,
        dis=dis,
        trace=trace,
        pii=pii_report(split.suffix, scored).to_dict(),
        costs=meter.finish(),
        manifest=manifest,
        status=status,
        mem_init=mem_init,
        mem_best=best_mem(trace),
        mem_reference=mem_reference,
    )
