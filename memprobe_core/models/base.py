"""The one contract every model backend implements: ``Generator.generate``.

A request is plain text (sent as is) or a chat (a list of ``{"role", "content"}`` messages, put
through the model's chat template by the backend). ``generate`` returns, for each request, ``n``
completions in order. Greedy decoding is ``temperature == 0``; sampling (``temperature > 0``)
may be narrowed to the ``top_k`` most likely tokens and to the nucleus of mass ``top_p``. Every
backend honours both or refuses the call with a ``ModelError`` naming itself and the option.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memprobe_core.errors import MemprobeError

Message = dict[str, str]
Chat = list[Message]
Request = str | Chat


class TextTokenizer(Protocol):
    """What memprobe needs of a tokenizer (HF tokenizers satisfy it)."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


@dataclass(frozen=True)
class Decoding:
    """The settings of one generation call: what ``Generator.generate`` takes and a result's
    manifest records (one type instead of keyword dicts rebuilt per method).

    Attributes:
        max_new_tokens: cap on generated tokens per completion.
        temperature: 0 for greedy decoding (the victim's, in the paper), > 0 to sample.
        top_p: nucleus sampling mass (used when sampling).
        n: completions per request.
        seed: makes sampling reproducible on the same machine.
        top_k: sample only among the ``top_k`` most likely tokens of each step (0: off; used
            when sampling, applied after the temperature and before top-p, as transformers
            does; ``top_k=1`` samples the greedy answer).
    """

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    seed: int | None = None
    top_k: int = 0

    @property
    def do_sample(self) -> bool:
        return self.temperature > 0

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``Generator.generate``."""
        return {
            "n": self.n,
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "seed": self.seed,
        }

    def manifest(self) -> dict[str, Any]:
        """What a result's manifest records (the call's seed is the run's, recorded once).

        ``top_k`` is recorded only when set, so the manifests of runs without it stay as they
        were before it existed.
        """
        recorded: dict[str, Any] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "do_sample": self.do_sample,
            "max_new_tokens": self.max_new_tokens,
        }
        if self.top_k:
            recorded["top_k"] = self.top_k
        return recorded


@dataclass(frozen=True)
class Completion:
    """One generated continuation.

    Attributes:
        text: the generated text, prompt removed.
        num_tokens: tokens generated (cost accounting).
        finish_reason: ``"stop"`` (EOS or a stop string) or ``"length"`` (hit max_new_tokens).
        token_ids: the generated ids (stop token excluded) where the backend has them; the
            output window is cut from these rather than from re-tokenized text.
    """

    text: str
    num_tokens: int
    finish_reason: str = "length"
    token_ids: list[int] | None = None


@dataclass
class GenerationStats:
    """Running cost counters of one Generator (read by attacks for their cost report)."""

    calls: int = 0
    requests: int = 0
    sequences: int = 0
    generated_tokens: int = 0
    seconds: float = 0.0

    def snapshot(self) -> GenerationStats:
        return GenerationStats(**vars(self))

    def since(self, earlier: GenerationStats) -> GenerationStats:
        return GenerationStats(**{k: getattr(self, k) - getattr(earlier, k) for k in vars(self)})


class ModelError(MemprobeError, RuntimeError):
    """A model could not be loaded or queried; the message says which and what to do."""


class LogprobsUnavailable(ModelError):
    """This model (or the server behind it) does not give the log-probs of a given text."""


@dataclass(frozen=True)
class TextLogprobs:
    """The log-probs a model gives the tokens of one text it is sent (not a continuation).

    Attributes:
        log_probs: ``ℓ_t = log p(x_t | x_<t)`` of each scored token, in order. A first token
            with no context (no BOS in front) has none and is not listed.
        offsets: character offset in the text at which each scored token starts (tells the
            prefix's tokens from the suffix's).
    """

    log_probs: tuple[float, ...]
    offsets: tuple[int, ...]


class Generator(ABC):
    """A text generator behind one of memprobe's backends.

    Subclasses set ``model_id`` and ``backend`` and implement ``_generate``; the public
    ``generate`` validates arguments and keeps the cost counters in ``stats``.
    """

    model_id: str
    backend: str

    def __init__(self) -> None:
        self.stats = GenerationStats()
        if self.runs_torch_here:  # a bad MEMPROBE_THREADS stops at load, not inside a unit
            from memprobe_core.models import threads

            threads.thread_mode()

    # --- capabilities -------------------------------------------------------------------------
    @property
    def has_chat_template(self) -> bool:
        """Whether chat requests go through a real chat template (else a plain text fallback)."""
        return False

    @property
    def tokenizer(self) -> TextTokenizer | None:
        """The model's tokenizer where the backend has one locally, else ``None``."""
        return None

    @property
    def white_box(self) -> bool:
        """Whether weights and gradients are reachable (needed by GCG)."""
        return False

    @property
    def runs_torch_here(self) -> bool:
        """Whether ``_generate`` runs torch in this process, so ``generate`` re-chooses torch's
        threads from the free cores before each batch (:mod:`memprobe_core.models.threads`).
        White-box backends do (their weights are reachable here); endpoints and vLLM do not and
        must never touch this process's torch threads. A backend that runs torch here without
        being white-box overrides this."""
        return self.white_box

    @property
    def scores_text(self) -> bool:
        """Whether :meth:`text_logprobs` may answer (a black-box model whose server returns the
        log-probs of a prompt); white-box models are scored from their weights instead."""
        return False

    def manifest(self) -> dict[str, Any]:
        """What identifies this model in a run's manifest (id, revision, backend, dtype, device)."""
        return {"model_id": self.model_id, "backend": self.backend}

    def text_logprobs(self, texts: Sequence[str]) -> list[TextLogprobs]:
        """The log-probs of each text's own tokens (the membership signals of black-box models).

        Raises:
            LogprobsUnavailable: the backend, or the server behind it, cannot give them.
        """
        raise LogprobsUnavailable(
            f"the {self.backend} backend does not return log-probs of a given text"
        )

    # --- generation ---------------------------------------------------------------------------
    def generate(
        self,
        requests: Sequence[Request],
        *,
        n: int = 1,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        references: Sequence[str] | None = None,
        top_k: int = 0,
    ) -> list[list[Completion]]:
        """Generate ``n`` completions for each request.

        Args:
            requests: plain texts or chats.
            n: completions per request (sampled; with ``temperature == 0`` all ``n`` are equal).
            max_new_tokens: cap on generated tokens per completion.
            temperature: 0 for greedy decoding, > 0 to sample.
            top_p: nucleus sampling mass (used when sampling).
            seed: makes sampling reproducible on the same machine.
            top_k: sample among the ``top_k`` most likely tokens of each step (0: off).
            references: per request, the text it is expected to be answered with (an audit's
                true suffix). A backend may draft greedy tokens from it and verify them
                (``hf``: ``hf_speculative``); it never changes what is generated.

        Returns:
            One list of ``n`` completions per request, in request order.
        """
        if isinstance(requests, (str, dict)):
            raise TypeError("requests must be a list of texts or chats, not a single request")
        if n < 1:
            raise ValueError(f"n={n}: ask for at least one completion")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens={max_new_tokens}: ask for at least one token")
        if temperature < 0:
            raise ValueError(f"temperature={temperature} is negative; use 0 for greedy")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p={top_p} must be in (0, 1]")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
            raise ValueError(
                f"top_k={top_k!r}: give a whole number of most likely tokens to sample from, "
                "or 0 to turn top-k off"
            )
        for i, request in enumerate(requests):
            _check_request(request, i)
        if references is not None and len(references) != len(requests):
            raise ValueError(
                f"{len(references)} references for {len(requests)} requests: give one per request"
            )
        if not requests:
            return []
        import time

        if self.runs_torch_here:  # a batch boundary: threads from the cores free now
            from memprobe_core.models import threads

            threads.adapt()
        started = time.perf_counter()
        decoding = Decoding(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            n=n,
            seed=seed,
            top_k=top_k,
        )
        out = self._generate(
            list(requests), decoding, list(references) if references is not None else None
        )
        self.stats.calls += 1
        self.stats.requests += len(requests)
        self.stats.sequences += len(requests) * n
        self.stats.generated_tokens += sum(c.num_tokens for row in out for c in row)
        self.stats.seconds += time.perf_counter() - started
        return out

    @abstractmethod
    def _generate(
        self,
        requests: list[Request],
        decoding: Decoding,
        references: list[str] | None = None,
    ) -> list[list[Completion]]:
        """Backend-specific generation of ``decoding.n`` completions per request (arguments
        already validated; ``references`` may be ignored: they only let a backend go faster)."""


def _check_request(request: Request, index: int) -> None:
    if isinstance(request, str):
        return
    if not isinstance(request, list) or not request:
        raise TypeError(f"request {index} must be a text or a non-empty list of chat messages")
    for message in request:
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise TypeError(
                f"request {index}: every chat message needs 'role' and 'content', got {message!r}"
            )


def check_switches(**values: Any) -> None:
    """Refuse an on/off option that is not True or False (a string "false" would be true).

    Raises:
        ModelError: naming the option, its value and what to give instead.
    """
    for name, value in values.items():
        if not isinstance(value, bool):
            raise ModelError(f"{name}={value!r} is not an on/off value: use True or False")


def chat_as_text(chat: Chat) -> str:
    """A plain-text rendering of a chat, for models without a chat template.

    Few-shot style (``User: … / Assistant:``) so a base model continues with an answer.
    """
    lines = []
    for message in chat:
        role = message["role"].strip().lower()
        label = {"system": "System", "user": "User", "assistant": "Assistant"}.get(
            role, role.title()
        )
        lines.append(f"{label}: {message['content']}")
    lines.append("Assistant:")
    return "\n\n".join(lines)


@dataclass
class LoadOptions:
    """Options accepted by ``memprobe_core.models.load`` (backends read the ones they know).

    Attributes:
        device: ``"cuda"``, ``"cpu"`` or ``None`` (CUDA when present).
        dtype: ``"bfloat16"``, ``"float16"``, ``"float32"`` or ``None`` (bf16 on CUDA, fp32 on CPU).
        trust_remote_code: run code shipped with a hub model (off: only enable for models you trust).
        revision: hub revision (branch, tag or commit).
        gguf_file: file name of a GGUF inside a folder.
        max_batch_size: cap on sequences per forward pass (``None``: all at once, halved on OOM).
        base_url: OpenAI-compatible endpoint (``http://host:port/v1``), or a fleet of them: a list
            or a comma-separated string; requests go to the server with the fewest in flight.
        api_key_env: environment variable holding the endpoint's key (never stored or logged).
        timeout_s: per-request timeout of an endpoint (connect, each read, the whole body).
        max_concurrency: requests in flight per endpoint server.
        max_response_bytes: largest endpoint response body read (default 8 MiB); a larger one
            is a ``ModelError``, read as a stream so it never sits in memory whole.
    """

    device: str | None = None
    dtype: str | None = None
    trust_remote_code: bool = False
    revision: str | None = None
    gguf_file: str | None = None
    max_batch_size: int | None = None
    base_url: str | list[str] | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 60.0
    max_concurrency: int = 8
    max_response_bytes: int = 8 * 2**20
    extra: dict[str, Any] = field(default_factory=dict)
