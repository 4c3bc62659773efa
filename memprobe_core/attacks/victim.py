"""The victim's side of every method: its requests, budget and decoding (greedy, as the paper,
unless a method samples), its answers and the window of them that is scored."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.metrics import lcs_p, mem, window_text
from memprobe_core.models.base import Decoding, Generator, Request
from memprobe_core.models.live import RowScorer, writing
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


def victim_decoding(split: SplitSnippet, options: AttackOptions, **sampling: Any) -> Decoding:
    """How the victim (or the base model answering for it) decodes: :func:`victim_budget` new
    tokens, greedy as the paper unless ``sampling`` gives other ``Decoding`` fields.

    A sampling method asks, e.g., ``victim_decoding(split, options, temperature=1.0, top_k=40,
    n=4, seed=options.seed)``: four samples of each request, the budget and window as every
    method's.
    """
    return Decoding(max_new_tokens=victim_budget(split, options), **sampling)


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
    decoding: Decoding | None = None,
) -> list[VictimAnswer]:
    """Answers of ``model`` (the victim, or the base model for P-S-Base), windowed.

    ``decoding`` defaults to :func:`victim_decoding` (greedy, one answer per request); with
    ``decoding.n`` samples the answers come ``n`` per request, request by request. The window
    (``options.scoring.output_window``) is cut from the generated ids when the backend returns
    them (see ``metrics.window_text``). With ``options.speculative`` a greedy call sends the
    true suffix as each request's reference: a backend that can drafts from it, with the same
    answers (docs/method.md §9); sampling has no greedy choices to draft.
    """
    if not requests:
        return []
    decoding = decoding or victim_decoding(split, options)
    drafts = options.speculative and not decoding.do_sample
    references = [split.suffix] * len(requests) if drafts else None
    labels = [request_text(r) for r in requests]
    with writing(role, labels, running_scores(split, options, labels, copies=decoding.n)):
        rows = meter.generate(role, model, list(requests), decoding, references=references)
    tokenizer = scoring_tokenizer(split, model)
    out = []
    for row in rows:
        for completion in row[: decoding.n]:
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


def request_text(request: Request) -> str:
    """What a request asks, as a reader sees it: the text, or a chat's last message."""
    return request if isinstance(request, str) else str(request[-1]["content"])


def running_scores(
    split: SplitSnippet, options: AttackOptions, prompts: Sequence[str], *, copies: int = 1
) -> RowScorer:
    """Scores of an answer being written, for the live view (``memprobe_core.models.live``):
    Mem of the text so far, before the output window cuts it (a preview: the candidate's own
    Mem follows when the batch ends), and LCS_P of the row's prompt (computed once). Rows come
    ``copies`` per prompt (the ``n`` samples of a request together)."""
    given: dict[int, float] = {}

    def scorer(row: int, text: str) -> dict[str, float]:
        prompt = row // copies
        if prompt not in given:
            given[prompt] = (
                lcs_p(prompts[prompt], split.suffix, options.scoring)
                if prompt < len(prompts)
                else 0.0
            )
        return {"Mem": mem(text, split.suffix, options.scoring), "LCS_P": given[prompt]}

    return scorer


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
