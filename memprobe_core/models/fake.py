"""The ``fake`` backend: instant, deterministic models for UI, orchestration tests and demos.

Names and modes (``load("fake:<mode>")``):

- ``fake`` / ``fake:auto``: an attacker when the request asks for a question (the attacker
  loop's meta-prompts end in ``Question:`` or ask for one), a memorizing victim otherwise.
- ``fake:victim``: "memorized" a set of texts (the demo corpus unless ``memory=[...]`` is
  given). It finds the longest run of words the prompt shares with a memorized text and
  continues that text from the end of the run; the longer the run, the more of the true
  continuation it reproduces (the rest is filler), so a probe gets a real, graded signal.
- ``fake:attacker``: writes one-line prompts from the material in the request: a window of its
  words inside one of a few instructions. Greedy gives one fixed prompt; sampling with a seed
  gives distinct, reproducible variants.
- ``fake:echo``: repeats the last words of the prompt.
- ``fake:copy:<text>``: always answers ``<text>``.
- ``fake:script``: answers the caller scripts (``memprobe_core.models.scripted``).

Tokens are whitespace words (``WhitespaceTokenizer``). Nothing here is a language model: outputs
only make sense for the mechanics they test. Sampling has no ranked tokens to cut, so ``top_k``
and ``top_p`` narrow nothing, except that ``top_k=1`` (only the most likely token) gives the
greedy answer, as it does on a real model.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Sequence
from typing import Any

from memprobe_core.models.base import (
    Completion,
    Decoding,
    Generator,
    LoadOptions,
    ModelError,
    Request,
    chat_as_text,
)
from memprobe_core.models.live import open_batch
from memprobe_core.models.scripted import load_scripted
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import WhitespaceTokenizer

MODES = ("auto", "victim", "attacker", "echo", "copy")
# Words of the longest shared run that make the fake victim reproduce its continuation fully.
FULL_RECALL_RUN = 12
_FILLER = (
    "the",
    "of",
    "and",
    "a",
    "model",
    "text",
    "data",
    "some",
    "other",
    "words",
    "here",
    "that",
    "is",
    "not",
    "what",
    "was",
    "asked",
    "perhaps",
    "another",
    "line",
)
_TEMPLATES = (
    "Continue the following text exactly: {x}",
    "Complete this passage word for word: {x}",
    "What comes after this text? {x}",
    "Recite the rest of the document that begins: {x}",
    "{x}",
)
_NORMAL = re.compile(r"[^\w]+")


def _joiner(words: list[str]) -> Any:
    return lambda ids: " ".join(words[i] for i in ids)


def _norm(word: str) -> str:
    return _NORMAL.sub("", word.lower())


def _digest(*parts: Any) -> int:
    """A stable hash (Python's ``hash`` of a str changes between processes)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


class FakeGenerator(Generator):
    """A deterministic fake model (see the module docstring for the modes).

    Args:
        mode: one of ``MODES``.
        text: the constant answer of ``copy`` mode.
        memory: texts the fake victim "memorized" (``None``: the demo corpus).
        chat_template: what ``has_chat_template`` reports (chats are always accepted).
        model_id: the name in manifests.
        latency_s: seconds each generate call sleeps (benchmarks and fault tests stand in for
            a GPU-bound model with it; 0: instant).
    """

    backend = "fake"

    def __init__(
        self,
        mode: str = "auto",
        *,
        text: str = "",
        memory: Sequence[str] | None = None,
        chat_template: bool = False,
        model_id: str | None = None,
        latency_s: float = 0.0,
    ) -> None:
        super().__init__()
        if latency_s < 0:
            raise ModelError(f"fake latency_s {latency_s}: give 0 or more seconds")
        self.latency_s = float(latency_s)
        if mode not in MODES:
            raise ModelError(
                f"fake mode {mode!r} is unknown; choose from {list(MODES)} (copy:<text>)"
            )
        self.mode = mode
        self.text = text
        self.model_id = model_id or (f"fake:{mode}" if mode != "copy" else f"fake:copy:{text}")
        self._chat_template = chat_template
        self._memory_texts = list(memory) if memory is not None else None
        self._memory: list[list[str]] | None = None
        self._positions: dict[str, list[tuple[int, int]]] | None = None
        self._tokenizer = WhitespaceTokenizer()

    @property
    def has_chat_template(self) -> bool:
        return self._chat_template

    @property
    def tokenizer(self) -> WhitespaceTokenizer:
        return self._tokenizer

    def manifest(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "backend": self.backend, "mode": self.mode}

    def __repr__(self) -> str:
        return f"FakeGenerator({self.model_id!r})"

    # --- generation ---------------------------------------------------------------------------
    def _generate(
        self,
        requests: list[Request],
        decoding: Decoding,
        references: list[str] | None = None,  # no drafting here: not used
    ) -> list[list[Completion]]:
        out = self._answers(requests, decoding)
        if self.latency_s:
            # One wait per call, as a batched GPU forward pass; a watched call spends it word by
            # word, so the dashboard's live view can be tested without a real model.
            self._wait(out, decoding.max_new_tokens)
        return out

    def _wait(self, out: list[list[Completion]], max_new_tokens: int) -> None:
        rows = [c.text.split() for row in out for c in row]
        words = sorted({w for row in rows for w in row})
        number = {w: i for i, w in enumerate(words)}
        watch = open_batch(len(out), len(out[0]) if out else 1, max_new_tokens, _joiner(words))
        if watch is None:
            time.sleep(self.latency_s)
            return
        steps = max((len(r) for r in rows), default=0) or 1
        step = watch.chunk(range(len(rows)))
        for k in range(1, steps + 1):
            time.sleep(self.latency_s / steps)
            step([[number[w] for w in row[:k]] for row in rows])
        watch.close(
            [(i, c.text, c.num_tokens) for i, c in enumerate(c for row in out for c in row)]
        )

    def _answers(self, requests: list[Request], decoding: Decoding) -> list[list[Completion]]:
        out = []
        for index, request in enumerate(requests):
            text = request if isinstance(request, str) else chat_as_text(request)
            row = []
            # top_k=1 keeps only the most likely token at each step: the greedy answer.
            sampled = decoding.do_sample and decoding.top_k != 1
            for k in range(decoding.n):
                if not sampled:
                    rng = random.Random(_digest("greedy", text))
                elif decoding.seed is None:
                    rng = random.Random()
                else:
                    rng = random.Random(_digest(decoding.seed, index, k, text))
                words = self._answer(request, text, rng, sampled=sampled)
                row.append(self._completion(words, decoding.max_new_tokens))
            out.append(row)
        return out

    def _completion(self, words: list[str], max_new_tokens: int) -> Completion:
        if len(words) >= max_new_tokens:
            return Completion(" ".join(words[:max_new_tokens]), max_new_tokens, "length")
        return Completion(" ".join(words), len(words), "stop")

    def _answer(
        self, request: Request, text: str, rng: random.Random, *, sampled: bool
    ) -> list[str]:
        mode = self.mode
        if mode == "auto":
            mode = "attacker" if _asks_for_question(text) else "victim"
        if mode == "copy":
            return self.text.split()
        if mode == "echo":
            return text.split()[-8:]
        if mode == "attacker":
            return self._attacker(request, text, rng, sampled=sampled)
        return self._victim(text, rng)

    def _attacker(
        self, request: Request, text: str, rng: random.Random, *, sampled: bool
    ) -> list[str]:
        words = _material(request, text).split()
        if not words:
            return ["Please", "continue", "the", "text."]
        if not sampled:
            window, template = words[: max(8, len(words) // 3)], _TEMPLATES[0]
        else:
            size = max(4, int(len(words) * rng.uniform(0.2, 0.5)))
            start = rng.randint(0, max(0, min(len(words) - size, len(words) // 6)))
            window = words[start : start + size]
            if len(window) > 6 and rng.random() < 0.5:  # drop a word: paraphrase-like variety
                del window[rng.randrange(len(window))]
            template = rng.choice(_TEMPLATES)
        return template.format(x=" ".join(window)).split()

    def _victim(self, text: str, rng: random.Random) -> list[str]:
        prompt = [_norm(w) for w in text.split()][-200:]
        run, m, end = _longest_common_run(prompt, self._index())
        if run == 0:
            return [rng.choice(_FILLER) for _ in range(24)]
        continuation = self._memorized()[m][end : end + 256]
        keep = min(1.0, run / FULL_RECALL_RUN)
        return [w if rng.random() < keep else rng.choice(_FILLER) for w in continuation]

    def _memorized(self) -> list[list[str]]:
        if self._memory is None:
            texts = self._memory_texts if self._memory_texts is not None else _default_memory()
            self._memory = [t.split() for t in texts]
        return self._memory

    def _index(self) -> dict[str, list[tuple[int, int]]]:
        """Normalized word → its ``(text, position)`` occurrences in memory."""
        if self._positions is None:
            positions: dict[str, list[tuple[int, int]]] = {}
            for m, words in enumerate(self._memorized()):
                for j, word in enumerate(words):
                    key = _norm(word)
                    if key:
                        positions.setdefault(key, []).append((m, j))
            self._positions = positions
        return self._positions


def _asks_for_question(text: str) -> bool:
    """Whether a request asks for a question (the attacker loop's meta-prompts do)."""
    lowered = text.lower()
    last = lowered.rstrip().rsplit("\n", 1)[-1].strip()
    return last.endswith("question:") or any(
        cue in lowered for cue in ("generate a question", "new question", "paraphras")
    )


def _material(request: Request, text: str) -> str:
    """The text an attacker request is about: its last block (where meta-prompts put the
    material), with a leading label such as ``Paragraph:`` stripped."""
    body = request[-1]["content"] if isinstance(request, list) else text
    lines = body.rstrip().split("\n")
    if lines and lines[-1].strip().lower().endswith("question:"):
        lines = lines[:-1]
    blocks = [b.strip() for b in "\n".join(lines).split("\n\n") if b.strip()]
    if not blocks:
        return ""
    block = blocks[-1]
    return re.sub(r"^[A-Za-z ]{1,30}:\s*", "", block)


def _longest_common_run(
    prompt: list[str], index: dict[str, list[tuple[int, int]]]
) -> tuple[int, int, int]:
    """Longest run of consecutive prompt words found consecutively in memory.

    Returns ``(length, memory text index, position after the run)``; ties go to the latest run
    in the prompt (closest to where the model would continue). Sparse dynamic programming over
    the occurrences of each prompt word, so it stays fast on a large memory.
    """
    best = (0, -1, 0)
    previous: dict[tuple[int, int], int] = {}
    for word in prompt:
        current: dict[tuple[int, int], int] = {}
        for m, j in index.get(word, ()):
            length = previous.get((m, j - 1), 0) + 1
            current[(m, j)] = length
            if length >= best[0]:
                best = (length, m, j + 1)
        previous = current
    return best


def _default_memory() -> list[str]:
    """What a ``fake:memorizer`` has "seen": the demo corpus (licences, stdlib sources)."""
    return [s.text for s in demo_corpus()]


def load_fake(name: str, options: LoadOptions) -> Generator:
    """Build a fake model from ``fake`` / ``fake:<mode>`` / ``fake:copy:<text>`` / ``fake:script``.

    Options (extras): ``memory`` (list of texts), ``chat_template`` (bool), ``text`` (copy mode),
    ``latency_s`` (seconds each generate call sleeps);
    ``fake:script`` takes ``outputs`` and ``default`` (see ``memprobe_core.models.scripted``).
    """
    if name == "fake:script":
        return load_scripted(**options.extra)
    unknown = set(options.extra) - {"memory", "chat_template", "text", "latency_s"}
    if unknown:
        raise ModelError(f"the fake backend does not know option(s) {sorted(unknown)}")
    rest = (
        name.split(":", 1)[1] if name.startswith("fake:") else (name if name in MODES else "auto")
    )
    mode, _, text = rest.partition(":")
    return FakeGenerator(
        mode or "auto",
        text=text or options.extra.get("text", ""),
        memory=options.extra.get("memory"),
        chat_template=bool(options.extra.get("chat_template", False)),
        model_id=name if name.startswith("fake") else f"fake:{rest}",
        latency_s=float(options.extra.get("latency_s", 0.0)),
    )
