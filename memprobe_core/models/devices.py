"""Where a local model runs: the device rule every backend and the dtype policy share.

Its own module so that the dtype policy (``dtypes``), which needs the rule, and the ``hf``
backend, which needs the dtypes, do not import each other.
"""

from __future__ import annotations

from memprobe_core.models.base import ModelError


def pick_device(device: str | None) -> str:
    """``device`` as given, else ``"cuda"`` when a GPU is visible, else ``"cpu"``.

    Raises:
        ModelError: a CUDA device was asked for and no GPU is visible.
    """
    import torch

    if device:
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ModelError(
                f"device {device!r} was asked for but no CUDA GPU is visible; use 'cpu'"
            )
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"
