"""The ``hf`` backend: transformers + torch, batched generation, white-box access for GCG.

Loads a hub id, a local folder or a GGUF file. All ``requests × n`` sequences of one call go
through as few batches as memory allows (``max_batch_size``; on CUDA out-of-memory the batch is
halved and retried). Each batch is decoded by memprobe's own loop (``hf_decode.decode``: one
prefill per distinct prompt shared by its ``n`` rows, finished rows leave the batch, token ids
kept) or, with ``generation_loop="transformers"``, by ``model.generate``. Greedy when
``temperature == 0`` (then one sequence per request is computed and copied ``n`` times), seeded
sampling otherwise, without touching the process's global random state (own loop: a
``torch.Generator`` per batch; ``model.generate``: inside ``torch.random.fork_rng``)."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from memprobe_core.models.base import (
    Completion,
    Decoding,
    Generator,
    LoadOptions,
    ModelError,
    Request,
    chat_as_text,
    check_switches,
)
from memprobe_core.models.devices import pick_device
from memprobe_core.models.hf_decode import (
    BUCKET_MIN_SAVED,
    BatchDecoding,
    Decoded,
    decode,
    generate_reference,
    seeded,
    supports_own_loop,
)
from memprobe_core.models.hf_greedy_head import screening_applies
from memprobe_core.models.hf_speculative import DraftPolicy, DraftStats, decode_drafted
from memprobe_core.models.live import TokenWatch, open_batch

log = logging.getLogger(__name__)

_DTYPES = ("bfloat16", "float16", "float32")
GenerationLoop = Literal["memprobe", "transformers"]
_LOOPS = ("memprobe", "transformers")
_EXTRA_OPTIONS = (
    "stop_token_ids",
    "generation_loop",
    "compile",
    "attn_implementation",
    "speculative",
    "prefill_buckets",
    "screened_head",
)
# The extras that are on/off values (their defaults are HFGenerator's).
_SWITCHES = ("compile", "speculative", "prefill_buckets", "screened_head")


def pick_dtype(dtype: str | None, device: str) -> Any:
    """The torch dtype: as given, else bfloat16 on CUDA and float32 elsewhere."""
    import torch

    if dtype is None:
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    if dtype not in _DTYPES:
        raise ModelError(f"dtype {dtype!r} is unknown; use one of {list(_DTYPES)}")
    return getattr(torch, dtype)


class HFGenerator(Generator):
    """A transformers causal LM behind the Generator contract.

    Args:
        model: a loaded ``PreTrainedModel`` (causal LM), already on its device.
        tokenizer: its tokenizer; set to left padding here, with a pad token if it had none.
        model_id: the name shown in manifests.
        max_batch_size: most sequences per ``generate`` call (``None``: all at once).
        manifest_extra: more manifest entries (source, revision, file size …).
        stop_token_ids: token ids that end a completion (default: the model's EOS ids).
        generation_loop: ``"memprobe"`` (default: ``hf_decode``'s loop — one prefill per
            distinct prompt, finished rows leave the batch) or ``"transformers"``
            (``model.generate``; the reference, and the fallback for models the loop cannot drive).
        compile: ``model.generate`` with a static KV cache and ``torch.compile`` (off by default:
            on a 2-core CPU it compiled for 124 s and then ran at 0.41× this package's own loop,
            ``python bench/generation.py --compile``; meant for GPUs).
        speculative: greedy rows given a reference text (``generate(references=…)``) draft
            from it and verify the draft in one forward pass (``hf_speculative``; on by
            default, the same tokens as without it; only with memprobe's own loop).
        draft_policy: how much to draft (``hf_speculative.DraftPolicy``; default: its
            defaults, with a GPU's cost per position on CUDA).
        prefill_buckets: prompts of very different lengths are prefilled in length buckets
            merged into one batch (``hf_decode.length_buckets``; on by default, the same tokens
            as one padded prefill; only with memprobe's own loop).
        screened_head: greedy decoding and verification of a float32 model on a CPU with
            native bfloat16 screen the vocabulary projection in bfloat16 and decide in float32
            (``hf_greedy_head``; on by default, the same choices; only with memprobe's own loop).
    """

    backend = "hf"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_id: str,
        max_batch_size: int | None = None,
        manifest_extra: dict[str, Any] | None = None,
        stop_token_ids: Sequence[int] | None = None,
        generation_loop: GenerationLoop = "memprobe",
        compile: bool = False,
        speculative: bool = True,
        draft_policy: DraftPolicy | None = None,
        prefill_buckets: bool = True,
        screened_head: bool = True,
    ) -> None:
        super().__init__()
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError(f"max_batch_size={max_batch_size}: use at least 1 (or None)")
        if generation_loop not in _LOOPS:
            raise ValueError(
                f"generation_loop {generation_loop!r} is unknown; use one of {list(_LOOPS)}"
            )
        self.generation_loop: GenerationLoop = generation_loop
        self.compile = bool(compile)
        self.speculative = bool(speculative)
        self.prefill_buckets = bool(prefill_buckets)
        self.screened_head = bool(screened_head)
        self.draft_policy = draft_policy or _default_policy(model)
        # What drafting did since the model was loaded (benchmarks read it).
        self.draft_stats = DraftStats()
        self._own_loop_ok = supports_own_loop(model)
        if generation_loop == "memprobe" and not self._own_loop_ok:
            log.info(
                "%s: memprobe's decoding loop cannot drive this model; using model.generate",
                model_id,
            )
        self.model_id = model_id
        self._model = model
        self._tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self._manifest_extra = dict(manifest_extra or {})
        # One generate at a time per model: concurrent calls would only fight for the device.
        self._lock = threading.Lock()
        tokenizer.padding_side = "left"  # generation appends on the right, so pad on the left
        if tokenizer.pad_token_id is None:
            if tokenizer.eos_token is None:
                raise ModelError(
                    f"model {model_id!r}: its tokenizer has neither a pad nor an EOS token"
                )
            tokenizer.pad_token = tokenizer.eos_token
        self.stop_token_ids: tuple[int, ...] = tuple(stop_token_ids or _eos_ids(model, tokenizer))

    # --- capabilities -------------------------------------------------------------------------
    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self._tokenizer, "chat_template", None))

    @property
    def tokenizer(self) -> Any:
        """The HF tokenizer (left padding)."""
        return self._tokenizer

    @property
    def torch_model(self) -> Any:
        """The torch model, for white-box methods (never mutate it: it is shared)."""
        return self._model

    @property
    def device(self) -> Any:
        return self._model.device

    @property
    def white_box(self) -> bool:
        return True

    def manifest(self) -> dict[str, Any]:
        config = self._model.config
        out = {
            "model_id": self.model_id,
            "backend": self.backend,
            "model_type": getattr(config, "model_type", None),
            "dtype": str(self._model.dtype).removeprefix("torch."),
            "device": str(self.device),
            "revision": getattr(config, "_commit_hash", None),
            "parameters": int(sum(p.numel() for p in self._model.parameters())),
            "chat_template": self.has_chat_template,
            "attn_implementation": getattr(config, "_attn_implementation", None),
            "generation_loop": "memprobe" if self._uses_own_loop else "transformers",
            "compile": self.compile,
            "speculative": self.speculative and self._uses_own_loop,
            "prefill_buckets": self.prefill_buckets and self._uses_own_loop,
            "screened_head": self._screens,
        }
        out.update(self._manifest_extra)
        return out

    def variant(self, **changes: Any) -> HFGenerator:
        """A generator over the same model and tokenizer with other settings.

        Benchmarks and tests use it to compare generation loops on one loaded model.

        Args:
            **changes: ``HFGenerator`` keyword arguments to change (``generation_loop``,
                ``compile``, ``stop_token_ids``, ``max_batch_size``, ``model_id`` …).
        """
        kwargs: dict[str, Any] = {
            "model_id": self.model_id,
            "max_batch_size": self.max_batch_size,
            "manifest_extra": self._manifest_extra,
            "stop_token_ids": self.stop_token_ids,
            "generation_loop": self.generation_loop,
            "compile": self.compile,
            "speculative": self.speculative,
            "draft_policy": self.draft_policy,
            "prefill_buckets": self.prefill_buckets,
            "screened_head": self.screened_head,
        }
        kwargs.update(changes)
        return HFGenerator(self._model, self._tokenizer, **kwargs)

    def __repr__(self) -> str:
        return f"HFGenerator({self.model_id!r}, device={self.device}, dtype={self._model.dtype})"

    # --- prompts ------------------------------------------------------------------------------
    def prompt_text(self, request: Request) -> str:
        """The exact text fed to the model for ``request`` (chat template applied for chats)."""
        if isinstance(request, str):
            return request
        if self.has_chat_template:
            return self._tokenizer.apply_chat_template(
                request, add_generation_prompt=True, tokenize=False
            )
        return chat_as_text(request)

    def prompt_ids(self, request: Request) -> list[int]:
        """Token ids fed to the model for ``request``.

        Plain text gets the tokenizer's special tokens (e.g. BOS); a chat template already
        writes its own, so they are not added twice.
        """
        text = self.prompt_text(request)
        special = isinstance(request, str) or not self.has_chat_template
        ids = self._tokenizer(text, add_special_tokens=special)["input_ids"]
        if not ids:
            raise ValueError("a request encodes to zero tokens; give it some text")
        return list(ids)

    # --- generation ---------------------------------------------------------------------------
    def _generate(
        self,
        requests: list[Request],
        decoding: Decoding,
        references: list[str] | None = None,
    ) -> list[list[Completion]]:
        import torch

        greedy = not decoding.do_sample
        prompts = [self.prompt_ids(r) for r in requests]
        drafts = self._draft_ids(references) if greedy else None
        # Greedy: every one of the n completions is the same, so compute it once per request.
        copies = 1 if greedy else decoding.n
        jobs = [i for i in range(len(prompts)) for _ in range(copies)]
        # Similar lengths together wastes less padding when batches are capped; the sort is
        # stable, so the n rows of one request stay adjacent (one shared prefill). Results go
        # back by job index.
        order = sorted(range(len(jobs)), key=lambda j: len(prompts[jobs[j]]))
        results: list[Completion | None] = [None] * len(jobs)
        plan = _Plan(
            decoding.max_new_tokens,
            decoding.temperature,
            decoding.top_p,
            decoding.seed,
            top_k=decoding.top_k,
        )
        # Job j is copy j % copies of request j // copies: the watch's row j (memprobe_core.models.live).
        watch = open_batch(len(prompts), copies, decoding.max_new_tokens, self._decode_text)
        with (
            self._lock,
            torch.inference_mode(),
            seeded(decoding.seed, self.device, active=self._seed_globally(plan)),
        ):
            start = 0
            batch = self.max_batch_size or len(order)
            while start < len(order):
                chunk = order[start : start + batch]
                chunk_drafts = [drafts[jobs[j]] for j in chunk] if drafts is not None else None
                step = watch.chunk(chunk, self.stop_token_ids) if watch is not None else None
                try:
                    rows = self._run_batch(
                        [prompts[jobs[j]] for j in chunk], plan, chunk_drafts, step
                    )
                except torch.OutOfMemoryError as exc:
                    if batch == 1:
                        raise ModelError(
                            f"model {self.model_id!r} ran out of GPU memory on a single sequence; "
                            "use a shorter prompt, fewer new tokens, a smaller dtype or the CPU"
                        ) from exc
                    batch = max(1, len(chunk) // 2)
                    log.warning(
                        "%s: CUDA out of memory, retrying with batches of %d", self.model_id, batch
                    )
                    torch.cuda.empty_cache()
                    continue
                for j, completion in zip(chunk, rows):
                    results[j] = completion
                start += len(chunk)
        if watch is not None:
            _close_watch(watch, results)
        out: list[list[Completion]] = []
        for i in range(len(requests)):
            mine = [c for j, c in zip(jobs, results) if j == i and c is not None]
            out.append(mine * decoding.n if greedy else mine)
        return out

    def _draft_ids(self, references: list[str] | None) -> list[list[int]] | None:
        """The reference texts as token ids to draft from (``None``: no drafting)."""
        if references is None or not self.speculative or not self._uses_own_loop:
            return None
        return [list(self._tokenizer.encode(r, add_special_tokens=False)) for r in references]

    def _seed_globally(self, plan: _Plan) -> bool:
        # The own loop draws from a torch.Generator of its own; model.generate only knows the
        # global generator, which is then seeded inside fork_rng.
        return not plan.greedy and not self._uses_own_loop

    @property
    def _uses_own_loop(self) -> bool:
        return self.generation_loop == "memprobe" and not self.compile and self._own_loop_ok

    @property
    def _screens(self) -> bool:
        """Whether greedy verification screens the vocabulary projection (``hf_greedy_head``)."""
        return self.screened_head and self._uses_own_loop and screening_applies(self._model)

    def _run_batch(
        self,
        prompts: list[list[int]],
        plan: _Plan,
        drafts: list[list[int]] | None = None,
        step: Any = None,
    ) -> list[Completion]:
        """Generate for one batch of prompt rows (equal rows share one prefill in the own loop;
        greedy rows with ``drafts`` draft from them). ``step``: called with the rows' token ids
        after every decoding step (a :class:`~memprobe_core.models.live.TokenWatch` chunk; the
        ``model.generate`` path does not stream)."""
        import torch

        spec = BatchDecoding(
            max_new_tokens=plan.max_new_tokens,
            temperature=plan.temperature,
            top_p=plan.top_p,
            top_k=plan.top_k,
            stop_ids=self.stop_token_ids,
            pad_id=self._tokenizer.pad_token_id,
            bucket_min_saved=BUCKET_MIN_SAVED if self.prefill_buckets else sys.maxsize,
            screened_head=self.screened_head,
        )
        if not self._uses_own_loop:
            rows = generate_reference(self._model, prompts, spec, compile_=self.compile)
            return [self._completion(row) for row in rows]
        if drafts is not None and plan.greedy:
            rows = decode_drafted(
                self._model, prompts, drafts, spec, self.draft_policy, self.draft_stats, watch=step
            )
            return [self._completion(row) for row in rows]
        generator = None
        if plan.seed is not None and not plan.greedy:
            # Seeded per batch: a batch's samples depend only on the seed and the batch itself.
            seed = plan.seed if plan.batches == 0 else hash((plan.seed, plan.batches)) & (2**63 - 1)
            generator = torch.Generator(device=self.device).manual_seed(seed)
        plan.batches += 1
        decoded = decode(self._model, prompts, spec, generator, watch=step)
        return [self._completion(row) for row in decoded]

    def _decode_text(self, ids: list[int]) -> str:
        return str(self._tokenizer.decode(ids, skip_special_tokens=True))

    def _completion(self, row: Decoded) -> Completion:
        # num_tokens counts the stop token (the model did generate it); text and ids leave it out.
        text_ids = row.ids[:-1] if row.stopped else row.ids
        return Completion(
            text=self._tokenizer.decode(list(text_ids), skip_special_tokens=True),
            num_tokens=len(row.ids),
            finish_reason="stop" if row.stopped else "length",
            token_ids=list(text_ids),
        )


def _close_watch(watch: TokenWatch, results: Sequence[Completion | None]) -> None:
    """Publish the call's final rows exactly as returned (text without the stop token)."""
    watch.close([(j, c.text, c.num_tokens) for j, c in enumerate(results) if c is not None])


@dataclass
class _Plan:
    """The settings of one ``generate`` call, plus a counter of batches run (for per-batch seeds)."""

    max_new_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    batches: int = 0
    top_k: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def _default_policy(model: Any) -> DraftPolicy:
    # A GPU reads the weights once for many positions almost for free; a CPU computes each.
    on_cuda = str(getattr(model, "device", "cpu")).startswith("cuda")
    return DraftPolicy(position_cost=0.005) if on_cuda else DraftPolicy()


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    """EOS ids of the checkpoint's generation config (chat models often list several) and tokenizer."""
    ids: list[int] = []
    for source in (getattr(model, "generation_config", None), model.config):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if value is None:
            continue
        ids.extend(value if isinstance(value, (list, tuple)) else [value])
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    return list(dict.fromkeys(int(i) for i in ids))


# --- loading ----------------------------------------------------------------------------------


def resolve_source(name_or_path: str, gguf_file: str | None) -> tuple[str, str | None, str]:
    """Where to load from: ``(folder or hub id, gguf file name or None, kind)``.

    ``kind`` is ``"gguf"``, ``"local"`` or ``"hub"``.

    Raises:
        ModelError: a path that does not exist, or a hub id while the hub is offline.
    """
    path = Path(name_or_path).expanduser()
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ModelError(
                f"model file {str(path)!r} is not a .gguf file; pass a GGUF file or a model folder "
                "(with config.json and weights)"
            )
        return str(path.parent), path.name, "gguf"
    if path.is_dir():
        if gguf_file:
            if not (path / gguf_file).is_file():
                raise ModelError(f"gguf_file {gguf_file!r} is not in folder {str(path)!r}")
            return str(path), gguf_file, "gguf"
        if not (path / "config.json").is_file():
            ggufs = sorted(p.name for p in path.glob("*.gguf"))
            if len(ggufs) == 1:
                return str(path), ggufs[0], "gguf"
            hint = f" (it holds GGUF files {ggufs}: pass gguf_file=...)" if ggufs else ""
            raise ModelError(
                f"model folder {str(path)!r} has no config.json{hint}; point at a transformers "
                "model folder or a .gguf file"
            )
        return str(path), None, "local"
    # A hub id is "name" or "org/name"; anything else that does not exist is a mistyped path.
    looks_like_path = (
        name_or_path.startswith((".", "/", "~"))
        or "\\" in name_or_path
        or name_or_path.lower().endswith((".gguf", ".safetensors", ".bin"))
        or name_or_path.count("/") > 1
    )
    if looks_like_path:
        raise ModelError(f"model path {name_or_path!r} does not exist; check the path")
    if _hub_offline():
        # The embedded names are added by memprobe_core.models.registry.load, which knows them:
        # this module is the layer under the embedded backend and does not import it.
        raise HubOfflineError(
            f"model {name_or_path!r} is not a local folder or file, and the hub is offline "
            "(HF_HUB_OFFLINE is set); use an embedded name or a local path, or allow hub downloads"
        )
    return name_or_path, gguf_file, "hub"


class HubOfflineError(ModelError):
    """A model name that only the hub could resolve, with the hub switched off."""


def _hub_offline() -> bool:
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in ("1", "true", "yes", "on")


def _attention(options: LoadOptions) -> dict[str, Any]:
    # Only passed when asked for: transformers 5 already defaults to SDPA where a model supports
    # it, and forcing "sdpa" would refuse the models that do not.
    chosen = options.extra.get("attn_implementation")
    return {} if chosen is None else {"attn_implementation": chosen}


def load_hf(
    name_or_path: str,
    options: LoadOptions,
    *,
    model_id: str | None = None,
    manifest_extra: dict[str, Any] | None = None,
) -> HFGenerator:
    """Load a causal LM with transformers (the ``hf`` backend's entry point).

    Args:
        name_or_path: hub id, local model folder, or ``.gguf`` file.
        options: device, dtype, revision, trust_remote_code, gguf_file, max_batch_size
            (``extra``: ``stop_token_ids``; ``generation_loop`` and ``compile`` as in
            ``HFGenerator``; ``attn_implementation``: unset lets transformers pick, which is
            ``"sdpa"`` — PyTorch's fused attention, on CPU and CUDA — for every model that
            supports it and ``"eager"`` otherwise; the manifest records what was used).
        model_id: the name for manifests (default: ``name_or_path``).
        manifest_extra: more manifest entries (the embedded backend names its package).

    Raises:
        ModelError: missing path, hub offline, unreadable/corrupt files, unknown options.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    unknown = set(options.extra) - set(_EXTRA_OPTIONS)
    if unknown:
        raise ModelError(
            f"the hf backend does not know option(s) {sorted(unknown)}; it knows {list(_EXTRA_OPTIONS)}"
        )
    switches = {name: options.extra[name] for name in _SWITCHES if name in options.extra}
    check_switches(**switches)
    source, gguf, kind = resolve_source(name_or_path, options.gguf_file)
    device = pick_device(options.device)
    dtype = pick_dtype(options.dtype, device)
    common: dict[str, Any] = {"trust_remote_code": options.trust_remote_code}
    if options.revision:
        common["revision"] = options.revision
    if gguf:
        common["gguf_file"] = gguf
    label = f"{source}/{gguf}" if gguf else source
    log.info("loading %s (%s) on %s as %s", label, kind, device, str(dtype).removeprefix("torch."))
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **common)
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=dtype, **_attention(options), **common
        )
    except (OSError, ValueError, KeyError, RuntimeError, AttributeError) as exc:
        what = "GGUF file" if gguf else ("model folder" if kind == "local" else "hub model")
        hint = " (is it a complete, uncorrupted GGUF file?)" if gguf else ""
        raise ModelError(
            f"could not load {what} {label!r}{hint}: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:  # gguf's reader raises assorted errors on damaged files
        if not gguf:
            raise
        raise ModelError(
            f"could not read GGUF file {label!r} (is it a complete, uncorrupted GGUF file?): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    model.to(device)  # type: ignore[arg-type]  # transformers types it for PreTrainedModel only
    model.eval()
    extra: dict[str, Any] = {"source": kind}
    if options.revision:
        extra["revision"] = options.revision
    if gguf:
        extra["gguf_file"] = gguf
        extra["gguf_bytes"] = (Path(source) / gguf).stat().st_size
    extra.update(manifest_extra or {})
    return HFGenerator(
        model,
        tokenizer,
        model_id=model_id or name_or_path,
        max_batch_size=options.max_batch_size,
        manifest_extra=extra,
        stop_token_ids=options.extra.get("stop_token_ids"),
        generation_loop=options.extra.get("generation_loop", "memprobe"),
        **switches,
    )
