"""Which dtype each model role runs in (docs/models.md, "Precision per role").

``auto`` (the default of every role) is resolved once, when a run is created, and the concrete
dtype is what the run records: a resume, a Ray worker or a report reads it back and never
resolves again, so a run keeps its dtypes on any machine.

- On CUDA every role runs in bfloat16 (as memprobe always has).
- On a CPU, the roles that *sample* (the attacker and the init model) run in bfloat16 where the
  CPU computes it natively (AMX or AVX512-BF16 in its flags: measured 1.4-1.6x faster sampling
  on the embedded models), else float32. Their prompts are inputs to the measurement, and
  sampled ones differ between dtypes anyway.
- Every other role (victim, base, reverse, reference) stays float32 on a CPU: the victim's
  greedy answers and the membership signals *are* the measured quantities, so a faster dtype
  for them is opt-in (``--dtype victim=bfloat16``) and the report says outputs may then differ
  from float32.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

from memprobe_core.errors import UsageError

AUTO = "auto"
DTYPES = ("bfloat16", "float16", "float32")
CHOICES = (AUTO, *DTYPES)
# The roles whose outputs are sampled, not measured: bfloat16 under auto on a capable CPU.
SAMPLING_ROLES = frozenset({"attacker", "init"})
# A flag that names no role sets every role.
EVERY_ROLE = "*"
# Never asked for: what runs recorded before per-role dtypes read back as (every role as the
# loader then chose it: bfloat16 on CUDA, float32 on a CPU).
LOADER_DEFAULT = "default"
# CPU flags (Linux /proc/cpuinfo) of native bfloat16 matrix arithmetic.
BF16_CPU_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
CPUINFO = Path("/proc/cpuinfo")


@functools.cache
def cpu_has_bf16(cpuinfo: Path = CPUINFO) -> bool:
    """Whether this CPU computes bfloat16 natively (AMX or AVX512-BF16 in its flags).

    Why /proc/cpuinfo and not torch: torch runs bfloat16 on any CPU, emulated where the flags
    are missing (then slower than float32), and offers no public query of the ISA. A machine
    without the file (macOS, Windows) answers False: float32, the safe choice.
    """
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return bool(BF16_CPU_FLAGS & set(line.partition(":")[2].split()))
    return False


def role_dtype(
    role: str, requested: str | None, device: str, *, bf16_cpu: bool | None = None
) -> str:
    """The concrete dtype of ``role`` on ``device`` for a ``requested`` dtype (``auto`` or
    ``None``: the policy of this module's docstring; ``bf16_cpu``: the CPU's answer, else
    :func:`cpu_has_bf16`)."""
    if requested == LOADER_DEFAULT:
        return "bfloat16" if device.startswith("cuda") else "float32"
    if requested not in (None, AUTO):
        if requested not in DTYPES:
            raise UsageError(f"dtype {requested!r} is unknown; use one of {', '.join(CHOICES)}")
        return requested
    if device.startswith("cuda"):
        return "bfloat16"
    native = cpu_has_bf16() if bf16_cpu is None else bf16_cpu
    return "bfloat16" if role in SAMPLING_ROLES and native else "float32"


def default_device() -> str:
    """Where a model loads when no device is given (the hf backend's rule: CUDA when visible)."""
    from memprobe_core.models.devices import pick_device

    return pick_device(None)


def resolve(role: str, requested: str | None, device: str | None = None) -> str:
    """The concrete dtype of ``role`` asked as ``requested`` on ``device`` (``None``: where the
    model will load, :func:`default_device`): the one rule runs and the dashboard share."""
    return role_dtype(role, requested, device or default_device())


def parse_dtype_flags(values: Iterable[str], roles: Iterable[str]) -> dict[str, str]:
    """``--dtype`` values (each ``DTYPE`` for every role, or ``ROLE=DTYPE``; several may be
    comma-separated) as ``{role or "*": dtype}``; a later value wins.

    Raises:
        UsageError: an unknown dtype or a role the command does not have, named.
    """
    known = tuple(roles)
    out: dict[str, str] = {}
    for value in values:
        for item in value.split(","):
            role, _, dtype = item.strip().rpartition("=")
            role, dtype = role.strip() or EVERY_ROLE, dtype.strip()
            if role != EVERY_ROLE and role not in known:
                raise UsageError(
                    f"--dtype {item.strip()!r}: this command has no role {role!r}; its roles are "
                    f"{', '.join(known)}"
                )
            if dtype not in CHOICES:
                raise UsageError(
                    f"--dtype {item.strip()!r}: unknown dtype {dtype!r}; use one of "
                    f"{', '.join(CHOICES)}"
                )
            out[role] = dtype
    return out


def requested_for(role: str, dtypes: Mapping[str, str | None]) -> str | None:
    """What ``dtypes`` (``{role or "*": dtype}``) asks for ``role``."""
    return dtypes.get(role, dtypes.get(EVERY_ROLE, AUTO))
