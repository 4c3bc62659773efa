"""A run's models by name and dtype (memprobe_core.runs.roles): ``resolved`` makes every role's
dtype concrete, a resumed run keeps what it recorded, one model in two dtypes loads twice."""

from __future__ import annotations

import pytest

from memprobe_core.models import dtypes
from memprobe_core.runs import roles
from memprobe_core.runs.roles import ModelNames, load_models


@pytest.fixture
def cpu_with_bf16(monkeypatch):
    monkeypatch.setattr(dtypes, "default_device", lambda: "cpu")
    monkeypatch.setattr(dtypes, "cpu_has_bf16", lambda: True)


def test_auto_resolves_each_role_with_weights_and_records_it(cpu_with_bf16):
    names = ModelNames(victim="gemma-3-270m", reference="fake").resolved()
    assert names.dtypes == {
        "victim": "float32",
        "base": "float32",
        "attacker": "bfloat16",
        "init": "bfloat16",
        "reverse": "float32",
    }  # the fake reference has no weights to type
    assert names.resolved() == names  # resolving again changes nothing
    again = ModelNames.from_dict(names.to_dict())
    assert again.resolved().dtypes == names.dtypes


def test_an_endpoint_model_gets_no_dtype(cpu_with_bf16):
    names = ModelNames(attacker="openai:gpt-4o-mini").resolved()
    assert "attacker" not in names.dtypes and "init" not in names.dtypes
    assert names.dtypes["victim"] == "float32"


def test_asked_dtypes_win_and_the_init_model_follows_the_attacker(cpu_with_bf16):
    names = ModelNames(dtypes={"attacker": "float32", "*": "float16"}).resolved()
    assert names.dtypes["attacker"] == names.dtypes["init"] == "float32"
    assert names.dtypes["victim"] == "float16"
    own_init = ModelNames(init="gemma-3-270m", dtypes={"attacker": "float32"}).resolved()
    assert own_init.dtypes["init"] == "bfloat16"  # a model of its own: its own auto


def test_a_dtype_in_the_load_options_is_every_roles_as_before(cpu_with_bf16):
    names = ModelNames(load_options={"dtype": "float16", "device": "cpu"}).resolved()
    assert set(names.dtypes.values()) == {"float16"}
    assert "dtype" not in names.load_options


def test_a_run_recorded_before_per_role_dtypes_resumes_as_it_ran(cpu_with_bf16):
    old = ModelNames(victim="gemma-3-270m").resolved().to_dict()
    del old["dtypes"]
    assert set(ModelNames.from_dict(old).resolved().dtypes.values()) == {"float32"}
    old["load_options"] = {"dtype": "bfloat16"}
    assert set(ModelNames.from_dict(old).resolved().dtypes.values()) == {"bfloat16"}


def test_one_model_in_two_dtypes_loads_twice_and_in_one_dtype_once(cpu_with_bf16, monkeypatch):
    loaded = []

    def load(name, *, backend=None, **options):
        loaded.append((name, options.get("dtype")))
        return object()

    monkeypatch.setattr(roles.model_backends, "load", load)
    monkeypatch.setattr(
        roles, "roles_needed", lambda methods, reference: ["victim", "attacker", "init", "base"]
    )
    monkeypatch.setattr(roles.ModelSet, "from_roles", staticmethod(lambda models: models))
    same = "smollm2-135m-instruct"
    models = load_models(ModelNames(victim=same, base=same, attacker=same), ["x"])
    assert sorted(loaded) == [(same, "bfloat16"), (same, "float32")]
    assert models["attacker"] is models["init"] and models["victim"] is models["base"]
    assert models["attacker"] is not models["victim"]
