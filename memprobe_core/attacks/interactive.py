"""The attacker loop: the paper's Algorithm 1 (interactive sampling, best-of-n).

1. ``p_init = M_init(meta_init(d))`` (greedy), scored like any candidate (round 0).
2. For ``t = 1..T``: ``n`` candidates ``p ~ M'(meta_refine || p_best)`` at temperature 1.0 with
   seed ``seed + t`` in ONE attacker call; the victim answers them greedily in ONE batched call
   (``max_new_tokens = len(suffix)``, or ``length`` with the ``last`` window); each is scored
   with ``O = α·Mem − (1−α)·LCS_P``; the round's argmax becomes ``p_best`` (as in Algorithm 1,
   even if it is worse than the previous round's: the loop explores from it, while p* below
   keeps the best ever).
3. ``p* = argmax O`` over ``p_init`` and all rounds; ``Dis = dis(p_init, p*)``. The result also
   records ``mem_init``, ``mem_best`` (highest Mem seen) and ``mem_reference`` (the reference
   code's ``best_rougeL``), so a report can name which one it shows.

Candidates that come back empty are kept in the trace flagged ``"empty"`` (never sent to the
victim, never chosen); a prompt already scored earlier in the run is flagged ``"duplicate"`` and
reuses the earlier (greedy, hence identical) victim output instead of a new query; a prompt whose
writing hit ``max_prompt_tokens`` is flagged ``"truncated"`` (kept and scored like the others).

``options.interactive.batched=False`` makes one call per candidate (attacker and victim), for the benchmark.
"""

from __future__ import annotations

import dataclasses
import threading
import time

from memprobe_core.attacks import prompts as meta
from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.events import (
    CandidateScored,
    EventCallback,
    Finished,
    RoundFinished,
    RoundStarted,
    emit,
)
from memprobe_core.attacks.figures import Figure, Table1Entry
from memprobe_core.attacks.manifest import build_manifest
from memprobe_core.attacks.model_set import ModelSet, require
from memprobe_core.attacks.options import AttackOptions, InteractiveOptions
from memprobe_core.attacks.registry import MethodSpec, register
from memprobe_core.attacks.result import (
    DUPLICATE,
    EMPTY,
    TRUNCATED,
    AttackResult,
    Cancelled,
    Candidate,
    best_of,
    build_result,
    check_cancel,
    reference_mem,
)
from memprobe_core.attacks.scoring import make_candidate, resolve_alpha, score
from memprobe_core.attacks.victim import (
    VictimAnswer,
    answer_victim,
    generation_record,
    victim_decoding,
)
from memprobe_core.measuring.many_prompts import (
    ELICITING_PROMPTS,
    ELICITING_THRESHOLD_KEY,
    describe_eliciting,
    eliciting_record,
)
from memprobe_core.metrics import dis, lcs_p
from memprobe_core.models.base import Completion, Decoding
from memprobe_core.models.live import writing
from memprobe_core.snippets.split import SplitSnippet

METHOD = "interactive"
_NO_ANSWER = VictimAnswer("", "", "none")  # an empty prompt is never sent to the victim


def init_decoding(options: AttackOptions) -> Decoding:
    """The init model writes the first prompt greedily (paper §3.2)."""
    return Decoding(max_new_tokens=options.interactive.max_prompt_tokens or 1, seed=options.seed)


def attacker_decoding(options: AttackOptions, round_: int) -> Decoding:
    """The attacker samples the round's ``n`` candidates from one request (seed: seed + round)."""
    return Decoding(
        max_new_tokens=options.interactive.max_prompt_tokens or 1,
        temperature=options.interactive.attacker_temperature,
        top_p=options.interactive.attacker_top_p,
        n=options.interactive.n_candidates,
        seed=options.seed + round_,
    )


class _Loop:
    """State of one run of Algorithm 1 (kept small: the entry function drives it)."""

    def __init__(
        self,
        split: SplitSnippet,
        models: ModelSet,
        options: AttackOptions,
        on_event: EventCallback | None,
        cancel: threading.Event | None,
    ) -> None:
        self.split, self.options, self.on_event, self.cancel = split, options, on_event, cancel
        self.victim = models.victim
        self.attacker = require(models.attacker, "attacker", METHOD, "it proposes the prompts")
        self.init = models.init or self.attacker
        self.alpha, self.alpha_source = resolve_alpha(split, models, options)
        self.meter = CostMeter()
        self.trace: list[Candidate] = []
        self.seen: dict[str, Candidate] = {}  # prompt -> first candidate with it (victim cache)
        self.answers: dict[str, VictimAnswer] = {}  # prompt -> the victim's answer (cache)
        self.truncated: set[str] = set()  # prompts whose writing hit max_prompt_tokens
        self.wording = meta.wording(options.meta_prompts or "paper+reply-only")

    # --- attacker side ------------------------------------------------------------------------
    def _clean(self, completion: Completion) -> str:
        """The question in an attacker reply; noted as truncated when the reply hit the cap."""
        prompt = meta.clean_prompt(completion.text)
        # Both signs: some backends report "length" by default without counting tokens.
        hit_cap = completion.num_tokens >= (self.options.interactive.max_prompt_tokens or 0)
        if prompt and completion.finish_reason == "length" and hit_cap:
            self.truncated.add(prompt)
        return prompt

    def propose_init(self) -> str:
        material = (
            self.split.text if self.options.interactive.access == "full" else self.split.prefix
        )
        request = meta.init_request(
            material,
            chat=self.init.has_chat_template,
            meta_prompt=self.options.interactive.init_meta_prompt or self.wording.init,
        )
        with writing("attacker", score=self._prompt_scores):
            rows = self.meter.generate(
                "attacker", self.init, [request], init_decoding(self.options)
            )
        return self._clean(rows[0][0])

    def _prompt_scores(self, row: int, text: str) -> dict[str, float]:
        """The live view's score of a prompt being written: how much of the suffix it gives."""
        return {"LCS_P": lcs_p(meta.clean_prompt(text), self.split.suffix, self.options.scoring)}

    def propose(self, p_best: str, round_: int) -> list[str]:
        o = self.options
        request = meta.refine_request(
            p_best,
            chat=self.attacker.has_chat_template,
            meta_prompt=o.interactive.refine_meta_prompt or self.wording.refine,
        )
        decoding = attacker_decoding(o, round_)
        with writing("attacker", score=self._prompt_scores):
            if o.interactive.batched:
                rows = self.meter.generate("attacker", self.attacker, [request], decoding)
                replies = list(rows[0])
            else:
                # One call per candidate with distinct seeds: same distribution, not the same
                # samples.
                replies = []
                for i in range(o.interactive.n_candidates):
                    check_cancel(self.cancel)
                    seed = (o.seed + round_) * 100_003 + i
                    one = dataclasses.replace(decoding, n=1, seed=seed)
                    rows = self.meter.generate("attacker", self.attacker, [request], one)
                    replies.append(rows[0][0])
        return [self._clean(c) for c in replies]

    # --- victim side --------------------------------------------------------------------------
    def score_round(self, round_: int, prompts: list[str]) -> list[Candidate]:
        """Ask the victim, score, emit; cancel is checked between candidates.

        Batched: one victim call for the round's new prompts and one scoring pass (the suffix
        tokenized once). Unbatched: one victim call and one scoring call per candidate.
        """
        flags: list[list[str]] = []
        fresh: list[str] = []  # prompts the victim must answer, in order, each once
        for p in prompts:
            if not p:
                flags.append([EMPTY])
            elif p in self.seen or p in fresh:
                flags.append([DUPLICATE])
            else:
                flags.append([])
                fresh.append(p)
            if p in self.truncated:
                flags[-1].append(TRUNCATED)
        answers = self.answers
        scores = None
        if self.options.interactive.batched:
            answers.update(zip(fresh, self._ask(fresh)))
            scores = self._score(prompts, [self._scored(p) for p in prompts])
        out: list[Candidate] = []
        for i, (p, f) in enumerate(zip(prompts, flags)):
            check_cancel(self.cancel)
            if scores is None:
                if p and p not in answers:
                    answers[p] = self._ask([p])[0]
                sc = self._score([p], [self._scored(p)])[0]
            else:
                sc = scores[i]
            cand = make_candidate(round_, i, p, answers.get(p, _NO_ANSWER), sc, flags=f)
            self.trace.append(cand)
            if p and p not in self.seen:
                self.seen[p] = cand
            out.append(cand)
            emit(self.on_event, CandidateScored(round=round_, candidate=cand))
        return out

    def _ask(self, prompts: list[str]) -> list[VictimAnswer]:
        return answer_victim(
            self.meter, self.victim, prompts, self.split, self.options, as_chat=True
        )

    def _scored(self, prompt: str) -> str:
        answer = self.answers.get(prompt)
        return answer.scored if answer is not None else ""

    def _score(self, prompts: list[str], outputs: list[str]) -> list:
        return score(
            self.meter,
            prompts,
            outputs,
            self.split,
            self.victim,
            self.options,
            self.alpha,
            windowed=True,
        )

    def finish_round(self, round_: int, cands: list[Candidate]) -> Candidate | None:
        best = best_of(cands)
        if best is not None:  # a round cancelled before its first candidate has no best
            best.is_round_best = True
            emit(self.on_event, RoundFinished(round=round_, best=best))
        return best


def run_interactive(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
) -> AttackResult:
    """Run the attacker loop (Algorithm 1) on one split.

    Args:
        split: the snippet cut into prefix and suffix by the victim's tokenizer.
        models: ``victim`` and ``attacker`` (``init`` defaults to the attacker).
        options: rounds T, candidates n, α, access, meta-prompts, sampling, seed, batching.
        on_event: receives ``round_started`` {round, n}, ``candidate_scored`` {round, candidate},
            ``round_finished`` {round, best} and, last, ``finished`` {result}.
        cancel: checked between candidates; a cancelled run returns the best so far with
            ``status="cancelled"`` (and still emits ``finished``).

    Returns:
        An AttackResult for p*; ``dis = dis(p_init, p*)``.

    Raises:
        MissingModelError: no attacker model.
    """
    loop = _Loop(split, models, options, on_event, cancel)
    status = "finished"
    p_init: str | None = None
    fallback: str | None = None
    round_ = 0
    try:
        emit(on_event, RoundStarted(round=0, n=1))
        check_cancel(cancel)
        p_init = loop.propose_init()
        best = loop.finish_round(0, loop.score_round(0, [p_init]))
        p_best = best.prompt if best is not None else ""
        for round_ in range(1, options.interactive.rounds + 1):
            emit(on_event, RoundStarted(round=round_, n=options.interactive.n_candidates))
            check_cancel(cancel)
            if not p_best:
                # The init model gave nothing usable: refine from the first words of the prefix
                # (material the init model saw) rather than from an empty question; recorded.
                p_best = " ".join(split.prefix.split()[:12])
                fallback = p_best
            cands = loop.score_round(round_, loop.propose(p_best, round_))
            best = loop.finish_round(round_, cands)
            if best is not None:
                p_best = best.prompt
    except Cancelled:
        status = "cancelled"
    chosen = best_of(loop.trace)
    manifest = _manifest(loop, split, models, options, status, round_, p_init, fallback)
    t0 = time.perf_counter()
    dis_value = dis(p_init, chosen.prompt) if (chosen is not None and p_init) else None
    loop.meter.add_seconds("scoring", time.perf_counter() - t0)
    init = loop.trace[0] if loop.trace and EMPTY not in loop.trace[0].flags else None
    result = build_result(
        METHOD,
        split,
        chosen=chosen,
        trace=loop.trace,
        alpha=loop.alpha,
        dis=dis_value,
        meter=loop.meter,
        manifest=manifest,
        status=status,
        mem_init=init.mem if init is not None else None,
        mem_reference=reference_mem(loop.trace),
    )
    # Many-prompt robustness over every prompt the loop wrote (docs/method.md §23).
    result.verbatim.update(eliciting_record(loop.trace))
    emit(on_event, Finished(result=result))
    return result


def _manifest(
    loop: _Loop,
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    status: str,
    round_: int,
    p_init: str | None,
    fallback: str | None,
) -> dict:
    """The interactive method's manifest: decoding of each role, meta-prompts, generation."""
    return build_manifest(
        METHOD,
        split,
        models,
        options,
        loop.alpha,
        loop.alpha_source,
        decoding={
            "victim": victim_decoding(split, options).manifest(),
            "init": init_decoding(options).manifest(),
            "attacker": {
                **attacker_decoding(options, 0).manifest(),
                "n": options.interactive.n_candidates,
                "seed_per_round": "seed + round",
            },
        },
        extra={
            "access": options.interactive.access,
            "init_format": "chat" if loop.init.has_chat_template else "few-shot text",
            "attacker_format": "chat" if loop.attacker.has_chat_template else "few-shot text",
            "victim_format": "chat" if loop.victim.has_chat_template else "raw text",
            "meta_prompts": meta.wording_name(
                loop.wording.name,
                options.interactive.init_meta_prompt,
                options.interactive.refine_meta_prompt,
            ),
            "init_meta_prompt": options.interactive.init_meta_prompt or loop.wording.init,
            "refine_meta_prompt": options.interactive.refine_meta_prompt or loop.wording.refine,
            "max_prompt_tokens": options.interactive.max_prompt_tokens,
            "generation": generation_record(split, options, list(loop.answers.values())),
            "rounds_done": round_ if status == "finished" else max(0, round_ - 1),
            "p_init": p_init,
            "refine_fallback": fallback,
        },
    )


# Many-prompt robustness (docs/method.md §23): the loop writes many prompts a unit, and counts
# the distinct ones whose answer elicits the suffix.
FIGURES: tuple[Figure, ...] = (
    Figure(
        ELICITING_PROMPTS,
        "eliciting prompts",
        "int",
        "distinct prompts of the unit whose answer elicits the suffix (Mem − LCS_P ≥ threshold)",
        table1=Table1Entry(
            "mean", text="elicit", html="eliciting prompts (mean per unit)", digits=1
        ),
    ),
    Figure(
        ELICITING_THRESHOLD_KEY,
        "eliciting threshold",
        "float",
        "the threshold on Mem − LCS_P an eliciting prompt reaches",
    ),
)


register(
    MethodSpec(
        name=METHOD,
        label="Ours (interactive)",
        run=run_interactive,
        roles=("victim", "attacker", "init"),
        rank=50,
        options_key="interactive",
        options_class=InteractiveOptions,
        default_in_audit=True,
        summary="an attacker LLM rewrites an instruction prompt over refinement rounds",
        # The initial prompt, then n candidates in each of T rounds.
        candidates=lambda options: (
            1 + options.interactive.rounds * options.interactive.n_candidates
        ),
        # Each round's candidates are answered in one call.
        batches=lambda options: (
            [1] + [options.interactive.n_candidates] * options.interactive.rounds
        ),
        short_label="Ours",
        figures=FIGURES,
        describe=describe_eliciting,
    )
)
