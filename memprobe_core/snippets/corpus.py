"""The built-in demo corpus: public text that real models have seen, found on any machine.

Nothing is downloaded and nothing is shipped: the corpus is assembled at run time from

* ``legal`` — licence texts installed packages ship in their metadata (``LICENSE``, ``COPYING``
  … in ``*.dist-info``, long ``License`` metadata fields) and the Python licence next to the
  standard library. Apache-2.0, MIT, BSD and the PSF licence are copied across the web and
  repositories thousands of times, so language models tend to have memorised them;
* ``code`` — the source of a fixed, sorted selection of well-known standard-library modules
  (the code after the module docstring);
* ``docs`` — those modules' docstrings.

Texts are de-duplicated on a normalised form (:func:`normalize_text`; the same licence ships with
dozens of packages: one snippet is kept and ``source`` lists every package), cut to one bounded
snippet each (:func:`first_chunk`) and ordered by id so the corpus and its ids are the same on
every call and on every machine with the same packages.

These texts are the *members* of a labelled audit. ``demo_corpus(nonmembers=True)`` labels them
``member`` and adds, per domain, as many texts of the generated non-member set
(:mod:`memprobe_core.snippets.nonmembers`, domains ``legal`` and ``code``) labelled
``nonmember``.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import inspect
import io
import json
import logging
import re
import sysconfig
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memprobe_core.snippets import nonmembers as generated
from memprobe_core.snippets.split import MEMBER, DataError, Snippet

log = logging.getLogger(__name__)

DOMAINS: tuple[str, ...] = ("legal", "code", "docs")

# A text up to this many characters is kept whole; longer ones are cut (see first_chunk).
WHOLE_TEXT_CHARS = 6000
# A cut snippet holds at least this many whitespace words: 500-token splits then work with most
# tokenizers (English prose is ~1.3 tokens per word, code more).
TARGET_WORDS = 650
# Never let a cut snippet grow past this, even if no paragraph boundary comes sooner.
MAX_CHUNK_CHARS = 12000
# Texts shorter than this are not worth a snippet (a 200-token split needs ~150 words).
MIN_WORDS = 150
# A ``License`` metadata field is taken as a licence text only when it is this long (most are
# an SPDX name such as "MIT").
LICENSE_FIELD_MIN_WORDS = 100

# Well-known modules present from Python 3.10 to 3.14 (a missing one is skipped). Package
# modules are named by their dotted name and read from ``<pkg>/__init__.py``.
STDLIB_MODULES: tuple[str, ...] = (
    "__future__",
    "_threading_local",
    "argparse",
    "ast",
    "base64",
    "bisect",
    "calendar",
    "cmd",
    "codeop",
    "configparser",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "difflib",
    "doctest",
    "email.message",
    "enum",
    "fileinput",
    "fnmatch",
    "fractions",
    "ftplib",
    "functools",
    "getopt",
    "gettext",
    "glob",
    "heapq",
    "hmac",
    "http.client",
    "http.server",
    "imaplib",
    "inspect",
    "io",
    "ipaddress",
    "json",
    "logging",
    "mailbox",
    "netrc",
    "numbers",
    "operator",
    "optparse",
    "os",
    "pdb",
    "pickle",
    "plistlib",
    "poplib",
    "pprint",
    "pyclbr",
    "queue",
    "random",
    "re",
    "rlcompleter",
    "sched",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "site",
    "smtplib",
    "socket",
    "socketserver",
    "statistics",
    "string",
    "subprocess",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "timeit",
    "tokenize",
    "trace",
    "traceback",
    "typing",
    "unittest",
    "unittest.case",
    "urllib.parse",
    "uuid",
    "warnings",
    "weakref",
    "zipapp",
    "zipfile",
)

_LICENSE_NAME = re.compile(r"^(licen[cs]e|copying)([.\-_].*)?$", re.IGNORECASE)
_COPYRIGHT_LINE = re.compile(r"^\s*(copyright\b|\(c\)|©).*$", re.IGNORECASE | re.MULTILINE)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")

# (marker phrases that must all appear, kind) — first match wins; the kind names the snippet id.
_LICENSE_KINDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("apache license", "version 2.0"), "apache-2.0"),
    (("gnu lesser general public license",), "lgpl"),
    (("gnu affero general public license",), "agpl"),
    (("gnu general public license",), "gpl"),
    (("mozilla public license",), "mpl-2.0"),
    (("python software foundation license",), "psf"),
    (("redistribution and use in source and binary forms", "neither the name"), "bsd-3-clause"),
    (("redistribution and use in source and binary forms",), "bsd-2-clause"),
    (("permission is hereby granted, free of charge",), "mit"),
    (("permission to use, copy, modify, and",), "isc"),
    (("free and unencumbered software",), "unlicense"),
)


def normalize_text(text: str) -> str:
    """The form texts are de-duplicated on: no copyright lines, one-space whitespace, lowercase.

    Dropping copyright lines makes the same licence from two authors one text (the body is what a
    model memorises; ``source`` still lists every package).
    """
    return " ".join(_COPYRIGHT_LINE.sub(" ", text).split()).lower()


def license_kind(text: str) -> str:
    """A short name for a licence text: ``apache-2.0``, ``mit``, ``bsd-3-clause``, ``other`` …"""
    lowered = " ".join(text.lower().split())
    for markers, kind in _LICENSE_KINDS:
        if all(marker in lowered for marker in markers):
            return kind
    return "other"


def first_chunk(text: str) -> str:
    """One bounded snippet from a text: the whole text if short, else its first chunk.

    A text of at most :data:`WHOLE_TEXT_CHARS` characters is kept whole. A longer one is cut at
    the first paragraph break after :data:`TARGET_WORDS` words; if none comes before
    :data:`MAX_CHUNK_CHARS` characters, at the first line break, and failing that after the word.
    """
    text = text.strip("\n")
    if len(text) <= WHOLE_TEXT_CHARS:
        return text
    words = re.finditer(r"\S+", text)
    end = None
    for count, match in enumerate(words, start=1):
        if count == TARGET_WORDS:
            end = match.end()
            break
    if end is None:  # long but few words (e.g. wide tables): keep it if it fits
        return text if len(text) <= MAX_CHUNK_CHARS else text[:MAX_CHUNK_CHARS].rsplit("\n", 1)[0]
    para = _PARAGRAPH_BREAK.search(text, end)
    if para and para.start() <= MAX_CHUNK_CHARS:
        return text[: para.start()].rstrip()
    line = text.find("\n", end)
    if 0 <= line <= MAX_CHUNK_CHARS:
        return text[:line].rstrip()
    return text[:end]


def _hash8(text: str) -> str:
    return hashlib.sha1(normalize_text(text).encode("utf-8")).hexdigest()[:8]


@dataclass
class _Found:
    """A candidate text and every place it was found (for de-duplication)."""

    text: str
    origins: list[str] = field(default_factory=list)


# --- legal: licence texts ---------------------------------------------------------------------


def _metadata_dir_files(dist: importlib.metadata.Distribution) -> list[tuple[str, str]]:
    """``(relative name, text)`` of the licence files in a distribution's metadata folder."""
    found: list[tuple[str, str]] = []
    # Fast path: list the .dist-info folder. ``Distribution.files`` parses the whole RECORD
    # (tens of thousands of lines for torch), ~10x slower; it is the fallback below.
    meta_dir = getattr(dist, "_path", None)
    if isinstance(meta_dir, Path) and meta_dir.is_dir():
        candidates = [p for p in meta_dir.iterdir() if p.is_file()]
        for sub in ("licenses", "license_files"):
            if (meta_dir / sub).is_dir():
                candidates += [p for p in (meta_dir / sub).iterdir() if p.is_file()]
        for path in sorted(candidates):
            if _LICENSE_NAME.match(path.name):
                try:
                    found.append((path.relative_to(meta_dir).as_posix(), path.read_text("utf-8")))
                except (OSError, UnicodeDecodeError) as exc:
                    log.debug("skipping licence file %s: %s", path, exc)
        return found
    for package_path in dist.files or ():
        parts = package_path.parts
        in_meta = parts and parts[0].endswith(".dist-info")
        shallow = len(parts) == 2 or (len(parts) == 3 and parts[1] in ("licenses", "license_files"))
        if in_meta and shallow and _LICENSE_NAME.match(parts[-1]):
            try:
                found.append(("/".join(parts[1:]), package_path.read_text("utf-8")))
            except (OSError, UnicodeDecodeError) as exc:
                log.debug("skipping licence file %s: %s", package_path, exc)
    return found


def _licence_texts() -> list[_Found]:
    """Every licence text on this machine, one entry per distinct normalised text."""
    by_norm: dict[str, _Found] = {}

    def add(text: str, origin: str) -> None:
        chunk = first_chunk(text)
        if len(chunk.split()) < MIN_WORDS:
            return
        key = normalize_text(chunk)
        by_norm.setdefault(key, _Found(chunk)).origins.append(origin)

    seen: set[str] = set()
    dists = []
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").strip()
        canonical = re.sub(r"[-_.]+", "-", name).lower()
        if canonical and canonical not in seen:  # a package shadowed later on sys.path is skipped
            seen.add(canonical)
            dists.append((canonical, name, dist))
    for _, name, dist in sorted(dists, key=lambda item: item[0]):
        for rel, text in _metadata_dir_files(dist):
            add(text, f"{name} ({rel})")
        field_text = dist.metadata["License"] or ""
        if len(field_text.split()) >= LICENSE_FIELD_MIN_WORDS:
            add(field_text, f"{name} (License metadata field)")
    python_licence = Path(sysconfig.get_paths()["stdlib"]) / "LICENSE.txt"
    if python_licence.is_file():
        text = python_licence.read_text("utf-8", errors="replace")
        add(text, "Python standard library (LICENSE.txt)")
    return list(by_norm.values())


def _legal_snippets() -> list[Snippet]:
    snippets = []
    for found in _licence_texts():
        kind = license_kind(found.text)
        snippets.append(
            Snippet(
                id=f"legal:{kind}-{_hash8(found.text)}",
                text=found.text,
                domain="legal",
                source="licence text shipped by: " + "; ".join(found.origins),
            )
        )
    return snippets


# --- code and docs: the standard library ------------------------------------------------------


def _module_file(stdlib: Path, module: str) -> Path | None:
    base = stdlib.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def split_docstring(source: str) -> tuple[str, str]:
    """``(module docstring, code after it)`` of a Python source; ``("", source)`` if none.

    Reads only the first tokens (no ``ast.parse`` of the whole file: ~50x faster on big modules).
    """
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING}
    try:
        for tok in tokens:
            if tok.type in skip:
                continue
            if tok.type != tokenize.STRING or tok.string.lstrip("rRbBuU")[:1] not in "'\"":
                return "", source
            doc = ast.literal_eval(tok.string)
            if not isinstance(doc, str):
                return "", source
            code = "".join(source.splitlines(keepends=True)[tok.end[0] :])
            return inspect.cleandoc(doc), code.lstrip("\n")
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return "", source


def _stdlib_snippets() -> list[Snippet]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    snippets = []
    for module in STDLIB_MODULES:
        path = _module_file(stdlib, module)
        if path is None:
            log.debug("demo corpus: standard-library module %s not found under %s", module, stdlib)
            continue
        try:
            source = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            log.debug("demo corpus: cannot read %s: %s", path, exc)
            continue
        doc, code = split_docstring(source)
        version = sysconfig.get_python_version()
        where = f"Python {version} standard library: {path.relative_to(stdlib).as_posix()}"
        for domain, text in (("code", code), ("docs", doc)):
            chunk = first_chunk(text)
            if len(chunk.split()) >= MIN_WORDS:
                snippet_id = f"{domain}:{module}"
                snippets.append(Snippet(snippet_id, chunk, domain=domain, source=where))
    return snippets


# --- public API -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _all_snippets() -> tuple[Snippet, ...]:
    snippets = _legal_snippets() + _stdlib_snippets()
    # A text found under two domains (unlikely) is kept once, in the first domain.
    unique: dict[str, Snippet] = {}
    for snippet in sorted(snippets, key=lambda s: (DOMAINS.index(s.domain), s.id)):
        unique.setdefault(normalize_text(snippet.text), snippet)
    result = tuple(unique.values())
    log.debug("demo corpus: %d snippets", len(result))
    return result


@functools.lru_cache(maxsize=64)
def _selected(
    domains: tuple[str, ...], limit_per_domain: int | None, min_words: int | None
) -> tuple[Snippet, ...]:
    counts: dict[str, int] = {}
    out = []
    for snippet in _all_snippets():
        if snippet.domain not in domains:
            continue
        if min_words is not None and len(snippet.text.split()) < min_words:
            continue
        if limit_per_domain is not None and counts.get(snippet.domain, 0) >= limit_per_domain:
            continue
        counts[snippet.domain] = counts.get(snippet.domain, 0) + 1
        out.append(snippet)
    return tuple(out)


def demo_corpus(
    *,
    domains: Iterable[str] | None = None,
    limit_per_domain: int | None = None,
    min_words: int | None = None,
    nonmembers: bool = False,
    nonmember_path: Path | None = None,
) -> list[Snippet]:
    """The built-in demo corpus (see the module docstring), ordered by domain then id.

    Args:
        domains: any of ``legal``, ``code``, ``docs`` (one name or several); all when None
            (with ``nonmembers``: ``legal`` and ``code``, the domains non-members exist for).
        limit_per_domain: keep at most this many snippets per domain (the first by id).
        min_words: keep only snippets of at least this many whitespace words (e.g. 600 so that
            500-token splits work with most tokenizers); every snippet has at least
            :data:`MIN_WORDS`.
        nonmembers: a labelled selection: members get ``label="member"`` and each domain gets
            as many generated non-members (``label="nonmember"``) as it has members;
            ``limit_per_domain`` then counts the members. Member and non-member alternate
            within a domain, so the first N snippets of the list stay balanced. The set is read
            from ``nonmember_path`` and built there first (fresh seed) if it does not exist.
            Without it every label stays None, as before.
        nonmember_path: the non-member set's file (default: ``<memprobe home>/nonmembers.json``).

    Returns:
        A new list (the snippets are frozen and shared between calls).

    Raises:
        DataError: an unknown domain, a negative limit, a domain the non-member set does not
            have (``docs``) with ``nonmembers``, or an unreadable non-member file.
    """
    if isinstance(domains, str):  # one domain given as a string, not its characters
        domains = [domains]
    if domains is None:
        domains = generated.NONMEMBER_DOMAINS if nonmembers else DOMAINS
    wanted = tuple(sorted(set(domains), key=_domain_order))
    if limit_per_domain is not None and limit_per_domain < 0:
        raise DataError(f"limit_per_domain {limit_per_domain} is negative; pass 0 or more")
    members = list(_selected(wanted, limit_per_domain, min_words))
    if not nonmembers:
        return members
    missing = [d for d in wanted if d not in generated.NONMEMBER_DOMAINS]
    if missing:
        raise DataError(
            f"the generated non-member set has no {missing} texts, so a labelled selection "
            f"cannot cover them; choose domains from {list(generated.NONMEMBER_DOMAINS)}"
        )
    return _labelled(members, wanted, generated.ensure(nonmember_path))


def _labelled(
    members: list[Snippet], domains: tuple[str, ...], made: generated.NonmemberSet
) -> list[Snippet]:
    """Members labelled, each followed by one generated non-member of its domain."""
    out: list[Snippet] = []
    for domain in domains:
        mine = [replace(s, label=MEMBER) for s in members if s.domain == domain]
        others = made.for_domain(domain, len(mine))
        for member, other in zip(mine, others):
            out += [member, other]
    return out


def demo_split(
    *,
    domains: Iterable[str] | None = None,
    limit_per_domain: int | None = None,
    nonmember_path: Path | None = None,
) -> tuple[list[Snippet], list[Snippet]]:
    """The built-in demo split for dataset inference: ``(members, non-members)``.

    The members are demo-corpus snippets (texts real models have seen), the non-members as many
    texts of the generated non-member set per domain (texts no model can have seen): the split
    ``demo_corpus(nonmembers=True)`` labels, as two sets. ``domains`` default to the non-member
    set's (``legal``, ``code``); ``limit_per_domain`` counts members.

    Raises:
        DataError: as :func:`demo_corpus` (``docs``, an unreadable non-member file …).
    """
    labelled = demo_corpus(
        domains=domains,
        limit_per_domain=limit_per_domain,
        nonmembers=True,
        nonmember_path=nonmember_path,
    )
    members = [s for s in labelled if s.label == MEMBER]
    return members, [s for s in labelled if s.label != MEMBER]


def to_jsonl(snippets: Iterable[Snippet], *, label: str | None = None) -> bytes:
    """Snippets as JSON Lines (UTF-8), one object a line with ``id``, ``text``, ``domain``,
    ``source`` and ``label`` (``label`` given: every line's): the format ``memprobe audit``,
    ``memprobe infer`` and the dashboard's uploads read (``text`` column; ``--id-column id``
    keeps the ids; ``label``: member / nonmember)."""
    lines = []
    for snippet in snippets:
        record = snippet.to_dict()
        if label is not None:
            record["label"] = label
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    return "".join(lines).encode("utf-8")


def _domain_order(domain: str) -> int:
    if domain not in DOMAINS:
        raise DataError(f"demo corpus has no domain {domain!r}; choose from {list(DOMAINS)}")
    return DOMAINS.index(domain)


def nonmember_summary(path: Path | None = None) -> dict[str, Any] | None:
    """The generated non-member set as ``memprobe corpus`` lists it (None: not built yet).

    Keys: those of :meth:`~memprobe_core.snippets.nonmembers.NonmemberSet.describe` plus
    ``counts`` (texts per domain). Reading never builds the set.

    Raises:
        DataError: the file exists but is unreadable.
    """
    path = path or generated.default_path()
    if not path.exists():
        return None
    made = generated.read(path)
    counts = {d: sum(s.domain == d for s in made.snippets) for d in generated.NONMEMBER_DOMAINS}
    return {**made.describe(), "counts": counts}


def corpus_summary() -> dict[str, int]:
    """Snippets per domain in the full demo corpus (every domain listed, even with 0)."""
    counts = {domain: 0 for domain in DOMAINS}
    for snippet in _all_snippets():
        counts[snippet.domain] += 1
    return counts
