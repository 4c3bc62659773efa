"""Name lists and (in-train, out-of-train) pairs with the paper's filters; dev/test split.

Pair building (paper §3, pairwise dataset): drop in-train names that also appear in the
out-of-train list and out-of-train names that appear in the in-train list (compared
case-insensitively after collapsing whitespace), de-duplicate, shuffle each list with a seed, keep
as many of each as the shorter list has (matched counts) and zip them into pairs.
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memprobe_core.errors import MemprobeError
from memprobe_core.user_paths import check_readable, read_bytes


class NameListError(MemprobeError, ValueError):
    """A name list could not be read or is unusable; the message says which and why."""


@dataclass(frozen=True)
class NamePair:
    """One pair of the pairwise dataset: a name seen in training and one never seen."""

    name_in: str
    name_out: str


def normalize_name(name: str) -> str:
    """The comparison key of a name: whitespace collapsed, case-folded."""
    return " ".join(name.split()).casefold()


@dataclass(frozen=True)
class NameFile:
    """A name list given as a file's bytes (e.g. an upload), read like a file called ``name``."""

    name: str
    data: bytes


def read_name_list(path: str | Path | NameFile, *, column: str | None = None) -> list[str]:
    """Read names from a text file (one per line, ``#`` comments) or a CSV file.

    Args:
        path: ``.txt`` (or any non-CSV file) or ``.csv``, or a :class:`NameFile` of either.
        column: CSV column holding the names; default ``name`` if present, else the first column.

    Returns:
        Distinct names in file order (whitespace collapsed).

    Raises:
        NameListError: missing file, not UTF-8, unknown column, or no names.
    """
    if isinstance(path, NameFile):
        data, path = path.data, Path(path.name)
    else:
        # A symlink loop, pipe, device, folder or /proc file is refused (docs/security.md).
        path = check_readable(path, "name list", NameListError)
        data = read_bytes(path, "name list", error=NameListError)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise NameListError(
            f"name list {path} is not UTF-8 text ({err}); save it as UTF-8"
        ) from err
    if path.suffix.lower() == ".csv":
        rows = list(csv.reader(io.StringIO(text)))
        if not rows:
            raise NameListError(f"name list {path} is empty")
        header = [h.strip() for h in rows[0]]
        if column is None:
            column = "name" if "name" in header else header[0]
        if column not in header:
            raise NameListError(f"name list {path} has columns {header}; no column {column!r}")
        index = header.index(column)
        raw = [row[index] for row in rows[1:] if len(row) > index]
    else:
        raw = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    names = dedupe(" ".join(r.split()) for r in raw if r.strip())
    if not names:
        raise NameListError(f"name list {path} has no names")
    return names


def dedupe(names: Iterable[str]) -> list[str]:
    """Distinct names (by :func:`normalize_name`), first spelling kept, order kept."""
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        key = normalize_name(name)
        if key and key not in seen:
            seen.add(key)
            out.append(" ".join(name.split()))
    return out


def build_pairs(
    in_names: Sequence[str],
    out_names: Sequence[str],
    *,
    seed: int = 0,
    max_pairs: int | None = None,
    min_words: int = 1,
) -> list[NamePair]:
    """Pair in-train with out-of-train names using the paper's filters.

    Args:
        in_names: names from the model's training data.
        out_names: names believed absent from it.
        seed: seeds the shuffle of each list.
        max_pairs: keep at most this many pairs.
        min_words: drop names with fewer words (e.g. 2 keeps only "First Last" names).

    Returns:
        Pairs; the two lists are disjoint and of matched size.

    Raises:
        NameListError: no pair can be formed after filtering.
    """
    out_keys = {normalize_name(n) for n in out_names}
    in_keys = {normalize_name(n) for n in in_names}
    kept_in = [n for n in dedupe(in_names) if normalize_name(n) not in out_keys]
    kept_out = [n for n in dedupe(out_names) if normalize_name(n) not in in_keys]
    kept_in = [n for n in kept_in if len(n.split()) >= min_words]
    kept_out = [n for n in kept_out if len(n.split()) >= min_words]
    rng = random.Random(seed)
    rng.shuffle(kept_in)
    rng.shuffle(kept_out)
    count = min(len(kept_in), len(kept_out))
    if max_pairs is not None:
        count = min(count, max_pairs)
    if count == 0:
        raise NameListError(
            f"no name pairs: {len(kept_in)} in-train and {len(kept_out)} out-of-train names left "
            f"after removing overlaps and names under {min_words} words"
        )
    return [NamePair(a, b) for a, b in zip(kept_in[:count], kept_out[:count])]


def split_pairs(
    pairs: Sequence[NamePair], *, dev_fraction: float = 0.5, seed: int = 0
) -> tuple[list[NamePair], list[NamePair]]:
    """Split pairs into dev and test sets (seeded shuffle; both non-empty when ≥ 2 pairs).

    Raises:
        ValueError: ``dev_fraction`` outside (0, 1) or fewer than 2 pairs.
    """
    if not 0 < dev_fraction < 1:
        raise ValueError(f"dev_fraction={dev_fraction} must be between 0 and 1")
    if len(pairs) < 2:
        raise ValueError(f"need at least 2 pairs to split into dev and test, got {len(pairs)}")
    order = list(pairs)
    random.Random(seed).shuffle(order)
    cut = min(max(1, round(len(order) * dev_fraction)), len(order) - 1)
    return order[:cut], order[cut:]
