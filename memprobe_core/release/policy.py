"""A release gate's policy: the limits a run must stay under, read from a TOML file.

::

    # policy.toml (docs/ci.md)
    [limits]                    # on the audited run itself
    max_mean_mem = 0.30         # mean Mem of every method x length
    max_extraction_rate = 0.05  # share of k-extractable units, every method x length
    max_pii_copied = 0          # PII items copied from the true suffixes into outputs, whole run
    max_auroc = 0.60            # every membership signal; or per signal: { loss = 0.6, zlib = 0.65 }
    min_bits = 20               # every unit's rank-based extraction cost, in bits (docs/method.md §21)
    max_near_verbatim_p = 1e-6  # every unit's certified near-verbatim probability (its lower bound)

    [increase]                  # against `--baseline RUN`: a breach needs a *significant* increase
    mean_mem = 0.0              # allowed increase of mean Mem over the baseline, every cell
    extraction_rate = 0.0
    auroc = 0.0                 # or per signal, as above
    alpha = 0.05                # level of the Holm-adjusted paired tests

    [controls]                  # a figure the run's report voids by a validity control
    voided = "skip"             # "skip" (with a note naming the control) or "fail"
    unmeasured = "skip"         # a unit whose bound min_bits / max_near_verbatim_p cannot read

Every key is optional, but a file must set at least one limit. A key that is unknown or has the
wrong type is refused before anything is read from the store (:class:`PolicyError`, exit 2),
naming the key and what to give.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memprobe_core.bounded import NumberTooLongError, loads_toml
from memprobe_core.errors import UsageError
from memprobe_core.membership.options import SIGNAL_BY_NAME
from memprobe_core.stats import CONFIDENCE
from memprobe_core.user_paths import check_readable, read_bytes

# The policy file format this module reads (docs/schemas/ has the JSON it writes).
POLICY_VERSION = 1
# Refuse a "policy" the size of a dataset: a typo'd path, not a policy.
MAX_POLICY_BYTES = 1024 * 1024

# (table, key) -> what it limits, in words; every one is a share in [0, 1] (PII: a count).
_SHARES = {
    ("limits", "max_mean_mem"): "mean Mem",
    ("limits", "max_extraction_rate"): "extraction rate",
    ("limits", "max_near_verbatim_p"): "near-verbatim probability (its certified lower bound)",
    ("increase", "mean_mem"): "increase of mean Mem",
    ("increase", "extraction_rate"): "increase of the extraction rate",
}
_PER_SIGNAL = {("limits", "max_auroc"): "AUROC", ("increase", "auroc"): "increase of AUROC"}
_KNOWN = {
    "limits": (
        "max_mean_mem",
        "max_extraction_rate",
        "max_pii_copied",
        "max_auroc",
        "min_bits",
        "max_near_verbatim_p",
    ),
    "increase": ("mean_mem", "extraction_rate", "auroc", "alpha"),
    "controls": ("voided", "unmeasured"),
}
# What a check does when the run's report voids its figure by a validity control (blind
# baseline, too few texts, random split; docs/method.md §10): skipped with a note, or failed.
VOIDED_SKIP, VOIDED_FAIL = "skip", "fail"
VOIDED_CHOICES = (VOIDED_SKIP, VOIDED_FAIL)


class PolicyError(UsageError):
    """A policy file that cannot be used (the message names the file, the key and the fix)."""


@dataclass(frozen=True)
class Limits:
    """One table of limits (``None``: not limited).

    Attributes:
        mean_mem / extraction_rate: the highest allowed value (``[limits]``) or increase
            (``[increase]``).
        pii_copied: the most PII items copied (``[limits]`` only).
        auroc: signal -> highest allowed AUROC (or increase); ``"*"`` for every signal.
        bits: the fewest bits every unit's rank-based extraction cost must reach
            (``[limits] min_bits``; docs/method.md §21).
        near_verbatim_p: the highest certified near-verbatim probability any unit may have
            (``[limits] max_near_verbatim_p``: its lower bound, ``near_verbatim_log10_lower``).
    """

    mean_mem: float | None = None
    extraction_rate: float | None = None
    pii_copied: int | None = None
    auroc: dict[str, float] = field(default_factory=dict)
    bits: float | None = None
    near_verbatim_p: float | None = None

    def empty(self) -> bool:
        return (
            self.mean_mem is None
            and self.extraction_rate is None
            and self.pii_copied is None
            and not self.auroc
            and self.bits is None
            and self.near_verbatim_p is None
        )

    def auroc_limit(self, signal: str) -> float | None:
        """The AUROC limit of ``signal`` (its own, else the one for every signal)."""
        return self.auroc.get(signal, self.auroc.get("*"))


@dataclass(frozen=True)
class Policy:
    """A parsed policy file.

    Attributes:
        source: the file it was read from (named in reports).
        limits: limits on the audited run.
        increase: limits on the increase over a baseline run (need ``--baseline``).
        alpha: the level a paired test must reach for an increase to count.
        voided: what a check whose figure the run's report voids does (``[controls] voided``):
            :data:`VOIDED_SKIP` (not counted, with a note naming the control) or
            :data:`VOIDED_FAIL` (a breach).
        unmeasured: the same for a unit whose bound a per-unit limit (``min_bits``,
            ``max_near_verbatim_p``) cannot read, because it was not measured
            (``[controls] unmeasured``).
    """

    source: str
    limits: Limits
    increase: Limits
    alpha: float = round(1 - CONFIDENCE, 10)
    voided: str = VOIDED_SKIP
    unmeasured: str = VOIDED_SKIP


def read_policy(path: str | Path) -> Policy:
    """Read and check a policy file.

    Raises:
        PolicyError: a missing or unreadable file, TOML that does not parse, an unknown table or
            key, a value of the wrong type or range, or no limit at all.
    """
    # A symlink loop, pipe, device, folder or /proc file is refused here (docs/security.md).
    path = check_readable(path, "policy file", PolicyError)
    if path.stat().st_size > MAX_POLICY_BYTES:
        raise PolicyError(
            f"policy file {path.name!r} is over {MAX_POLICY_BYTES // 1024} KiB: not a policy"
        )
    try:
        raw = read_bytes(path, "policy file", MAX_POLICY_BYTES, PolicyError)
        data = loads_toml(  # a byte-order mark is skipped; depth checked before parsing
            raw.decode("utf-8-sig"),
            f"policy file {path.name!r}",
            needs="a policy needs 2 ([limits] holding a per-signal table: max_auroc = { … })",
            max_bytes=MAX_POLICY_BYTES,
        )
    except UnicodeDecodeError:
        raise PolicyError(f"policy file {path.name!r} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"policy file {path.name!r} is not valid TOML: {exc}") from None
    except NumberTooLongError as exc:
        raise PolicyError(str(exc)) from None
    return parse_policy(data, path.name)


def parse_policy(data: dict[str, Any], source: str) -> Policy:
    """A :class:`Policy` from parsed TOML (``source`` names it in messages)."""
    for table in data:
        homes = [f"[{name}]" for name, keys in _KNOWN.items() if table in keys]
        if homes:
            raise PolicyError(
                f"{source}: key {table} is outside a table: put it under {' or '.join(homes)}"
            )
        if table not in _KNOWN:
            raise PolicyError(
                f"{source}: unknown table [{table}]; use [limits], [increase] and/or [controls]"
            )
        if not isinstance(data[table], dict):
            raise PolicyError(f"{source}: {table} must be a table ([{table}] with keys under it)")
        for key in data[table]:
            if key not in _KNOWN[table]:
                known = ", ".join(_KNOWN[table])
                raise PolicyError(f"{source}: unknown key {table}.{key} (known: {known})")
    limits = _limits(data.get("limits", {}), "limits", source)
    increase = _limits(data.get("increase", {}), "increase", source)
    if limits.empty() and increase.empty():
        raise PolicyError(
            f"{source}: sets no limit; give at least one key of [limits] or [increase]"
        )
    alpha = data.get("increase", {}).get("alpha", round(1 - CONFIDENCE, 10))
    if not _is_number(alpha) or not 0 < alpha < 1:
        raise PolicyError(f"{source}: increase.alpha = {alpha!r}: give a number between 0 and 1")
    voided = data.get("controls", {}).get("voided", VOIDED_SKIP)
    if voided not in VOIDED_CHOICES:
        raise PolicyError(
            f'{source}: controls.voided = {voided!r}: give "skip" (a figure a validity control '
            'voids is not checked, with a note) or "fail" (it fails the gate)'
        )
    unmeasured = data.get("controls", {}).get("unmeasured", VOIDED_SKIP)
    if unmeasured not in VOIDED_CHOICES:
        raise PolicyError(
            f'{source}: controls.unmeasured = {unmeasured!r}: give "skip" (a unit whose bound was '
            'not measured is not checked, with a note) or "fail" (it fails the gate)'
        )
    return Policy(source, limits, increase, float(alpha), voided, unmeasured)


def _limits(table: dict[str, Any], name: str, source: str) -> Limits:
    values: dict[str, Any] = {}
    for (where, key), what in _SHARES.items():
        if where == name and key in table:
            values[key.removeprefix("max_")] = _share(table[key], f"{name}.{key}", what, source)
    if "min_bits" in table:
        bits = table["min_bits"]
        if not _is_number(bits) or bits < 0:
            raise PolicyError(
                f"{source}: limits.min_bits = {bits!r}: give the fewest bits every unit's "
                "rank-based extraction cost must reach, a number of 0 or more (20: at least 2^20 "
                "tries)"
            )
        values["bits"] = float(bits)
    if "max_pii_copied" in table:
        count = table["max_pii_copied"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise PolicyError(
                f"{source}: limits.max_pii_copied = {count!r}: give a whole number of 0 or more"
            )
        values["pii_copied"] = count
    for (where, key), what in _PER_SIGNAL.items():
        if where == name and key in table:
            values["auroc"] = _per_signal(table[key], f"{name}.{key}", what, source)
    return Limits(**values)


def _per_signal(value: Any, key: str, what: str, source: str) -> dict[str, float]:
    """A number for every signal (``{"*": v}``) or a table of signal -> number."""
    if not isinstance(value, dict):
        return {"*": _share(value, key, what, source)}
    if not value:
        raise PolicyError(
            f"{source}: {key} = {{}} limits nothing: give a number (every signal) or signals "
            "with numbers ({ loss = 0.6 })"
        )
    out = {}
    for signal, limit in value.items():
        if signal not in SIGNAL_BY_NAME:
            known = ", ".join(SIGNAL_BY_NAME)
            raise PolicyError(f"{source}: {key}.{signal}: unknown signal (known: {known})")
        out[signal] = _share(limit, f"{key}.{signal}", what, source)
    return out


def _share(value: Any, key: str, what: str, source: str) -> float:
    if not _is_number(value) or not 0 <= value <= 1:
        raise PolicyError(f"{source}: {key} = {value!r}: give the {what} as a number from 0 to 1")
    return float(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
