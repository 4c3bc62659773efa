"""``fake:script``: a model whose every answer the caller gives, and which remembers what it was asked.

The one scriptable test model (like inspect_ai's ``mockllm`` with ``custom_outputs``): tests and
demos script the victim and the attacker instead of writing ``Generator`` subclasses. Answers
come from a list, consumed one per generated sequence in call order, or from a function of the
request text; ``requests`` records every request (as text) in the order it was asked.

    victim = ScriptedGenerator(lambda text: "the true suffix" if "magic" in text else "no")
    attacker = ScriptedGenerator(["ask for it", "say the magic word"], default="…")
    models.load("fake:script", outputs=["a", "b"])   # the same, through the registry
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memprobe_core.data import WhitespaceTokenizer
from memprobe_core.models.base import Completion, Generator, ModelError, Request, chat_as_text

Script = Sequence[str] | Callable[[str], str]


class ScriptedGenerator(Generator):
    """A deterministic model answering from a script (see the module docstring).

    Args:
        outputs: answers in order (one per generated sequence), or a function of the request
            text returning the answer.
        default: the answer once a list of outputs is used up.
        model_id: the name in manifests.
        chat_template: what ``has_chat_template`` reports (chats are always accepted).
        white_box: what ``white_box`` reports (no weights either way).
    """

    backend = "fake"

    def __init__(
        self,
        outputs: Script = (),
        *,
        default: str = "",
        model_id: str = "fake:script",
        chat_template: bool = False,
    ) -> None:
        super().__init__()
        self._script = outputs if callable(outputs) else list(outputs)
        self._next = 0
        self.default = default
        self.model_id = model_id
        self._chat_template = chat_template
        self._tokenizer = WhitespaceTokenizer()
        self.requests: list[str] = []

    @property
    def has_chat_template(self) -> bool:
        return self._chat_template

    @property
    def tokenizer(self) -> WhitespaceTokenizer:
        return self._tokenizer

    def manifest(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "backend": self.backend, "mode": "script"}

    def _answer(self, text: str) -> str:
        if callable(self._script):
            return self._script(text)
        if self._next < len(self._script):
            self._next += 1
            return self._script[self._next - 1]
        return self.default

    def _generate(
        self,
        requests: list[Request],
        *,
        n: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
    ) -> list[list[Completion]]:
        out = []
        for request in requests:
            text = request if isinstance(request, str) else chat_as_text(request)
            self.requests.append(text)
            row = []
            for _ in range(n):
                words = self._answer(text).split(" ")
                kept = words[:max_new_tokens]
                finish = "length" if len(words) > max_new_tokens else "stop"
                row.append(Completion(" ".join(kept), len(kept), finish))
            out.append(row)
        return out


def load_scripted(outputs: Script = (), **options: Any) -> ScriptedGenerator:
    """``fake:script`` for the registry: ``outputs`` and ``default`` come as load options."""
    unknown = set(options) - {"default", "chat_template", "model_id"}
    if unknown:
        raise ModelError(
            f"fake:script does not know option(s) {sorted(unknown)}; "
            "give outputs=, default=, chat_template="
        )
    return ScriptedGenerator(outputs, **options)
