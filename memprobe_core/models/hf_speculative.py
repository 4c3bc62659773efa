"""Greedy decoding that drafts from a text it expects: the true suffix, verified by the model.

Every greedy answer an audit asks of a victim is compared with a suffix memprobe already knows.
That suffix is the ideal draft for speculative decoding: the model reads the drafted tokens in
one forward pass, and the argmax at each position says which of them greedy decoding would have
written. The longest agreeing run is kept plus the model's own next token, exactly the tokens
one-token-per-step greedy decoding gives (``docs/method.md`` §9). Where the model reproduces its
training data, the case an audit looks for, a whole suffix costs a few forward passes instead of
one per token.

After a mismatch the row re-synchronises by prompt lookup: the last few tokens it wrote are
looked up in the reference and in its prompt, and the tokens that followed there are the next
draft (Saxena's prompt-lookup decoding, transformers' ``prompt_lookup_num_tokens``).

Why not transformers' assisted generation: it decodes one row at a time, and its prompt lookup
only searches the prompt; an attacker round asks 24 rows at once, each with the suffix to draft
from. The batch here stays one left-padded batch throughout: after each verification a row's
rejected draft slots are moved to its left end and masked (``Buffer.shift_rows``), so every row
is contiguous, as in :mod:`hf_decode`'s loop, and sliding-window attention sees the tokens it
would see without drafting.

How many tokens to draft is a cost decision, never a correctness one: a pass over ``B`` rows of
``K + 1`` positions is charged ``1 + position_cost · B · (K + 1)`` (one decode step's fixed cost,
mostly reading the weights, plus a share per position), and each row's draft is expected to be
accepted token by token at the rate it has been so far. ``K`` is the draft length with the most
expected tokens per unit of cost; ``K = 0`` is a plain decode step. The schedule depends only on
the tokens, so a run is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memprobe_core.models.hf_decode import BatchDecoding, Decoded
from memprobe_core.models.hf_greedy_head import greedy_pass


@dataclass(frozen=True)
class DraftPolicy:
    """How much to draft (costs only: every policy gives the same tokens).

    Attributes:
        position_cost: a forward pass's cost per (row × position), relative to one decode step's
            fixed cost. On a 2-core CPU a pass of the embedded Gemma over 1 × 16 positions took
            2.6 steps (0.11) and 24 × 16 took 6.8 steps of 24 rows (0.03); the default 0.1 errs
            on the side of plain steps, so text the model does not know costs no more than
            without drafting; a GPU is nearer 0.005.
        max_draft: most tokens drafted for one row in one pass.
        ngram_sizes: lengths of the recent-token pattern looked up to re-synchronise, longest
            first.
        prior_acceptance: the acceptance rate assumed before a row has drafted anything.
    """

    position_cost: float = 0.1
    max_draft: int = 64
    ngram_sizes: tuple[int, ...] = (3, 2)
    prior_acceptance: float = 0.5


@dataclass
class DraftStats:
    """What drafting did over one call (a benchmark and the tests read it)."""

    passes: int = 0
    drafted: int = 0
    accepted: int = 0


class Drafter:
    """The draft of one row: where in the reference (or the prompt) the row's text is thought
    to be, and how often its drafts were accepted.

    Args:
        reference: token ids the row is expected to write (the true suffix).
        prompt: the row's prompt ids (a second place to look up).
        policy: n-gram sizes and the prior acceptance rate.
    """

    def __init__(self, reference: Sequence[int], prompt: Sequence[int], policy: DraftPolicy):
        self.sources: tuple[tuple[int, ...], ...] = (tuple(reference), tuple(prompt))
        self.policy = policy
        self.written: list[int] = []
        # (source index, position of the next expected token); None when lost.
        self.place: tuple[int, int] | None = (0, 0) if reference else None
        self.drafted = 0
        self.accepted = 0

    def observe(self, token: int) -> None:
        """The row wrote ``token``: follow the source, or look the recent tokens up again."""
        self.written.append(token)
        if self.place is not None:
            source, at = self.place
            text = self.sources[source]
            if at < len(text) and text[at] == token:
                self.place = (source, at + 1)
                return
        self.place = self._lookup()

    def _lookup(self) -> tuple[int, int] | None:
        for n in self.policy.ngram_sizes:
            if len(self.written) < n:
                continue
            pattern = tuple(self.written[-n:])
            for index, text in enumerate(self.sources):
                at = _find(text, pattern)
                if at is not None and at + n < len(text):
                    return index, at + n
        return None

    def proposal(self, limit: int) -> tuple[int, ...]:
        """Up to ``limit`` tokens the row is expected to write next (empty when lost)."""
        if self.place is None or limit <= 0:
            return ()
        source, at = self.place
        return self.sources[source][at : at + limit]

    def rate(self) -> float:
        """The acceptance rate so far, shrunk toward the prior (two pseudo-drafts)."""
        prior = self.policy.prior_acceptance
        return (self.accepted + 2 * prior) / (self.drafted + 2)

    def expected(self, k: int) -> float:
        """Tokens this row is expected to write in a pass that drafts ``k`` of its tokens: the
        one the model adds plus the accepted run, each drafted token kept with ``rate()``."""
        p = self.rate()
        return 1.0 + sum(p**j for j in range(1, k + 1))

    def record(self, drafted: int, accepted: int) -> None:
        self.drafted += drafted
        self.accepted += accepted


def _find(text: tuple[int, ...], pattern: tuple[int, ...]) -> int | None:
    """The first index where ``pattern`` occurs in ``text`` (a plain scan: a suffix is a few
    hundred tokens and the search runs only after a mismatch)."""
    n = len(pattern)
    first = pattern[0]
    for i in range(len(text) - n + 1):
        if text[i] == first and text[i : i + n] == pattern:
            return i
    return None


def draft_length(
    drafts: Sequence[tuple[int, ...]], drafters: Sequence[Drafter], cost: float
) -> int:
    """The number of positions to draft in this pass (0: a plain step), by expected tokens per
    unit of cost over the batch (see the module docstring); every length up to the longest
    proposal is weighed."""
    rows = len(drafters)
    best_k, best_rate = 0, rows / (1 + cost * rows)
    longest = max((len(d) for d in drafts), default=0)
    rates = [d.rate() for d in drafters]
    # expected[i] after k steps: 1 + p + ... + p**min(k, len(draft_i)), grown one k at a time.
    gained = [1.0] * rows
    terms = [1.0] * rows
    for k in range(1, longest + 1):
        for i, (p, draft) in enumerate(zip(rates, drafts)):
            if k <= len(draft):
                terms[i] *= p
                gained[i] += terms[i]
        rate = sum(gained) / (1 + cost * rows * (k + 1))
        if rate > best_rate:
            best_k, best_rate = k, rate
    return best_k


def drafting_possible(cache: Any) -> bool:
    """Whether every layer of ``cache`` can move rejected draft slots (memprobe's buffers)."""
    return all(getattr(layer, "shift_rows", None) is not None for layer in cache.layers) and all(
        layer.can_shift() for layer in cache.layers
    )


def decode_drafted(
    model: Any,
    prompts: list[list[int]],
    references: Sequence[Sequence[int]],
    spec: BatchDecoding,
    policy: DraftPolicy | None = None,
    stats: DraftStats | None = None,
    *,
    watch: Callable[[list[list[int]]], None] | None = None,
) -> list[Decoded]:
    """Greedy decoding of every prompt row, drafting from its reference.

    Args:
        model: a decoder-only transformers LM that ``hf_decode`` can drive.
        prompts: token ids per row.
        references: per row, the token ids it is expected to write (may be empty: that row
            then drafts only from prompt lookup).
        spec: greedy decoding settings (``spec.temperature`` must be 0; ``spec.screened_head``
            verifies with the vocabulary projection screened where ``hf_greedy_head`` applies).
        policy: drafting costs (default ``DraftPolicy()``).
        stats: filled with what was drafted and accepted.
        watch: called with every row's ids so far after each pass (``hf_decode.decode``'s).

    Returns:
        One ``Decoded`` per row: the tokens, and stop flags, of greedy decoding.
    """
    import torch

    from memprobe_core.models.hf_decode import _prefill

    if not spec.greedy:
        raise ValueError("drafting verifies greedy choices; sampling has none to verify")
    policy = policy or DraftPolicy()
    stats = stats if stats is not None else DraftStats()
    state = _prefill(model, prompts, spec, model.device)
    batch = _Batch(model, state, spec)
    drafters = [Drafter(ref, prompt, policy) for ref, prompt in zip(references, prompts)]
    out: list[list[int]] = [[] for _ in prompts]
    stopped = [False] * len(prompts)
    stops = set(spec.stop_ids)

    def emit(row: int, token: int) -> bool:
        """Write ``token`` to ``row``; whether the row goes on."""
        out[row].append(token)
        drafters[row].observe(token)
        stopped[row] = token in stops
        return not stopped[row] and len(out[row]) < spec.max_new_tokens

    pending = torch.argmax(state.logits, dim=-1).tolist()
    going = [emit(row, token) for row, token in zip(range(len(prompts)), pending)]
    active = [row for row, on in enumerate(going) if on]
    batch.keep([i for i, on in enumerate(going) if on])
    pending = [pending[row] for row in active]
    if watch is not None:
        watch(out)
    while active:
        # A row may draft what fits its budget: the pass also yields one token of the model's.
        limits = [spec.max_new_tokens - len(out[row]) - 1 for row in active]
        proposals = [
            drafters[row].proposal(min(lim, policy.max_draft)) for row, lim in zip(active, limits)
        ]
        k = draft_length(proposals, [drafters[r] for r in active], policy.position_cost)
        k = batch.room_for(k)
        drafts = [p[:k] for p in proposals]
        chosen = batch.verify(pending, drafts, k)  # (A, k + 1) greedy choices
        stats.passes += 1
        keep, accepted_counts, next_pending = [], [], []
        for i, (row, draft) in enumerate(zip(active, drafts)):
            accepted = _agreeing(draft, chosen[i])
            if draft:
                drafters[row].record(len(draft), accepted)
                stats.drafted += len(draft)
                stats.accepted += accepted
            on = True
            for token in chosen[i][: accepted + 1]:
                on = emit(row, token)
                if not on:
                    break
            accepted_counts.append(accepted)
            if on:
                keep.append(i)
                next_pending.append(chosen[i][accepted])
        batch.settle(accepted_counts, k)
        batch.keep(keep)
        active = [active[i] for i in keep]
        pending = next_pending
        if watch is not None:
            watch(out)
    return [Decoded(tuple(ids), s) for ids, s in zip(out, stopped)]


def _agreeing(draft: Sequence[int], chosen: Sequence[int]) -> int:
    """How many leading drafted tokens are the model's own greedy choices."""
    n = 0
    while n < len(draft) and draft[n] == chosen[n]:
        n += 1
    return n


class _Batch:
    """The rows being decoded as one left-padded batch: cache, 2-D mask and next positions."""

    def __init__(self, model: Any, state: Any, spec: BatchDecoding) -> None:
        self.model, self.spec = model, spec
        self.cache, self.mask, self.positions = state.cache, state.mask, state.positions[:, 0]
        self.columns = self.cache.get_seq_length()
        self.can_draft = drafting_possible(self.cache)

    def room_for(self, k: int) -> int:
        """``k``, or less where the cache cannot take a pass of ``k + 1`` drafted positions:
        a sliding-window layer must keep every column of the pass (see ``Buffer.shift_rows``)."""
        if k == 0 or not self.can_draft:
            return 0
        room = min(layer.room() for layer in self.cache.layers) - 1
        return max(0, min(k, room))

    def verify(self, pending: list[int], drafts: list[tuple[int, ...]], k: int) -> list[list[int]]:
        """Feed each row's pending token and draft (padded to ``k``); the greedy choice after
        each of the ``k + 1`` positions, per row."""
        import torch

        from memprobe_core.models.hf_decode import _forward_params

        device = self.positions.device
        rows = len(pending)
        ids = torch.full((rows, k + 1), self.spec.pad_id, dtype=torch.long)
        for i, (token, draft) in enumerate(zip(pending, drafts)):
            ids[i, 0] = token
            if draft:
                ids[i, 1 : 1 + len(draft)] = torch.tensor(draft, dtype=torch.long)
        ids = ids.to(device)
        if self.mask is not None:
            ones = torch.ones((rows, k + 1), dtype=self.mask.dtype, device=device)
            self.mask = torch.cat([self.mask, ones], dim=-1)
        positions = self.positions[:, None] + torch.arange(k + 1, device=device)
        kwargs: dict[str, Any] = {"input_ids": ids, "cache": self.cache, "use_cache": True}
        if self.mask is not None:
            kwargs["attention_mask"] = self.mask
        params = _forward_params(self.model)
        if "position_ids" in params:
            kwargs["position_ids"] = positions
        choices, _ = greedy_pass(self.model, kwargs, k + 1, params, screen=self.spec.screened_head)
        self.columns += k + 1
        return choices.tolist()

    def settle(self, accepted: list[int], k: int) -> None:
        """Make every row contiguous again, ending at the last column; advance the positions.

        The slots every row rejected are cut off the end (a single row never needs a mask);
        each row's remaining rejected slots are moved to its left end and masked."""
        import torch

        shifts = [k - a for a in accepted]
        device = self.positions.device
        self.positions = self.positions + torch.tensor(accepted, device=device) + 1
        common = min(shifts, default=0)
        if common:
            for layer in self.cache.layers:
                layer.crop_end(common)
            self.columns -= common
            if self.mask is not None:
                self.mask = self.mask[:, : self.columns]
            shifts = [s - common for s in shifts]
        if not any(shifts):
            return
        for layer in self.cache.layers:
            layer.shift_rows(shifts)
        if self.mask is None:
            self.mask = torch.ones((len(shifts), self.columns), dtype=torch.long, device=device)
        for row, shift in enumerate(shifts):
            if shift:
                self.mask[row, shift:] = self.mask[row, :-shift].clone()
                self.mask[row, :shift] = 0

    def keep(self, index: list[int]) -> None:
        """Keep only the batch rows ``index`` (rows that ended leave it)."""
        import torch

        if len(index) == len(self.positions):
            return
        if not index:
            return
        tensor = torch.tensor(index, device=self.positions.device)
        self.cache.batch_select_indices(tensor)
        if self.mask is not None:
            self.mask = self.mask[tensor]
        self.positions = self.positions[tensor]


def greedy_agreement(
    model: Any,
    prompts: Sequence[Sequence[int]],
    continuations: Sequence[Sequence[int]],
    pad_id: int,
    *,
    first_chunk: int = 16,
    growth: int = 4,
    max_positions: int = 256,
    screen: bool = True,
) -> list[int]:
    """For each row, how many leading tokens of its continuation greedy decoding of its prompt
    writes, by teacher forcing and no generation (docs/method.md §9).

    The prompt followed by the continuation is fed; the argmax at the position before each
    continuation token is the token greedy decoding writes there *given the continuation so
    far*, so the leading run where the two agree is exactly the run greedy decoding reproduces.

    Only that leading run counts, so the continuation is fed in growing chunks (``first_chunk``
    compared tokens, then ``growth`` times more, from the KV cache of the pass before) and a row
    leaves the batch at its first disagreement: text the model does not reproduce costs the
    prompt and one short chunk, with the vocabulary projection on that chunk only; a reproduced
    one costs the same positions as one pass over everything. The chunking changes which
    positions are computed together, not what is computed (each position sees the same tokens).
    Rows are left padded (position ids from the mask, as ``hf_decode`` prefills them).

    Returns:
        Per row, the agreeing run's length (0 to ``len(continuation)``).

    Raises:
        ValueError: a row with a continuation has an empty prompt (nothing predicts its first
            token), or ``first_chunk`` / ``growth`` / ``max_positions`` is below 1 / 2 / 1.
    """

    if first_chunk < 1 or growth < 2 or max_positions < 1:
        raise ValueError(
            "first_chunk and max_positions must be >= 1 and growth >= 2, not "
            f"{first_chunk}, {max_positions}, {growth}"
        )
    conts = [list(c) for c in continuations]
    matched = [0] * len(conts)
    live = [i for i, c in enumerate(conts) if c]
    if any(not prompts[i] for i in live):
        raise ValueError("every row with a continuation needs a prompt token to predict it from")
    if not live:
        return matched
    done = 0  # continuation tokens compared (and agreeing) so far, the same for every live row
    first = min(first_chunk, max(1, max_positions // len(live)))
    upto = {i: min(len(conts[i]), first) for i in live}
    # The first pass: prompt + the chunk's tokens but its last (it is only compared).
    pass_ = _TeacherPass(model, pad_id, screen=screen)
    chosen = pass_.first([list(prompts[i]) + conts[i][: upto[i] - 1] for i in live], live, upto)
    while True:
        survivors = []
        for i in live:
            want = conts[i][done : upto[i]]
            agree = _agreeing(want, chosen[i])
            matched[i] = done + agree
            if agree == len(want) and upto[i] < len(conts[i]):
                survivors.append(i)
        if not survivors:
            return matched
        live, done = survivors, upto[survivors[0]]  # survivors compared the same count
        step = min(done * (growth - 1), max(1, max_positions // len(live)))
        upto = {i: min(len(conts[i]), done + step) for i in live}
        # Feed from the last compared token: its position predicts the next uncompared one.
        chosen = pass_.more([conts[i][done - 1 : upto[i] - 1] for i in live], live, upto, done)


class _TeacherPass:
    """The teacher-forced passes of :func:`greedy_agreement`: one left-padded batch whose rows
    leave it, its KV cache carried from pass to pass (transformers' own cache: it takes any
    number of new tokens on every kind of layer, sliding windows included)."""

    def __init__(self, model: Any, pad_id: int, *, screen: bool) -> None:
        from memprobe_core.models.hf_decode import _forward_params

        self.model, self.pad_id, self.screen = model, pad_id, screen
        self.params = _forward_params(model)
        self.cache: Any = None
        self.mask: Any = None  # (B, columns); None while no row is padded
        self.last_position: Any = None  # (B,)
        self.rows: list[int] = []  # the caller's row index of each batch row

    def first(
        self, rows: list[list[int]], index: list[int], upto: dict[int, int]
    ) -> dict[int, list[int]]:
        import torch

        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for b, row in enumerate(rows):
            ids[b, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            mask[b, width - len(row) :] = 1
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
        self.mask = None if bool((mask == 1).all()) else mask.to(self.model.device)
        self.last_position = positions[:, -1].to(self.model.device)
        self.rows = list(index)
        keep = max(upto[i] for i in index)
        return self._run(ids, positions, keep, upto, done=0)

    def more(
        self, feeds: list[list[int]], index: list[int], upto: dict[int, int], done: int
    ) -> dict[int, list[int]]:
        import torch

        select = [self.rows.index(i) for i in index]
        if len(select) < len(self.rows):
            tensor = torch.tensor(select, device=self.model.device)
            self.cache.batch_select_indices(tensor)
            self.last_position = self.last_position[tensor]
            if self.mask is not None:
                self.mask = self.mask[tensor]
        self.rows = list(index)
        width = max(len(f) for f in feeds)
        # Right padded: a padded slot comes after every token a kept row compares.
        ids = torch.full((len(feeds), width), self.pad_id, dtype=torch.long)
        for b, feed in enumerate(feeds):
            ids[b, : len(feed)] = torch.tensor(feed, dtype=torch.long)
        positions = self.last_position[:, None].cpu() + 1 + torch.arange(width)
        if self.mask is not None:
            ones = torch.ones((len(feeds), width), dtype=self.mask.dtype, device=self.mask.device)
            self.mask = torch.cat([self.mask, ones], dim=-1)
        self.last_position = positions[:, -1].to(self.model.device)
        return self._run(ids, positions, width, upto, done=done, right_aligned=False)

    def _run(
        self,
        ids: Any,
        positions: Any,
        keep: int,
        upto: dict[int, int],
        *,
        done: int,
        right_aligned: bool = True,
    ) -> dict[int, list[int]]:

        device = self.model.device
        kwargs: dict[str, Any] = {"input_ids": ids.to(device), "use_cache": True}
        if self.cache is not None:
            kwargs["cache"] = self.cache
        if self.mask is not None:
            kwargs["attention_mask"] = self.mask
        if "position_ids" in self.params:
            kwargs["position_ids"] = positions.to(device)
        found, self.cache = greedy_pass(self.model, kwargs, keep, self.params, screen=self.screen)
        choices = found.tolist()  # (B, keep)
        chosen = {}
        for b, i in enumerate(self.rows):
            n = upto[i] - done
            # The first pass's rows end together (left padded); later ones start together.
            chosen[i] = choices[b][keep - n :] if right_aligned else choices[b][:n]
        return chosen
