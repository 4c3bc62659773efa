"""The NER model registry: names and descriptions, own name lists, per-process cache, fallback."""

from __future__ import annotations

import pytest

from memprobe_core.ner.model import NerModelError
from memprobe_core.ner.registry import (
    EMBEDDED,
    NerModelEntry,
    load_ner_model,
    model_name_lists,
    ner_models,
    register_ner_model,
    unregister_ner_model,
)


def test_embedded_is_listed_first_with_its_own_name_lists() -> None:
    assert next(iter(ner_models())) == EMBEDDED
    in_names, out_names = model_name_lists(EMBEDDED)
    assert in_names and out_names and not set(in_names) & set(out_names)
    assert model_name_lists("dslim/bert-base-NER") is None


def test_registered_models_load_once_until_replaced() -> None:
    calls: list[str] = []

    def entry(tag: str) -> NerModelEntry:
        return NerModelEntry(
            "fake-ner", f"fake {tag}", lambda device, progress: calls.append(tag) or object()
        )

    register_ner_model(entry("first"))
    try:
        assert ner_models()["fake-ner"] == "fake first"
        one = load_ner_model("fake-ner")
        assert load_ner_model("fake-ner") is one and calls == ["first"]
        load_ner_model("fake-ner", device="cpu")  # another device is another copy
        assert calls == ["first", "first"]
        register_ner_model(entry("second"))  # replacing drops the cached copies
        assert load_ner_model("fake-ner") is not one and calls[-1] == "second"
    finally:
        unregister_ner_model("fake-ner")
    assert "fake-ner" not in ner_models()
    unregister_ner_model(EMBEDDED)
    assert EMBEDDED in ner_models()  # the embedded model cannot be removed


def test_an_unknown_name_is_loaded_as_a_folder_or_hub_id(tmp_path) -> None:
    with pytest.raises(NerModelError, match="could not load the token classifier"):
        load_ner_model(str(tmp_path / "no-such-model"), device="cpu")
