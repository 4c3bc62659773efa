"""Backends by name, imported lazily, and ``load``: the one door to every model.

A backend is a factory ``(name, LoadOptions) -> Generator`` named by a ``"module:function"``
string, so its heavy dependencies (torch, vllm …) are imported only when it is chosen. A missing
optional package becomes a ``ModelError`` carrying the ``pip install`` line.

Loaded models are cached process-wide by ``(backend, name, options)``: a model is loaded once,
even when several threads ask for it at the same time.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memprobe_core.models.base import Generator, LoadOptions, ModelError
from memprobe_core.models.embedded import EMBEDDED
from memprobe_core.models.hf import HubOfflineError

log = logging.getLogger(__name__)

Factory = Callable[[str, LoadOptions], Generator]


@dataclass(frozen=True)
class BackendSpec:
    """A registered backend.

    Attributes:
        name: what ``load(..., backend=name)`` takes.
        factory: ``"module:function"`` building a Generator from ``(name, LoadOptions)``.
        requires: top-level packages it imports (checked before the import, for the hint).
        install: the pip line that installs them.
        description: one line for docs and the dashboard.
    """

    name: str
    factory: str
    requires: tuple[str, ...] = ()
    install: str = ""
    description: str = ""


_BACKENDS: dict[str, BackendSpec] = {}


def register_backend(spec: BackendSpec) -> None:
    """Add (or replace) a backend."""
    _BACKENDS[spec.name] = spec


def backends() -> dict[str, BackendSpec]:
    """All registered backends by name."""
    return dict(_BACKENDS)


def backend_available(name: str) -> bool:
    """Whether the packages a backend needs are installed (without importing them)."""
    spec = _spec(name)
    return not _missing(spec)


register_backend(
    BackendSpec(
        "hf",
        "memprobe_core.models.hf:load_hf",
        ("torch", "transformers"),
        "pip install torch transformers gguf",
        "transformers + torch (hub id, local folder, GGUF file)",
    )
)
register_backend(
    BackendSpec(
        "embedded",
        "memprobe_core.models.embedded:load_embedded",
        ("torch", "transformers", "gguf"),
        "pip install torch transformers gguf",
        "offline default models shipped as packages",
    )
)
register_backend(
    BackendSpec(
        "openai",
        "memprobe_core.models.openai_backend:load_openai",
        ("httpx",),
        "pip install httpx",
        "any OpenAI-compatible HTTP endpoint (black-box)",
    )
)
register_backend(
    BackendSpec(
        "vllm",
        "memprobe_core.models.vllm_backend:load_vllm",
        ("vllm",),
        "pip install 'memprobe[vllm]'  (or: pip install vllm)",
        "vLLM engine on a GPU (black-box)",
    )
)
register_backend(
    BackendSpec(
        "fake",
        "memprobe_core.models.fake:load_fake",
        (),
        "",
        "deterministic fake model for tests and demos",
    )
)


def guess_backend(name: str, options: dict[str, Any] | None = None) -> str:
    """The backend a name implies.

    Embedded short names → ``embedded``; ``fake`` / ``fake:<mode>`` → ``fake``;
    ``openai:<model>`` or a ``base_url`` option → ``openai``; ``vllm:<model>`` → ``vllm``;
    anything else (hub id, folder, GGUF file) → ``hf``.
    """
    if name in EMBEDDED:
        return "embedded"
    if name == "fake" or name.startswith("fake:"):
        return "fake"
    if name.startswith("openai:") or (options or {}).get("base_url"):
        return "openai"
    if name.startswith("vllm:"):
        return "vllm"
    return "hf"


_cache: dict[tuple[str, str, str], Generator] = {}
_cache_lock = threading.RLock()
_key_locks: dict[tuple[str, str, str], threading.Lock] = {}


def load(name_or_path: str, *, backend: str | None = None, **options: Any) -> Generator:
    """Load a model once per process and return it behind the Generator contract.

    Args:
        name_or_path: an embedded name (``gemma-3-270m``), a hub id, a local folder, a ``.gguf``
            file, ``openai:<model>``, ``vllm:<model>`` or ``fake[:<mode>]``.
        backend: force a backend (``hf``, ``embedded``, ``openai``, ``vllm``, ``fake``);
            ``None`` guesses it from the name.
        **options: fields of ``LoadOptions`` (device, dtype, trust_remote_code, revision,
            gguf_file, max_batch_size, base_url, api_key_env, timeout_s, max_concurrency);
            other keywords go to the backend as extras (it rejects ones it does not know).

    Returns:
        A shared Generator: callers must not mutate it.

    Raises:
        ModelError: unknown backend, missing package (with the install line), unknown model,
            missing or corrupt file, unreachable endpoint.
    """
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise ModelError(
            f"model name {name_or_path!r} is empty; give an embedded name, hub id or path"
        )
    name_or_path = name_or_path.strip()
    chosen = backend or guess_backend(name_or_path, options)
    spec = _spec(chosen)
    opts = _options(options)
    key = (chosen, name_or_path, json.dumps(dataclasses.asdict(opts), sort_keys=True, default=repr))
    with _cache_lock:
        if key in _cache:
            return _cache[key]
        key_lock = _key_locks.setdefault(key, threading.Lock())
    # Per-model lock: two threads asking for one model load it once, others load in parallel.
    with key_lock:
        with _cache_lock:
            if key in _cache:
                return _cache[key]
        factory = _factory(spec)
        try:
            generator = factory(name_or_path, opts)
        except HubOfflineError as exc:
            raise HubOfflineError(f"{exc} (embedded names: {', '.join(EMBEDDED)})") from exc
        with _cache_lock:
            _cache[key] = generator
        log.info("loaded %s with backend %s", name_or_path, chosen)
        return generator


def clear_cache() -> None:
    """Forget every loaded model (tests; frees memory once callers drop their references)."""
    with _cache_lock:
        _cache.clear()
        _key_locks.clear()


def cached_models() -> list[tuple[str, str]]:
    """``(backend, name)`` of the models loaded so far."""
    with _cache_lock:
        return [(b, n) for b, n, _ in _cache]


def _spec(name: str) -> BackendSpec:
    if name not in _BACKENDS:
        raise ModelError(f"backend {name!r} is unknown; choose from {sorted(_BACKENDS)}")
    return _BACKENDS[name]


def _missing(spec: BackendSpec) -> list[str]:
    return [pkg for pkg in spec.requires if importlib.util.find_spec(pkg) is None]


def _factory(spec: BackendSpec) -> Factory:
    missing = _missing(spec)
    if missing:
        raise ModelError(
            f"backend {spec.name!r} needs {', '.join(missing)}, which is not installed; "
            f"run: {spec.install}"
        )
    module_name, func = spec.factory.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelError(
            f"backend {spec.name!r} could not be imported ({exc}); run: {spec.install}"
        ) from exc
    return getattr(module, func)


def _options(options: dict[str, Any]) -> LoadOptions:
    fields = {f.name for f in dataclasses.fields(LoadOptions)} - {"extra"}
    known = {k: v for k, v in options.items() if k in fields}
    extra = dict(options.get("extra") or {})
    extra.update({k: v for k, v in options.items() if k not in fields and k != "extra"})
    return LoadOptions(**known, extra=extra)
