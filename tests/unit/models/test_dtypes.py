"""The dtype of each role (memprobe_core.models.dtypes): the auto policy, the CPU's bfloat16
flags and the --dtype flag's grammar."""

from __future__ import annotations

import pytest

from memprobe_core.errors import UsageError
from memprobe_core.models import dtypes

CPU_ROLES = ("victim", "base", "reverse", "reference")


@pytest.mark.parametrize("role", ["attacker", "init"])
def test_auto_samples_in_bfloat16_only_on_a_cpu_that_computes_it(role):
    assert dtypes.role_dtype(role, "auto", "cpu", bf16_cpu=True) == "bfloat16"
    assert dtypes.role_dtype(role, "auto", "cpu", bf16_cpu=False) == "float32"
    assert dtypes.role_dtype(role, None, "cpu", bf16_cpu=True) == "bfloat16"


@pytest.mark.parametrize("role", CPU_ROLES)
def test_auto_keeps_the_measured_roles_float32_on_any_cpu(role):
    for native in (True, False):
        assert dtypes.role_dtype(role, "auto", "cpu", bf16_cpu=native) == "float32"


@pytest.mark.parametrize("role", [*CPU_ROLES, "attacker", "init"])
def test_auto_is_bfloat16_on_cuda_and_an_explicit_dtype_is_kept(role):
    assert dtypes.role_dtype(role, "auto", "cuda:0", bf16_cpu=False) == "bfloat16"
    assert dtypes.role_dtype(role, "float16", "cpu", bf16_cpu=True) == "float16"
    assert dtypes.role_dtype(role, "float32", "cuda", bf16_cpu=True) == "float32"


def test_a_run_from_before_per_role_dtypes_loads_every_role_as_it_did():
    for role in ("victim", "attacker"):
        assert dtypes.role_dtype(role, dtypes.LOADER_DEFAULT, "cpu", bf16_cpu=True) == "float32"
        assert dtypes.role_dtype(role, dtypes.LOADER_DEFAULT, "cuda", bf16_cpu=True) == "bfloat16"


def test_an_unknown_dtype_is_refused_by_name():
    with pytest.raises(UsageError, match="'float8'"):
        dtypes.role_dtype("victim", "float8", "cpu")


@pytest.mark.parametrize(
    ("flags", "native"),
    [
        ("fpu vme avx512f avx512_bf16 amx_tile", True),
        ("fpu amx_bf16 amx_int8", True),
        ("fpu avx2 avx512f avx512_vnni", False),  # avx512 without its bf16 extension
    ],
)
def test_the_cpu_flags_say_whether_bfloat16_is_native(tmp_path, flags, native):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: x\nflags\t\t: {flags}\n\n")
    assert dtypes.cpu_has_bf16(cpuinfo) is native


def test_a_machine_without_cpuinfo_answers_float32(tmp_path):
    assert dtypes.cpu_has_bf16(tmp_path / "missing") is False


def test_dtype_flags_set_every_role_or_one_later_ones_winning():
    roles = ("victim", "attacker", "init")
    assert dtypes.parse_dtype_flags([], roles) == {}
    assert dtypes.parse_dtype_flags(["float32"], roles) == {"*": "float32"}
    assert dtypes.parse_dtype_flags(["attacker=bfloat16, victim=float32", "float16"], roles) == {
        "attacker": "bfloat16",
        "victim": "float32",
        "*": "float16",
    }
    assert dtypes.parse_dtype_flags(["victim=float32", "victim=auto"], roles) == {"victim": "auto"}
    asked = {"attacker": "bfloat16", "*": "float16"}
    assert dtypes.requested_for("attacker", asked) == "bfloat16"
    assert dtypes.requested_for("victim", asked) == "float16"
    assert dtypes.requested_for("victim", {}) == "auto"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("critic=float32", "no role 'critic'"),
        ("victim=float8", "unknown dtype 'float8'"),
        ("fp32", "unknown dtype 'fp32'"),
        ("attacker=", "unknown dtype ''"),
    ],
)
def test_a_bad_dtype_flag_is_refused_naming_it(value, says):
    with pytest.raises(UsageError, match=says):
        dtypes.parse_dtype_flags([value], ("victim", "attacker"))
