"""ACR, the adversarial compression ratio (Schwarzschild et al. 2024, "Rethinking LLM memorization
through the lens of adversarial compression"; docs/method.md §15).

A target is memorized when some prompt *shorter than the target* makes the victim write it back
exactly: ``ACR = target tokens / prompt tokens`` and the verdict is ``ACR > 1``. The target is
the split's true suffix (the victim's own tokens of it, as in ``verbatim``). The shortest prompt
is searched with the GCG engine of :mod:`memprobe_core.attacks.gcg_core` on the victim itself
(its weights and gradients), at growing prompt lengths:

- **Schedule** (:func:`length_schedule`): ``min_tokens``, then ``step_tokens`` more at a time, up
  to ``max_tokens`` (the last length is always ``max_tokens`` itself). The defaults start at 5
  (where the paper's MiniPrompt starts) and grow by 5: each length costs a whole GCG budget, so
  the grid is coarse (``min_tokens=1, step_tokens=1`` for the finest); ``max_tokens`` at ``None``
  is twice the target, capped at 64 but never below the target (:func:`max_prompt_tokens`), so
  the verdict can always be reached and a random string ends with "nothing found up to N".
  Each length gets ``steps_per_length`` GCG steps (``top_k``, ``search_width``, ``batch_size``
  as for GCG); 0 only checks each length's initial prompt.
- **Initial prompt** (:func:`initial_prompt`): with ``init="prefix"`` (default) a length of L
  starts from the true prefix's last L tokens, so the search never starts behind what the
  prefix itself already elicits; once L passes the prefix's length, and always with
  ``init="filler"`` (the paper's start from scratch), it starts from the previous length's best
  prompt with ``filler`` tokens put *in front* (the end of the prompt, next to the target, keeps
  what the search learned).
- **Exactness**: whether greedy decoding of ``lead + prompt`` starts with the whole target is one
  teacher-forced forward pass (``hf_speculative.greedy_agreement``, docs/method.md §9). It is
  checked on each length's initial prompt and after every GCG step whose best prompt changed,
  on the *decoded* prompt re-encoded as the victim would encode it (the victim only ever sees
  text), and the whole search stops at the first success: the lengths grow, so the first
  success is the shortest prompt found.

The found prompt (or, when none was found, the best prompt of the longest length tried) is then
answered by the victim and scored like every method's, so the result has an output and a Mem
and the unit runner measures its verbatim metrics. ``result.verbatim`` carries the ACR figures
(:func:`acr_record`): ``acr``, ``acr_prompt_tokens``, ``acr_target_tokens``, ``acr_memorized``
and ``acr_bound``. Both the search's misses and the schedule's step make the measured ACR a
lower bound of the true one; ``acr_bound`` (nothing found) is an upper bound *under this
search budget*, not a proof.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.events import (
    CandidateScored,
    EventCallback,
    Finished,
    RoundFinished,
    RoundStarted,
    SearchStep,
    emit,
)
from memprobe_core.attacks.figures import Figure, Table1Entry
from memprobe_core.attacks.gcg_core import (
    GcgSearchConfig,
    SearchCounts,
    charge_search,
    gcg_search,
    tokenizer_lead_ids,
)
from memprobe_core.attacks.manifest import build_manifest
from memprobe_core.attacks.model_set import MissingModelError, ModelSet, has_weights
from memprobe_core.attacks.options import (
    MAX_PROMPT_TOKENS,
    MAX_SEARCH_WIDTH,
    MAX_STEPS,
    MAX_TOP_K,
    AttackOptions,
    GCGOptions,
)
from memprobe_core.attacks.registry import MethodSpec, register
from memprobe_core.attacks.result import AttackResult, build_result
from memprobe_core.attacks.scoring import make_candidate, resolve_alpha, score
from memprobe_core.attacks.signals_only import unscored_result
from memprobe_core.attacks.verbatim_only import suffix_ids
from memprobe_core.attacks.victim import (
    VictimAnswer,
    answer_requests,
    generation_record,
    victim_decoding,
)
from memprobe_core.errors import OptionError
from memprobe_core.models.base import Generator, TextTokenizer
from memprobe_core.models.measure_cache import tokenizer_name
from memprobe_core.option_fields import check_options, option
from memprobe_core.records import JsonValue, VerbatimRecord
from memprobe_core.snippets.split import SplitSnippet

logger = logging.getLogger(__name__)
METHOD = "acr"

ACRInit = Literal["prefix", "filler"]
ACR_INITS: tuple[str, ...] = get_args(ACRInit)

# The default longest prompt: twice the target, but at most this many tokens (each length costs
# a full GCG budget) and never fewer than the target (below it the verdict ACR > 1 is unreachable).
DEFAULT_MAX_TOKENS_CAP = 64


@dataclass(frozen=True)
class ACROptions:
    """ACR's options (``--method-option acr.FIELD=VALUE``).

    Attributes:
        min_tokens / step_tokens / max_tokens: the prompt lengths tried, growing
            (:func:`length_schedule`); ``max_tokens`` ``None``: :func:`max_prompt_tokens`.
        steps_per_length: GCG steps at each length (0: only each length's initial prompt).
        top_k / search_width / batch_size: the GCG search (``batch_size`` ``None``: as many
            candidates per pass as fit GCG's logits budget).
        init: where each length's search starts: ``prefix`` (the true prefix's last tokens) or
            ``filler`` (filler tokens, the paper's start from scratch); see :func:`initial_prompt`.
        filler: the text whose tokens pad a prompt to its length (nanoGCG starts from "x x x").
    """

    min_tokens: int = option(
        5,
        help="the shortest prompt length tried",
        low=1,
        high=MAX_PROMPT_TOKENS,
        page="Shortest prompt (tokens)",
    )
    step_tokens: int = option(
        5,
        help="prompt tokens added from one length to the next",
        low=1,
        high=MAX_PROMPT_TOKENS,
        page="Step (tokens)",
    )
    max_tokens: int | None = option(
        None,
        help="the longest prompt tried (at least min_tokens)",
        low=1,
        high=MAX_PROMPT_TOKENS,
        default_text=f"twice the target, at most {DEFAULT_MAX_TOKENS_CAP}, never below the target",
    )
    steps_per_length: int = option(
        GCGOptions.steps,
        help="GCG steps at each length (0: only each length's first prompt)",
        low=0,
        high=MAX_STEPS,
        page="GCG steps per length",
    )
    top_k: int = option(
        GCGOptions.top_k,
        help="GCG's substitutions per position",
        low=1,
        high=MAX_TOP_K,
        page="Top-k",
    )
    search_width: int = option(
        GCGOptions.search_width,
        help="GCG's candidates per step",
        low=1,
        high=MAX_SEARCH_WIDTH,
        page="Search width",
    )
    batch_size: int | None = option(
        None,
        help="candidates per forward pass",
        low=1,
        high=MAX_SEARCH_WIDTH,
        default_text="as many as fit GCG's logits budget",
    )
    init: ACRInit = option(
        "prefix",
        help="where each length starts: prefix (the true prefix's last tokens) or filler (from "
        "scratch, as the paper)",
        page="Start from",
    )
    filler: str = option(
        " x", help="the text whose tokens pad a prompt to its length", page="Filler", nonblank=True
    )

    def __post_init__(self) -> None:
        check_options(self, prefix="acr.")
        if self.max_tokens is not None and self.max_tokens < self.min_tokens:
            raise OptionError(
                "acr.max_tokens", self.max_tokens, f"give at least acr.min_tokens={self.min_tokens}"
            )


# --- the arithmetic ------------------------------------------------------------------------------


def acr_value(target_tokens: int, prompt_tokens: int) -> float:
    """The adversarial compression ratio: target tokens per prompt token."""
    if prompt_tokens < 1:
        raise ValueError(f"a prompt of {prompt_tokens} tokens has no compression ratio")
    return target_tokens / prompt_tokens


def acr_record(
    target_tokens: int, prompt_tokens: int | None, longest_tried: int | None
) -> VerbatimRecord:
    """The ``verbatim`` figures of an ACR result.

    Args:
        target_tokens: tokens of the target (the true suffix).
        prompt_tokens: tokens of the shortest prompt that reproduces it (``None``: none found).
        longest_tried: the longest prompt length searched (``None``: nothing was searched).
    """
    found = prompt_tokens is not None
    acr = acr_value(target_tokens, prompt_tokens) if prompt_tokens is not None else None
    # Nothing found up to L tokens: the shortest prompt (if any) is longer, so ACR < target / L.
    bound = target_tokens / longest_tried if not found and longest_tried else None
    return {
        "acr": acr,
        "acr_prompt_tokens": prompt_tokens,
        "acr_target_tokens": target_tokens,
        "acr_memorized": acr is not None and acr > 1,
        "acr_bound": bound,
    }


def max_prompt_tokens(options: ACROptions, target_tokens: int) -> int:
    """The longest prompt tried: ``options.max_tokens``, else twice the target capped at
    ``DEFAULT_MAX_TOKENS_CAP`` but never below the target (and never below ``min_tokens``)."""
    if options.max_tokens is not None:
        return options.max_tokens
    default = max(target_tokens, min(2 * target_tokens, DEFAULT_MAX_TOKENS_CAP))
    return max(options.min_tokens, default)


def length_schedule(min_tokens: int, step_tokens: int, max_tokens: int) -> list[int]:
    """The prompt lengths tried, in order: ``min_tokens``, ``step_tokens`` more each time, and
    ``max_tokens`` last even when the steps skip it (the bound is then exactly ``max_tokens``)."""
    if not 1 <= min_tokens <= max_tokens or step_tokens < 1:
        raise ValueError(
            f"no schedule from {min_tokens} to {max_tokens} tokens by {step_tokens}: "
            "give 1 <= min_tokens <= max_tokens and step_tokens >= 1"
        )
    lengths = list(range(min_tokens, max_tokens + 1, step_tokens))
    if lengths[-1] != max_tokens:
        lengths.append(max_tokens)
    return lengths


def initial_prompt(
    tokens: int, previous: Sequence[int], prefix: Sequence[int], filler: Sequence[int]
) -> list[int]:
    """Where the search at ``tokens`` prompt tokens starts.

    The prefix's last ``tokens`` tokens when it has that many (``prefix`` is empty under
    ``init="filler"``); otherwise the previous length's best prompt (or, at the first length,
    the whole prefix) with filler tokens in front to make up the length.
    """
    if len(prefix) >= tokens:
        return list(prefix[len(prefix) - tokens :])
    kept = list(previous) if previous else list(prefix)
    missing = tokens - len(kept)
    if not filler:
        raise ValueError("ACR: the filler has no tokens to pad a prompt with")
    run = (list(filler) * (missing // len(filler) + 1))[:missing]
    return run + kept


# --- the search ----------------------------------------------------------------------------------


@dataclass
class LengthTry:
    """The search at one prompt length.

    Attributes:
        tokens: the prompt length searched.
        ids / prompt: its best prompt (lowest loss), as ids and decoded.
        prompt_tokens: tokens of ``prompt`` as the victim encodes the text (``tokens`` when the
            ids round-trip; GCG's candidates always do, a filler start may not).
        matched: leading target tokens greedy decoding of ``prompt`` reproduces.
        exact: ``matched`` is the whole target (the search stopped here).
        steps: GCG steps run; initial_loss / best_loss / losses: its loss curve (``None`` and
            empty when no step ran).
        evaluated / dropped: candidates scored / dropped for not round-tripping.
    """

    tokens: int
    ids: list[int]
    prompt: str
    prompt_tokens: int
    matched: int
    exact: bool
    steps: int = 0
    initial_loss: float | None = None
    best_loss: float | None = None
    losses: list[float] = field(default_factory=list)
    evaluated: int = 0
    dropped: int = 0

    def record(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "ids"}


@dataclass
class ACRSearch:
    """The whole search: the lengths planned and tried, and the model work they cost."""

    target_tokens: int
    schedule: list[int]
    tries: list[LengthTry] = field(default_factory=list)
    cancelled: bool = False
    counts: SearchCounts = field(default_factory=SearchCounts)

    @property
    def found(self) -> LengthTry | None:
        """The length whose prompt reproduces the target (the shortest: the search stops there)."""
        return next((t for t in self.tries if t.exact), None)

    @property
    def answered(self) -> LengthTry | None:
        """The prompt the victim answers: the found one, else the longest length's best."""
        return self.found or (self.tries[-1] if self.tries else None)

    @property
    def steps_done(self) -> int:
        return sum(t.steps for t in self.tries)


class ExactnessCheck:
    """Whether a prompt text makes the victim's greedy decoding write the whole target: one
    teacher-forced pass per distinct prompt (cached), counted as a search forward pass."""

    def __init__(self, victim: Generator, target: Sequence[int], counts: SearchCounts) -> None:
        self.victim = victim
        self.target = list(target)
        self.counts = counts
        self._matched: dict[str, int] = {}

    def matched(self, prompt: str) -> int:
        """Leading target tokens greedy decoding of ``prompt`` (raw text) reproduces."""
        if prompt not in self._matched:
            self._matched[prompt] = self._run(prompt)
        return self._matched[prompt]

    def prompt_tokens(self, prompt: str) -> int:
        """Tokens of ``prompt`` as the victim encodes it (its BOS not counted)."""
        tokenizer = self.victim.tokenizer
        return len(tokenizer.encode(prompt, add_special_tokens=False)) if tokenizer else 0

    def exact(self, prompt: str) -> bool:
        # An empty prompt has no ratio; a prompt the victim sees as nothing cannot count.
        return self.prompt_tokens(prompt) > 0 and self.matched(prompt) == len(self.target)

    def _run(self, prompt: str) -> int:
        import torch

        from memprobe_core.models.hf_speculative import greedy_agreement

        if self.prompt_tokens(prompt) == 0:
            return 0
        ids = self.victim.prompt_ids(prompt)  # type: ignore[attr-defined]  # hf backend
        pad = getattr(self.victim.tokenizer, "pad_token_id", None)
        t0 = time.perf_counter()
        with torch.inference_mode():
            (matched,) = greedy_agreement(
                self.victim.torch_model,  # type: ignore[attr-defined]  # checked white box
                [ids],
                [self.target],
                pad_id=int(pad) if pad is not None else 0,
                screen=getattr(self.victim, "screened_head", True),
            )
        self.counts.add_forward(1, len(ids) + len(self.target) - 1, time.perf_counter() - t0)
        return int(matched)


@dataclass
class _Plan:
    """What every length's search shares (built once by :func:`search_shortest_prompt`)."""

    victim: Generator
    tok: TextTokenizer
    target: list[int]
    lead: list[int]
    options: ACROptions
    gcg: GcgSearchConfig  # every length's GCG search: ACR's sizes, the seed, special tokens
    check: ExactnessCheck
    planned_steps: int
    on_event: EventCallback | None
    cancel: threading.Event | None

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)


def search_shortest_prompt(
    victim: Generator,
    split: SplitSnippet,
    target: Sequence[int],
    options: ACROptions,
    *,
    seed: int = 0,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
) -> ACRSearch:
    """The growing-length search for the shortest prompt whose greedy output is ``target``.

    Args:
        victim: a white-box victim (``hf`` backend: ``torch_model``, ``prompt_ids``).
        split: the split (its prefix seeds the prompts under ``init="prefix"``).
        target: the target's ids in the victim's tokens.
        options: the schedule and the GCG sizes.
        seed: GCG's sampling seed (the same at every length).
        on_event: a ``SearchStep`` per GCG step, numbered across the lengths.
        cancel: checked between lengths and inside each GCG search.
    """
    tok = victim.tokenizer
    assert tok is not None  # checked by _white_box_victim
    schedule = length_schedule(
        options.min_tokens, options.step_tokens, max_prompt_tokens(options, len(target))
    )
    search = ACRSearch(target_tokens=len(target), schedule=schedule)
    plan = _Plan(
        victim=victim,
        tok=tok,
        target=list(target),
        lead=tokenizer_lead_ids(tok),
        options=options,
        gcg=GcgSearchConfig(
            steps=options.steps_per_length,
            top_k=options.top_k,
            search_width=options.search_width,
            batch_size=options.batch_size,
            seed=seed,
            not_allowed=list(getattr(tok, "all_special_ids", []) or []),
        ),
        check=ExactnessCheck(victim, target, search.counts),
        planned_steps=len(schedule) * options.steps_per_length,
        on_event=on_event,
        cancel=cancel,
    )
    prefix = _prefix_ids(split, victim) if options.init == "prefix" else []
    filler = list(tok.encode(options.filler, add_special_tokens=False))
    previous: list[int] = []
    for tokens in schedule:
        if cancel is not None and cancel.is_set():
            search.cancelled = True
            break
        start = initial_prompt(tokens, previous, prefix, filler)
        attempt, cancelled = _search_length(plan, tokens, start, search)
        search.tries.append(attempt)
        logger.info(
            "ACR: %d prompt tokens, %d steps: %d/%d target tokens reproduced",
            tokens,
            attempt.steps,
            attempt.matched,
            len(target),
        )
        if attempt.exact or cancelled:
            search.cancelled = cancelled and not attempt.exact
            break
        previous = attempt.ids
    return search


def _search_length(
    plan: _Plan, tokens: int, start: list[int], search: ACRSearch
) -> tuple[LengthTry, bool]:
    """GCG at one prompt length from ``start``, stopped as soon as its best prompt reproduces
    the target; the length's record and whether the search was cancelled."""
    attempt = _length_try(plan, tokens, start)
    if attempt.exact or plan.options.steps_per_length == 0:
        return attempt, False
    offset = search.steps_done  # SearchStep numbers run on across the lengths

    def on_step(step: int, loss: float, step_loss: float, ids: list[int]) -> None:
        event = SearchStep(
            step=offset + step,
            steps=plan.planned_steps,
            loss=loss,
            step_loss=step_loss,
            best_prompt=plan.decode(ids),
        )
        emit(plan.on_event, event)

    def reproduces(ids: list[int]) -> bool:
        return plan.check.exact(plan.decode(ids))

    result = gcg_search(
        plan.victim.torch_model,  # type: ignore[attr-defined]  # checked by _white_box_victim
        plan.tok,
        start,
        plan.target,
        plan.gcg,
        lead_ids=plan.lead,
        on_step=on_step,
        stop=reproduces,
        cancel=plan.cancel,
    )
    _add_counts(search.counts, result.counts)
    attempt = _length_try(plan, tokens, result.best_ids)
    attempt.steps = len(result.losses)
    attempt.initial_loss, attempt.best_loss = result.initial_loss, result.best_loss
    attempt.losses = list(result.losses)
    attempt.evaluated, attempt.dropped = result.evaluated, result.dropped
    return attempt, result.cancelled


def _length_try(plan: _Plan, tokens: int, ids: Sequence[int]) -> LengthTry:
    """The record of ``ids`` at ``tokens`` prompt tokens, checked for exactness (cached)."""
    prompt = plan.decode(ids)
    return LengthTry(
        tokens=tokens,
        ids=list(ids),
        prompt=prompt,
        prompt_tokens=plan.check.prompt_tokens(prompt),
        matched=plan.check.matched(prompt),
        exact=plan.check.exact(prompt),
    )


def _add_counts(total: SearchCounts, part: SearchCounts) -> None:
    total.forward_passes += part.forward_passes
    total.backward_passes += part.backward_passes
    total.sequences += part.sequences
    total.tokens += part.tokens
    total.seconds += part.seconds


def _prefix_ids(split: SplitSnippet, victim: Generator) -> list[int]:
    """The true prefix in the victim's tokens, without special tokens (a BOS the split counted
    among the prefix tokens is the search's fixed lead, not part of the prompt)."""
    tok = victim.tokenizer
    assert tok is not None  # checked by _white_box_victim
    if split.tokenizer_name == tokenizer_name(tok):
        ids = list(split.prefix_ids)
    else:
        ids = list(tok.encode(split.prefix, add_special_tokens=False))
    special = set(getattr(tok, "all_special_ids", []) or [])
    return [i for i in ids if i not in special]


# --- the method ----------------------------------------------------------------------------------


def run_acr(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
    **_: Any,
) -> AttackResult:
    """Search the shortest prompt that makes the victim write the true suffix, then score the
    victim's answer to it; ``result.verbatim`` holds the ACR figures (:func:`acr_record`).

    Args:
        split: the snippet cut into prefix and suffix (the suffix is the target).
        models: ``victim`` must be white-box (the ``hf`` backend): the search needs its
            gradients and the exactness check its logits.
        options: ``options.for_method("acr")`` (:class:`ACROptions`), ``seed``, scoring and α.
        on_event: a ``SearchStep`` per GCG step, then round 1 (the prompt answered and scored)
            and ``Finished``.
        cancel: checked between steps; a search cancelled midway still has its best prompt so
            far answered (one query) and the result has ``status="cancelled"``; a cancel set
            before the start returns an unscored cancelled result.

    Raises:
        MissingModelError: the victim exposes no weights (an endpoint).
    """
    if cancel is not None and cancel.is_set():
        return _cancelled_before_start(split, models, options, on_event)
    victim = _white_box_victim(models)
    acr_options: ACROptions = options.for_method(METHOD)
    target = suffix_ids(split, victim)
    if not target:
        raise ValueError(f"ACR: snippet {split.snippet.id!r} has an empty suffix to reproduce")
    alpha, alpha_source = resolve_alpha(split, models, options)
    meter = CostMeter()
    t0 = time.perf_counter()
    search = search_shortest_prompt(
        victim, split, target, acr_options, seed=options.seed, on_event=on_event, cancel=cancel
    )
    charge_search(meter, search.counts, time.perf_counter() - t0)
    answered = search.answered
    if answered is None:  # cancelled between the start check and the first length
        return _cancelled_before_start(split, models, options, on_event)
    return _answer_and_score(
        split, models, options, acr_options, search, answered, meter, alpha, alpha_source, on_event
    )


def _answer_and_score(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    acr_options: ACROptions,
    search: ACRSearch,
    answered: LengthTry,
    meter: CostMeter,
    alpha: float,
    alpha_source: str,
    on_event: EventCallback | None,
) -> AttackResult:
    """Round 1: the victim answers the search's prompt, scored like every method's output."""
    victim = models.victim
    round_ = 1  # the search steps are not rounds: the one scored prompt is round 1, as GCG's
    emit(on_event, RoundStarted(round=round_, n=1))
    prompt = answered.prompt
    answer = answer_requests(meter, victim, [prompt], split, options, role="victim")[0]
    sc = score(meter, [prompt], [answer.scored], split, victim, options, alpha, windowed=True)[0]
    cand = make_candidate(
        round_, 0, prompt, answer, sc, is_round_best=True, extra=_search_record(search)
    )
    emit(on_event, CandidateScored(round=round_, candidate=cand))
    emit(on_event, RoundFinished(round=round_, best=cand))
    manifest = build_manifest(
        METHOD,
        split,
        models,
        options,
        alpha,
        alpha_source,
        decoding={"victim": victim_decoding(split, options).manifest()},
        extra=_manifest_extra(victim, search, acr_options, split, options, answer),
    )
    result = build_result(
        METHOD,
        split,
        chosen=cand,
        trace=[cand],
        alpha=alpha,
        dis=None,  # no initial prompt of the method's own to measure a distance from
        meter=meter,
        manifest=manifest,
        status="cancelled" if search.cancelled else "finished",
    )
    found = search.found
    result.verbatim = acr_record(
        search.target_tokens,
        found.prompt_tokens if found else None,
        search.tries[-1].tokens if search.tries else None,
    )
    emit(on_event, Finished(result=result))
    return result


def _cancelled_before_start(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    on_event: EventCallback | None,
) -> AttackResult:
    # Nothing was searched or asked, so no model is needed: not even a white-box one.
    result = unscored_result(
        METHOD,
        split,
        models,
        options,
        CostMeter(),
        cancelled=True,
        decoding={"victim": victim_decoding(split, options).manifest()},
    )
    emit(on_event, Finished(result=result))
    return result


def _white_box_victim(models: ModelSet) -> Generator:
    """The victim, checked to have weights, gradients and a tokenizer."""
    victim = models.victim
    tok = victim.tokenizer
    if not has_weights(victim) or tok is None:
        raise MissingModelError(
            f"ACR needs the victim's weights (a token-gradient search and teacher-forced "
            f"checks on it); {victim.model_id!r} (backend {victim.backend!r}) has none. Load "
            "the victim with the 'hf' backend, or use P-S-Base, which only asks it to generate."
        )
    return victim


def _search_record(search: ACRSearch) -> dict[str, Any]:
    """What the scored candidate keeps of the search: each length's record, and the outcome."""
    found = search.found
    return {
        "target_tokens": search.target_tokens,
        "found": found is not None,
        "found_at_tokens": found.tokens if found else None,
        "lengths": [t.record() for t in search.tries],
        "steps_done": search.steps_done,
    }


def _manifest_extra(
    victim: Generator,
    search: ACRSearch,
    acr_options: ACROptions,
    split: SplitSnippet,
    options: AttackOptions,
    answer: VictimAnswer,
) -> dict[str, Any]:
    """ACR's part of the manifest: the options in force, the schedule, what was tried."""
    return {
        "acr": {
            **asdict(acr_options),
            "schedule": search.schedule,
            "lengths_tried": [t.tokens for t in search.tries],
            "steps_done": [t.steps for t in search.tries],
            "found_at_tokens": search.found.tokens if search.found else None,
            "exactness_check": "teacher-forced greedy agreement on the victim, on each "
            "length's initial prompt and after every step whose best prompt changed",
            "search_model": victim.model_id,
            "prefix_cache": True,
        },
        "generation": generation_record(split, options, [answer]),
        "scored_model": "victim",
        "victim_format": "raw text",
    }


# The figures of :func:`acr_record`, as the results frame, Table 1 and the pages show them.
FIGURES: tuple[Figure, ...] = (
    Figure(
        "acr",
        "ACR",
        "float",
        "target tokens / tokens of the shortest prompt that reproduces the target (none found: empty)",
        table1=Table1Entry("median", text="ACR", html="ACR (median, found)"),
    ),
    Figure("acr_prompt_tokens", "ACR prompt tokens", "int", "tokens of that shortest prompt"),
    Figure("acr_target_tokens", "ACR target tokens", "int", "tokens of the target (the suffix)"),
    Figure(
        "acr_memorized",
        "share with ACR > 1",
        "bool",
        "memorized: ACR > 1 (the prompt is shorter than the target)",
        table1=Table1Entry("share", text="ACR>1", html="ACR > 1 (share)"),
    ),
    Figure(
        "acr_bound",
        "ACR bound",
        "float",
        "nothing found: target / longest prompt tried, an upper bound of the ACR under this search",
    ),
)


def describe_acr(verbatim: Mapping[str, JsonValue]) -> str | None:
    """One line on an ``acr`` result (``None`` for other results)."""
    if "acr_memorized" not in verbatim:
        return None
    target = verbatim.get("acr_target_tokens")
    if verbatim.get("acr") is None:
        bound = verbatim.get("acr_bound")
        below = f": ACR < {bound:.2f}" if isinstance(bound, (int, float)) else ""
        return (
            f"Adversarial compression: no prompt reproduced the {target}-token target within "
            f"the search budget{below}; not memorized."
        )
    verdict = "memorized (ACR > 1)" if verbatim.get("acr_memorized") else "not memorized"
    return (
        f"Adversarial compression: a {verbatim.get('acr_prompt_tokens')}-token prompt reproduces "
        f"the {target}-token target exactly: ACR {verbatim['acr']:.2f}, {verdict}."
    )


register(
    MethodSpec(
        name=METHOD,
        label="ACR",
        run=run_acr,
        roles=("victim",),
        rank=55,  # after the paper's methods (Table 1 order), before the measuring-only ones
        options_key=METHOD,
        options_class=ACROptions,
        white_box_roles=("victim",),
        default_in_audit=False,
        default_in_compare=False,
        summary="adversarial compression ratio: the shortest GCG prompt whose greedy output on "
        "the white-box victim is the suffix; memorized when the suffix is longer than it",
        figures=FIGURES,
        describe=describe_acr,
    )
)
