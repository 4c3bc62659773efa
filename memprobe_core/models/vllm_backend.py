"""The ``vllm`` backend: vLLM's offline engine for GPU users (``pip install 'memprobe[vllm]'``).

vLLM is imported only when this backend is chosen. One ``generate`` call becomes one
``LLM.generate`` (plain texts) and/or one ``LLM.chat`` (chats, the engine applies the model's chat
template) with ``SamplingParams(n=n, …)``, so 24 candidates are one engine call. Black-box for
memprobe's purposes: GCG needs the ``hf`` backend; the membership signals come from the engine's
prompt log-probs (``text_logprobs``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from memprobe_core.models.base import (
    Completion,
    Decoding,
    Generator,
    LoadOptions,
    LogprobsUnavailable,
    ModelError,
    Request,
    TextLogprobs,
)

log = logging.getLogger(__name__)


class VLLMGenerator(Generator):
    """A model served by an in-process ``vllm.LLM``.

    Args:
        llm: the engine (``vllm.LLM``).
        model_id: the name shown in manifests.
        manifest_extra: more manifest entries (dtype, revision …).
    """

    backend = "vllm"

    def __init__(
        self, llm: Any, *, model_id: str, manifest_extra: dict[str, Any] | None = None
    ) -> None:
        super().__init__()
        self.model_id = model_id
        self._llm = llm
        self._tokenizer = llm.get_tokenizer()
        self._manifest_extra = dict(manifest_extra or {})

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self._tokenizer, "chat_template", None))

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def manifest(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "backend": self.backend, **self._manifest_extra}

    def __repr__(self) -> str:
        return f"VLLMGenerator({self.model_id!r})"

    @property
    def scores_text(self) -> bool:
        return True

    def text_logprobs(self, texts: Sequence[str]) -> list[TextLogprobs]:
        """The log-probs of each text's own tokens: one engine call with
        ``SamplingParams(prompt_logprobs=0, max_tokens=1)`` (0 = the prompt token's own log-prob
        only; the one generated token is dropped). The first token, with nothing before it, has
        none; behind a BOS every text token is scored.
        """
        from vllm import SamplingParams

        params = SamplingParams(n=1, temperature=0.0, max_tokens=1, prompt_logprobs=0)
        outputs = self._llm.generate(list(texts), params, use_tqdm=False)
        return [self._scored(output) for output in outputs]

    def _scored(self, output: Any) -> TextLogprobs:
        ids = list(output.prompt_token_ids)
        values: list[float] = []
        starts: list[int] = []
        for i, (token, entry) in enumerate(zip(ids, output.prompt_logprobs or [])):
            if entry is None:  # the first token: nothing predicts it
                continue
            logprob = entry.get(token)
            if logprob is None:
                raise ModelError(f"vLLM gave no log-prob for prompt token {i} ({token})")
            values.append(float(getattr(logprob, "logprob", logprob)))
            # Where the token starts in the text: the length of what comes before it, decoded
            # (special tokens such as BOS are not text). Quadratic, but prompts are short.
            starts.append(len(self._tokenizer.decode(ids[:i], skip_special_tokens=True)))
        if not values:
            raise LogprobsUnavailable(f"vLLM returned no prompt log-probs for {self.model_id!r}")
        return TextLogprobs(tuple(values), tuple(starts))

    def _generate(
        self,
        requests: list[Request],
        decoding: Decoding,
        references: list[str] | None = None,  # no drafting here: not used
    ) -> list[list[Completion]]:
        from vllm import SamplingParams

        greedy = not decoding.do_sample
        # Greedy samples are all equal: ask for one and copy it.
        sampling: dict[str, Any] = {}
        if decoding.top_k and not greedy:
            # Only when set: vLLM's own default is "off", spelled -1 or 0 depending on its version.
            sampling["top_k"] = decoding.top_k
        params = SamplingParams(
            n=1 if greedy else decoding.n,
            temperature=decoding.temperature,
            top_p=1.0 if greedy else decoding.top_p,
            max_tokens=decoding.max_new_tokens,
            seed=decoding.seed,
            **sampling,
        )
        texts = [(i, r) for i, r in enumerate(requests) if isinstance(r, str)]
        chats = [(i, r) for i, r in enumerate(requests) if not isinstance(r, str)]
        results: dict[int, list[Completion]] = {}
        if texts:
            outputs = self._llm.generate([r for _, r in texts], params, use_tqdm=False)
            results.update(zip((i for i, _ in texts), (_completions(o) for o in outputs)))
        if chats:
            if not self.has_chat_template:
                raise ModelError(f"model {self.model_id!r} has no chat template; send plain text")
            outputs = self._llm.chat([r for _, r in chats], params, use_tqdm=False)
            results.update(zip((i for i, _ in chats), (_completions(o) for o in outputs)))
        return [results[i] * decoding.n if greedy else results[i] for i in range(len(requests))]


def _completions(request_output: Any) -> list[Completion]:
    out = []
    for choice in request_output.outputs:
        reason = "length" if choice.finish_reason == "length" else "stop"
        out.append(Completion(choice.text, len(choice.token_ids), reason))
    return out


def speculative_config(tokens: Any) -> dict[str, Any] | None:
    """vLLM's own n-gram speculative decoding (prompt lookup: drafts are found in the prompt
    and the output so far, verified by the model, so greedy answers are unchanged), with
    ``tokens`` drafted per step; ``None`` (off) when not given. vLLM takes no per-request
    draft, so the true suffix cannot be the draft as in the ``hf`` backend (docs/method.md §9).

    Raises:
        ModelError: ``tokens`` is not a whole number from 1 to 64.
    """
    if tokens is None:
        return None
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= 64:
        raise ModelError(
            f"speculative_ngram_tokens={tokens!r}: give a whole number of tokens from 1 to 64"
        )
    # The same pattern lengths as the hf backend's re-synchronisation (3, then 2).
    return {
        "method": "ngram",
        "num_speculative_tokens": tokens,
        "prompt_lookup_max": 3,
        "prompt_lookup_min": 2,
    }


def load_vllm(name: str, options: LoadOptions) -> VLLMGenerator:
    """Start a vLLM engine (the ``vllm`` backend's entry point).

    ``name`` is a hub id or local folder, optionally prefixed ``vllm:``. Options: dtype,
    revision, trust_remote_code; extras ``seed``, ``gpu_memory_utilization``,
    ``max_model_len``, ``tensor_parallel_size``, ``enable_prefix_caching`` (default on: a round's
    24 candidates share the attacker's refine request, and every victim prompt the chat
    template's opening, so their KV blocks are computed once).
    """
    known = {
        "seed",
        "gpu_memory_utilization",
        "max_model_len",
        "tensor_parallel_size",
        "enable_prefix_caching",
        "speculative_ngram_tokens",
    }
    unknown = set(options.extra) - known
    if unknown:
        raise ModelError(
            f"the vllm backend does not know option(s) {sorted(unknown)}; known: {sorted(known)}"
        )
    if options.device not in (None, "cuda"):
        raise ModelError(
            f"the vllm backend runs on a GPU; device {options.device!r} is not supported"
        )
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        raise ModelError(
            "the vllm backend needs a CUDA GPU and none is visible; use the hf backend"
        )
    from vllm import LLM

    model = name.removeprefix("vllm:")
    kwargs: dict[str, Any] = {
        "model": model,
        "dtype": options.dtype or "auto",
        "trust_remote_code": options.trust_remote_code,
        "seed": options.extra.get("seed", 0),
        "enable_prefix_caching": bool(options.extra.get("enable_prefix_caching", True)),
    }
    if options.revision:
        kwargs["revision"] = options.revision
    for key in ("gpu_memory_utilization", "max_model_len", "tensor_parallel_size"):
        if key in options.extra:
            kwargs[key] = options.extra[key]
    speculative = speculative_config(options.extra.get("speculative_ngram_tokens"))
    if speculative is not None:
        kwargs["speculative_config"] = speculative
    log.info("starting vLLM for %s", model)
    try:
        llm = LLM(**kwargs)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelError(f"vLLM could not load {model!r}: {type(exc).__name__}: {exc}") from exc
    return VLLMGenerator(
        llm,
        model_id=model,
        manifest_extra={
            "dtype": kwargs["dtype"],
            "revision": options.revision,
            "prefix_caching": kwargs["enable_prefix_caching"],
        },
    )
