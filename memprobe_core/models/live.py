"""Text being written right now: the decode loop publishes, a page or a terminal reads.

A round's candidates are answered as one batch (far faster than one by one), so they are scored
together when the batch ends; without this module nothing moved between a round's start and its
end. With it, a reader sees every row of the batch grow, a few times a second.

How the pieces meet, without any of them passing a new argument along:

- A job (the dashboard's worker thread, the CLI's ``probe``) owns a :class:`LiveTap` and runs
  its work inside ``with watching(tap):`` (a context variable of that thread).
- A method names what a generate call writes: ``with writing("victim", labels=prompts,
  score=...)`` (:mod:`memprobe_core.attacks.victim`, the attacker loop).
- A backend that decodes token by token asks :func:`open_batch` for a :class:`TokenWatch`
  (``None`` when nobody watches: then it costs one context-variable read per call) and hands
  the watch its rows' token ids after every step.

Why snapshots and not events: decoding must never wait for a reader. A :class:`TokenWatch`
decodes and publishes at most every :data:`PUBLISH_EVERY_S` (tens of microseconds of work per
step in between); publishing replaces the tap's :class:`LiveBatch` whole, and a published batch
is never changed, so a reader takes the current one whenever it likes.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

# At most this often a watch decodes and publishes its rows (the page polls every 0.5 s).
PUBLISH_EVERY_S = 0.2

# (row index, text written so far) -> named running scores, e.g. {"Mem": 0.4, "LCS_P": 0.1}.
RowScorer = Callable[[int, str], dict[str, float]]


@dataclass(frozen=True)
class LiveRow:
    """One row of the batch being written.

    Attributes:
        label: what the row answers (a victim row: the candidate's prompt); ``""`` when the rows
            are samples of one request (the attacker writing prompts).
        text: the text written so far (special tokens left out).
        tokens: tokens written so far.
        done: the row ended (stop token or budget).
    """

    label: str
    text: str
    tokens: int
    done: bool


@dataclass(frozen=True)
class LiveBatch:
    """A published state of one generate call (never changed after it is published).

    Attributes:
        role: who writes ("victim", "attacker", "base").
        rows: one per sequence, in request order (the ``n`` samples of a request together).
        max_new_tokens: each row's budget.
        started: ``time.monotonic()`` when the call began; ``updated``: of this state.
        seq: publication counter of the tap (a reader redraws only when it changed).
        closed: the call returned (the rows are final; scores of the real candidates follow).
        scorer: running scores of a row's text (may be ``None``).
    """

    role: str
    rows: tuple[LiveRow, ...]
    max_new_tokens: int
    started: float
    updated: float
    seq: int
    closed: bool = False
    scorer: RowScorer | None = field(default=None, compare=False, repr=False)
    # Scores already computed for this state: a page polling twice between two publications
    # reads the same batch and should not score its rows twice.
    _scored: dict[int, dict[str, float]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    @property
    def tokens(self) -> int:
        """Tokens written so far over all rows."""
        return sum(row.tokens for row in self.rows)

    @property
    def rows_done(self) -> int:
        return sum(row.done for row in self.rows)

    def scores(self, index: int) -> dict[str, float]:
        """Running scores of row ``index``'s text so far (``{}`` without a scorer)."""
        if self.scorer is None:
            return {}
        if index not in self._scored:
            self._scored[index] = self.scorer(index, self.rows[index].text)
        return self._scored[index]


class LiveTap:
    """Where a job's decoding publishes its current batch; read with :meth:`snapshot`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batch: LiveBatch | None = None
        self._seq = 0

    def snapshot(self) -> LiveBatch | None:
        """The batch as last published (``None`` before the first generate call)."""
        with self._lock:
            return self._batch

    def publish(self, batch: LiveBatch) -> LiveBatch:
        """Make ``batch`` the current one (its ``seq`` is set here); returns what was stored."""
        with self._lock:
            self._seq += 1
            self._batch = replace(batch, seq=self._seq)
            return self._batch


@dataclass(frozen=True)
class _Writing:
    role: str
    labels: tuple[str, ...]
    scorer: RowScorer | None


_TAP: contextvars.ContextVar[LiveTap | None] = contextvars.ContextVar("memprobe_tap", default=None)
_WRITING: contextvars.ContextVar[_Writing | None] = contextvars.ContextVar(
    "memprobe_writing", default=None
)


@contextlib.contextmanager
def watching(tap: LiveTap) -> Iterator[LiveTap]:
    """Publish every batch decoded in this thread (and its context) to ``tap``."""
    token = _TAP.set(tap)
    try:
        yield tap
    finally:
        _TAP.reset(token)


@contextlib.contextmanager
def writing(
    role: str, labels: Sequence[str] = (), score: RowScorer | None = None
) -> Iterator[None]:
    """Name the generate calls inside: who writes, what each request answers, how to score a
    row's text so far. Costs nothing when no tap watches."""
    token = _WRITING.set(_Writing(role, tuple(labels), score))
    try:
        yield
    finally:
        _WRITING.reset(token)


def open_batch(
    requests: int, copies: int, max_new_tokens: int, decode: Callable[[list[int]], str]
) -> TokenWatch | None:
    """A watch for one generate call of ``requests`` × ``copies`` rows (``None``: nobody
    watches). ``decode`` turns a row's token ids into text (the backend's tokenizer)."""
    tap = _TAP.get()
    if tap is None:
        return None
    return TokenWatch(tap, _WRITING.get(), requests, copies, max_new_tokens, decode)


class TokenWatch:
    """Collects one generate call's rows as they grow and publishes them, throttled.

    The backend calls :meth:`chunk` for each batch it decodes (the rows of that batch as indices
    into the call's ``requests × copies`` rows), then calls the returned function with the
    batch's token id lists after every step; :meth:`close` publishes the final state.
    """

    def __init__(
        self,
        tap: LiveTap,
        naming: _Writing | None,
        requests: int,
        copies: int,
        max_new_tokens: int,
        decode: Callable[[list[int]], str],
    ) -> None:
        self._tap, self._decode = tap, decode
        self._copies = max(1, copies)
        naming = naming or _Writing("model", (), None)
        n_rows = requests * self._copies
        labels = naming.labels
        self._rows = [
            LiveRow(
                labels[i // self._copies] if i // self._copies < len(labels) else "", "", 0, False
            )
            for i in range(n_rows)
        ]
        self._ids: list[list[int] | None] = [None] * n_rows
        now = time.monotonic()
        self._template = LiveBatch(
            role=naming.role,
            rows=(),
            max_new_tokens=max_new_tokens,
            started=now,
            updated=now,
            seq=0,
            scorer=naming.scorer,
        )
        self._last = float("-inf")
        self._publish(now)

    def chunk(
        self, rows: Sequence[int], stop_ids: Sequence[int] = ()
    ) -> Callable[[list[list[int]]], None]:
        """The per-step callback for a batch whose row ``i`` is the call's row ``rows[i]``.

        ``stop_ids``: a row whose last id is one of these has ended (and the id is not text)."""
        targets, stops = list(rows), frozenset(stop_ids)

        def step(out: list[list[int]]) -> None:
            for target, ids in zip(targets, out):
                self._ids[target] = ids  # the loop's own list: read only when publishing
            now = time.monotonic()
            if now - self._last >= PUBLISH_EVERY_S:
                self._refresh(stops)
                self._publish(now)

        return step

    def close(self, texts: Sequence[tuple[int, str, int]] = ()) -> None:
        """Publish the final rows: ``(row, text, tokens)`` as the backend returns them."""
        self._refresh(frozenset())
        for row, text, tokens in texts:
            self._rows[row] = replace(self._rows[row], text=text, tokens=tokens, done=True)
        self._rows = [replace(r, done=True) for r in self._rows]
        self._publish(time.monotonic(), closed=True)

    def _refresh(self, stops: frozenset[int]) -> None:
        for i, ids in enumerate(self._ids):
            if ids is None or len(ids) == self._rows[i].tokens:
                continue
            ended = bool(ids) and (ids[-1] in stops or len(ids) >= self._template.max_new_tokens)
            text_ids = list(ids[:-1]) if ids and ids[-1] in stops else list(ids)
            self._rows[i] = replace(
                self._rows[i], text=self._decode(text_ids), tokens=len(ids), done=ended
            )

    def _publish(self, now: float, *, closed: bool = False) -> None:
        self._last = now
        self._tap.publish(
            replace(self._template, rows=tuple(self._rows), updated=now, closed=closed)
        )
