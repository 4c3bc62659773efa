"""The victim's side of every method: its requests, greedy budget and decoding, its answers
and the window of them that is scored."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.metrics import window_text
from memprobe_core.models.base import Decoding, Generator, Request
from memprobe_core.snippets.split import SplitSnippet


def victim_request(prompt: str, victim: Generator, *, as_chat: bool) -> Request:
    """What the victim gets for ``prompt``: a one-message chat or the raw text."""
    if as_chat and victim.has_chat_template:
        return [{"role": "user", "content": prompt}]
    return prompt


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
    from the generated ids when the backend returns them (see ``metrics.window_text``). With
    ``options.speculative`` the true suffix goes along as each request's reference: a backend
    that can drafts from it, with the same answers (docs/method.md §9).
    """
    if not requests:
        return []
    references = [split.suffix] * len(requests) if options.speculative else None
    rows = meter.generate(
        role, model, list(requests), victim_decoding(split, options), references=references
    )
    tokenizer = scoring_tokenizer(split, model)
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


def scoring_tokenizer(split: SplitSnippet, victim: Generator) -> Any:
    # The output window counts tokens of the tokenizer that cut the split; that is the victim's
    # unless the split was cut by whitespace (then None: metrics counts whitespace words).
    if split.tokenizer_name == "whitespace":
        return None
    return victim.tokenizer


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
