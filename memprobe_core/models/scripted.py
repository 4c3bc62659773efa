"""``fake:script``: a model whose every answer the caller gives, and which remembers what it was asked.

The one scriptable test model (like inspect_ai's ``mockllm`` with ``custom_outputs``): tests and
demos script the victim and the attacker instead of writing ``Generator`` subclasses.

Answers come from a list, consumed one per generated sequence in call order (then ``default``),
or from a function called once per sequence with an :class:`Ask`: the request as given and as
text, the sample's index among the ``n``, the call's decoding settings and a random generator
seeded from the call's seed. An answer is a text, cut at ``max_new_tokens`` words (finish
``"length"`` when cut, else ``"stop"``), or a ``Completion`` returned as is, for a test that
scripts token counts, finish reasons or token ids itself.

``calls`` records every generate call (requests as given, decoding settings) and ``requests``
every request as text, in the order they were asked.

    victim = ScriptedGenerator(lambda ask: "the true suffix" if "magic" in ask.text else "no")
    attacker = ScriptedGenerator(["ask for it", "say the magic word"], default="…")
    sampler = ScriptedGenerator(lambda ask: f"guess {ask.rng.randint(0, 9)}")  # seeded per call
    remote = ScriptedGenerator(tokenizer=None)  # no local tokenizer, like an endpoint
    models.load("fake:script", outputs=["a", "b"])  # the same, through the registry
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memprobe_core.models.base import (
    Completion,
    Decoding,
    Generator,
    ModelError,
    Request,
    TextTokenizer,
    chat_as_text,
)
from memprobe_core.snippets.split import WhitespaceTokenizer


@dataclass(frozen=True)
class ScriptedCall:
    """One ``generate`` call as the scripted model received it (arguments already validated).

    Attributes:
        requests: the requests as given (texts or chats), in order.
        n, max_new_tokens, temperature, top_p, seed: the call's decoding settings.
        references: the texts the caller expects per request (``generate(references=…)``).
        top_k: the call's top-k (0: off); a script function that samples reads it here.
    """

    requests: list[Request]
    n: int
    max_new_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    references: list[str] | None = None
    top_k: int = 0


@dataclass(frozen=True, eq=False)
class Ask:
    """One sequence asked of the scripted model: what a script function receives.

    Attributes:
        request: the request as given (a text or a chat).
        text: the request as text (a chat rendered by ``chat_as_text``).
        index: which of the call's ``n`` sequences for this request (0-based).
        call: the generate call it belongs to (decoding settings, all its requests).
        rng: ``random.Random(call.seed)``, shared in order by every sequence of the call, so
            sampled answers are reproducible under a seed and differ between samples.
    """

    request: Request
    text: str
    index: int
    call: ScriptedCall
    rng: random.Random

    @property
    def content(self) -> str:
        """What was just asked: a text request itself, or a chat's last message content."""
        return self.request if isinstance(self.request, str) else self.request[-1]["content"]


Answer = str | Completion
Script = Sequence[Answer] | Callable[[Ask], Answer]


class ScriptedGenerator(Generator):
    """A deterministic model answering from a script (see the module docstring).

    Args:
        outputs: answers in order (one per generated sequence), or a function of an
            :class:`Ask` returning the answer of one sequence.
        default: the answer once a list of outputs is used up.
        model_id: the name in manifests.
        chat_template: what ``has_chat_template`` reports (chats are always accepted).
        tokenizer: what ``tokenizer`` reports: ``"whitespace"`` (a ``WhitespaceTokenizer``),
            a tokenizer of the test's own, or ``None`` for a model without a local tokenizer
            (like an endpoint; snippets are then cut by whitespace). Text answers are cut at
            whitespace words either way.
        latency_s: seconds each generate call sleeps (a stand-in for a slow model; 0: instant).
    """

    backend = "fake"

    def __init__(
        self,
        outputs: Script = (),
        *,
        default: str = "",
        model_id: str = "fake:script",
        chat_template: bool = False,
        tokenizer: TextTokenizer | Literal["whitespace"] | None = "whitespace",
        latency_s: float = 0.0,
    ) -> None:
        super().__init__()
        if latency_s < 0:
            raise ModelError(f"fake:script latency_s {latency_s}: give 0 or more seconds")
        if isinstance(tokenizer, str) and tokenizer != "whitespace":
            raise ModelError(
                f"fake:script tokenizer {tokenizer!r}: give 'whitespace', a tokenizer or None"
            )
        self._script = outputs if callable(outputs) else list(outputs)
        self._next = 0
        self.default = default
        self.model_id = model_id
        self._chat_template = chat_template
        self._tokenizer = WhitespaceTokenizer() if isinstance(tokenizer, str) else tokenizer
        self.latency_s = float(latency_s)
        self.calls: list[ScriptedCall] = []
        self.requests: list[str] = []

    @property
    def has_chat_template(self) -> bool:
        return self._chat_template

    @property
    def tokenizer(self) -> TextTokenizer | None:
        return self._tokenizer

    def manifest(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "backend": self.backend, "mode": "script"}

    def _answer(self, ask: Ask) -> Answer:
        if callable(self._script):
            return self._script(ask)
        if self._next < len(self._script):
            self._next += 1
            return self._script[self._next - 1]
        return self.default

    def _generate(
        self,
        requests: list[Request],
        decoding: Decoding,
        references: list[str] | None = None,
    ) -> list[list[Completion]]:
        if self.latency_s:
            time.sleep(self.latency_s)
        call = ScriptedCall(
            list(requests),
            decoding.n,
            decoding.max_new_tokens,
            decoding.temperature,
            decoding.top_p,
            decoding.seed,
            references,
            top_k=decoding.top_k,
        )
        self.calls.append(call)
        rng = random.Random(decoding.seed)
        out = []
        for request in requests:
            text = request if isinstance(request, str) else chat_as_text(request)
            self.requests.append(text)
            asks = [Ask(request, text, i, call, rng) for i in range(decoding.n)]
            out.append([_completion(self._answer(ask), decoding.max_new_tokens) for ask in asks])
        return out


def _completion(answer: Answer, max_new_tokens: int) -> Completion:
    """A text answer cut at ``max_new_tokens`` words; a scripted ``Completion`` as is."""
    if isinstance(answer, Completion):
        return answer
    words = answer.split(" ")
    kept = words[:max_new_tokens]
    finish = "length" if len(words) > max_new_tokens else "stop"
    return Completion(" ".join(kept), len(kept), finish)


def load_scripted(outputs: Script = (), **options: Any) -> ScriptedGenerator:
    """``fake:script`` for the registry: the constructor's arguments come as load options."""
    unknown = set(options) - {"default", "chat_template", "model_id", "tokenizer", "latency_s"}
    if unknown:
        raise ModelError(
            f"fake:script does not know option(s) {sorted(unknown)}; "
            "give outputs=, default=, chat_template=, model_id=, tokenizer=, latency_s="
        )
    return ScriptedGenerator(outputs, **options)
