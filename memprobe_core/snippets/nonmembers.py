"""The generated non-member corpus: licence- and source-shaped texts no model can have seen.

A labelled audit needs snippets known *not* to be in a model's training data. Texts written
after a model's cut-off are one answer, but memprobe cannot ship them offline and stay sure of it;
instead it makes them by code on the user's machine, at install time, from a fresh random seed:

* ``legal`` — licence-shaped texts: a title, a licensor, numbered sections (grant, conditions,
  fees, liability, termination, notices, governing law …) and schedules, written from memprobe's
  own template sentences (no real licence is copied) with random names, dates, places, amounts
  and reference numbers;
* ``code`` — Python-module-shaped texts: functions with Google-style docstrings whose names,
  arguments, constants and literals are random identifiers and numbers (the text parses as
  Python; it is never run).

Each text ``i`` of a domain is drawn from its own ``random.Random`` seeded with
``(generator version, seed, domain, i)``, so the same seed gives the same texts, and asking for
more texts later extends the set without changing the first ones. The set is written to
``<memprobe home>/nonmembers.json`` with the seed, generator version, creation time and count;
:func:`ensure` builds it (with a fresh seed) when the file is missing.

Caveat (Duan et al. 2024): generated text differs in style from real text, so a signal that
separates members from these non-members may partly detect the distribution shift.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memprobe_core import paths
from memprobe_core.snippets import _nonmember_code, _nonmember_legal
from memprobe_core.snippets.split import NONMEMBER, DataError, Snippet

log = logging.getLogger(__name__)

# The generator's name is part of every text's random seed and of the set file: kept as it was
# first written (the module has moved since), so a seed still gives the same texts.
GENERATOR = "memprobe.membership.nonmembers"
# Bump when a template or word list changes: the same seed then gives other texts.
GENERATOR_VERSION = 1
NONMEMBER_DOMAINS: tuple[str, ...] = ("legal", "code")
DEFAULT_PER_DOMAIN = 100
FILE_NAME = "nonmembers.json"
# Seeds drawn at install time have this many random bits (a seed given by hand may be any int).
SEED_BITS = 64

_MAKERS = {"legal": _nonmember_legal.licence_text, "code": _nonmember_code.module_text}


@dataclass
class NonmemberSet:
    """The generated non-members of one seed.

    Attributes:
        seed: the seed every text was drawn from.
        version: :data:`GENERATOR_VERSION` of the code that made them.
        created: ISO-8601 UTC time the set was built.
        per_domain: texts stored per domain.
        path: the JSON file they were read from or written to (None: in memory only).
        snippets: ``legal`` texts then ``code`` texts, each in generation order.
    """

    seed: int
    version: int
    created: str
    per_domain: int
    path: Path | None = None
    snippets: list[Snippet] = field(default_factory=list)

    def for_domain(self, domain: str, count: int) -> list[Snippet]:
        """The first ``count`` non-members of ``domain``; more than stored are generated.

        Extra texts come from the same seed (index ``per_domain`` on), so they are the texts a
        larger build of this seed would have stored.
        """
        _check_domain(domain)
        stored = [s for s in self.snippets if s.domain == domain][:count]
        if len(stored) < count:
            log.info(
                "non-member set (seed %d) stores %d %s texts; generating %d more from the seed",
                self.seed,
                len(stored),
                domain,
                count - len(stored),
            )
            stored += [
                make_snippet(domain, self.seed, i, self.version) for i in range(len(stored), count)
            ]
        return stored

    def describe(self) -> dict[str, Any]:
        """What a run records about the set (no texts)."""
        return {
            "generator": GENERATOR,
            "version": self.version,
            "seed": self.seed,
            "created": self.created,
            "per_domain": self.per_domain,
            "file": str(self.path) if self.path else None,
        }


def default_path() -> Path:
    """Where the set lives: ``<memprobe home>/nonmembers.json``."""
    return paths.home() / FILE_NAME


def fresh_seed() -> int:
    """A seed from the operating system's randomness (never the same twice in practice)."""
    return secrets.randbits(SEED_BITS)


def _check_domain(domain: str) -> None:
    if domain not in NONMEMBER_DOMAINS:
        raise DataError(
            f"the generated non-member set has no domain {domain!r}; it has "
            f"{list(NONMEMBER_DOMAINS)}"
        )


def generate_text(domain: str, seed: int, index: int, version: int = GENERATOR_VERSION) -> str:
    """Text ``index`` of ``domain`` for ``seed``: the same arguments always give the same text.

    Raises:
        DataError: an unknown domain, or a ``version`` this code cannot make.
    """
    _check_domain(domain)
    if version != GENERATOR_VERSION:
        raise DataError(
            f"non-member generator version {version} is not this code's ({GENERATOR_VERSION}); "
            f"rebuild the set: memprobe corpus nonmembers --build"
        )
    # A string seed is hashed (SHA-512) by random.seed: stable across runs and machines.
    rng = random.Random(f"{GENERATOR}:v{version}:{seed}:{domain}:{index}")
    return _MAKERS[domain](rng)


def make_snippet(domain: str, seed: int, index: int, version: int = GENERATOR_VERSION) -> Snippet:
    """Non-member ``index`` of ``domain`` as a labelled snippet (id from its text's hash)."""
    text = generate_text(domain, seed, index, version)
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]
    return Snippet(
        id=f"nonmember-{domain}:{digest}",
        text=text,
        domain=domain,
        source=f"generated by {GENERATOR} v{version}, seed {seed}, text {index}",
        label=NONMEMBER,
    )


def generate(seed: int, per_domain: int = DEFAULT_PER_DOMAIN) -> NonmemberSet:
    """Generate a set in memory: ``per_domain`` texts for each of :data:`NONMEMBER_DOMAINS`."""
    if per_domain < 1:
        raise DataError(f"per_domain {per_domain}: give 1 or more texts per domain")
    snippets = [
        make_snippet(domain, seed, i) for domain in NONMEMBER_DOMAINS for i in range(per_domain)
    ]
    created = datetime.now(UTC).isoformat(timespec="seconds")
    return NonmemberSet(seed, GENERATOR_VERSION, created, per_domain, None, snippets)


def build(
    path: Path | None = None, *, seed: int | None = None, per_domain: int = DEFAULT_PER_DOMAIN
) -> NonmemberSet:
    """Generate the set and write it (replacing any old file).

    Args:
        path: the JSON file; :func:`default_path` when None.
        seed: reproduce a set; None draws a fresh one (:func:`fresh_seed`).
        per_domain: texts per domain.

    Returns:
        The set written, with its ``path``.
    """
    path = path or default_path()
    chosen = fresh_seed() if seed is None else seed
    made = generate(chosen, per_domain)
    made.path = path
    record = {**made.describe(), "count": len(made.snippets)}
    record.pop("file")
    record["snippets"] = [s.to_dict() for s in made.snippets]
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename: a reader never sees half a file.
    partial = path.with_name(path.name + f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(record, ensure_ascii=False, indent=1), encoding="utf-8")
    partial.replace(path)
    log.info(
        "non-member set: %d texts (seed %d, generator v%d) written to %s",
        len(made.snippets),
        chosen,
        GENERATOR_VERSION,
        path,
    )
    return made


def read(path: Path | None = None) -> NonmemberSet:
    """Read a set written by :func:`build`.

    Raises:
        DataError: the file is missing, unreadable or not a non-member set.
    """
    path = path or default_path()
    fix = f"rebuild it: memprobe corpus nonmembers --build (or delete {path})"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        snippets = [Snippet(**item) for item in record["snippets"]]
        made = NonmemberSet(
            seed=int(record["seed"]),
            version=int(record["version"]),
            created=str(record["created"]),
            per_domain=int(record["per_domain"]),
            path=path,
            snippets=snippets,
        )
    except FileNotFoundError:
        raise DataError(
            f"no non-member set at {path}; build it: memprobe corpus nonmembers --build"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"non-member set {path} is unreadable ({exc}); {fix}") from None
    if record.get("generator") != GENERATOR or any(s.label != NONMEMBER for s in snippets):
        raise DataError(f"{path} is not a memprobe non-member set; {fix}")
    return made


def ensure(path: Path | None = None) -> NonmemberSet:
    """The set on disk, built first (fresh seed, logged) when the file does not exist yet."""
    path = path or default_path()
    if not path.exists():
        log.info("non-member set %s is missing (not built at install time): building it", path)
        return build(path)
    return read(path)
