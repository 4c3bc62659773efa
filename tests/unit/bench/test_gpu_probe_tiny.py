"""bench/gpu_probe.py on tiny shapes on the CPU: the meta-device build and the probe's figures."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def gpu_probe():
    spec = importlib.util.spec_from_file_location("gpu_probe", ROOT / "bench" / "gpu_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("shape", ["llama-tiny", "mistral-tiny"])
def test_meta_built_model_matches_a_normally_built_one(gpu_probe, shape):
    # After to_empty the rotary buffers are garbage unless recomputed: logits would differ.
    model = gpu_probe.build_model(shape, "cpu", torch.float32, seed=0)
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_config(model.config).eval()
    ref.load_state_dict(model.state_dict())
    ids = torch.tensor([[3, 5, 7, 11, 13, 17, 19, 23]])
    with torch.no_grad():
        got, want = model(input_ids=ids).logits, ref(input_ids=ids).logits
    assert torch.isfinite(got).all()
    assert torch.allclose(got, want, atol=1e-5)
    assert got.std() > 0  # weights really initialised
    assert model.config.num_key_value_heads == (2 if shape.startswith("mistral") else 4)


def test_7b_shapes_have_7b_parameters(gpu_probe):
    from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig

    for name, cls, billions in (
        ("llama-7b", LlamaConfig, 6.74),
        ("mistral-7b", MistralConfig, 7.24),
    ):
        spec = dict(gpu_probe.SHAPES[name])
        spec.pop("arch")
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(cls(**spec, tie_word_embeddings=False))
        assert sum(p.numel() for p in model.parameters()) / 1e9 == pytest.approx(billions, abs=0.01)


def test_tiny_probe_runs_the_attacker_loop_and_reports_rounds(gpu_probe, tmp_path, capsys):
    out = tmp_path / "figures.json"
    figures = gpu_probe.main(
        [
            "--tiny",
            "--device",
            "cpu",
            "--rounds",
            "2",
            "--n",
            "4",
            "--length",
            "60",
            "--max-prompt-tokens",
            "8",
            "--json",
            str(out),
        ]
    )
    assert [r["round"] for r in figures["rounds"]] == [0, 1, 2]
    assert figures["status"] == "finished"
    assert figures["attacker_queries"] == 1 + 2 * 4
    first = figures["rounds"][1]
    assert first["attacker_tokens"] > 0 and first["victim_tokens"] > 0
    assert first["floor_s"] > 0 and first["x_floor"] > 1  # nothing beats the bandwidth floor
    assert json.loads(out.read_text()) == figures
    printed = capsys.readouterr().out
    assert "x_floor" in printed and "s/step" in printed and "membership signals" in printed
    # The GPU passes beside the probe: the product's GCG and the membership signals.
    gcg, signals = figures["gcg"], figures["membership"]
    assert gcg["steps"] == 2 and gcg["backward_passes"] == 2 and gcg["seconds_per_step"] > 0
    assert signals["tokens"] == 59 and signals["loss"] > 0  # no BOS: the first token is context
    assert signals["signals_seconds"] > 0 and signals["forward_seconds"] > 0
