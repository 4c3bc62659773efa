"""One tiny random Llama served as the model named ``tiny``, for the CLI tests that run a command
end to end on a model with weights (``--victim tiny``): the fixtures ``tiny`` and ``tiny_models``
(registered by this folder's conftest), and ``TEXT``, a licence sentence long enough for any
length those tests cut."""

from __future__ import annotations

import pytest

import memprobe_core.models as models_pkg
from tests.helpers.tiny_models import tiny_hf_generator

TEXT = " ".join(["the licence of this work is granted to any person who asks for a copy"] * 12)


@pytest.fixture(scope="module")
def tiny():
    return tiny_hf_generator(seed=7, adds_bos=True)


@pytest.fixture
def tiny_models(monkeypatch, tiny):
    """``models.load('tiny')`` gives the tiny random Llama; other names are unknown."""

    def load(name, *, backend=None, **options):
        if name != "tiny":
            raise models_pkg.ModelError(f"model {name!r} is unknown")
        return tiny

    monkeypatch.setattr(models_pkg, "load", load, raising=False)
