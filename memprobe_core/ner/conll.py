"""CoNLL-2003 data: the four-column reader and writer, PER names per split, the hub dataset loader.

The file format: one token per line, whitespace-separated columns ``token POS chunk NER`` (only
the first and the last column are used, so two-column files work too), a blank line between
sentences, ``-DOCSTART-`` lines between documents. Tags may follow **BIO** (``B-`` opens every
entity) or **IOB1** (the original CoNLL-2003 files: ``I-`` everywhere, ``B-`` only where two
entities of the same type touch). :func:`entities` reads both: an entity starts at a ``B-`` tag or
at an ``I-`` tag whose type differs from the previous token's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memprobe_core.errors import MemprobeError
from memprobe_core.user_paths import check_readable, read_bytes

log = logging.getLogger(__name__)

# File names of the usual CoNLL-2003 distributions, per split.
SPLIT_FILES: dict[str, tuple[str, ...]] = {
    "train": ("train.txt", "eng.train", "train.conll", "train"),
    "dev": ("valid.txt", "dev.txt", "eng.testa", "valid.conll", "dev.conll", "valid", "dev"),
    "test": ("test.txt", "eng.testb", "test.conll", "test"),
}


class ConllError(MemprobeError, ValueError):
    """A CoNLL file could not be read; the message names the file and line."""


@dataclass(frozen=True)
class Sentence:
    """One sentence: its tokens and their NER tags (same length)."""

    tokens: tuple[str, ...]
    tags: tuple[str, ...]


def parse_conll(text: str, *, source: str = "<text>") -> list[Sentence]:
    """Parse CoNLL-format text into sentences.

    Args:
        text: the file's content.
        source: a name for error messages (the file path).

    Raises:
        ConllError: a line has fewer than two columns, or a tag is not ``O``/``B-X``/``I-X``.
    """
    sentences: list[Sentence] = []
    tokens: list[str] = []
    tags: list[str] = []

    def flush() -> None:
        if tokens:
            sentences.append(Sentence(tuple(tokens), tuple(tags)))
            tokens.clear()
            tags.clear()

    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            flush()
            continue
        columns = stripped.split()
        if columns[0] == "-DOCSTART-":
            flush()
            continue
        if len(columns) < 2:
            raise ConllError(
                f"{source} line {number}: expected 'token ... NER-tag' columns, got {stripped!r}"
            )
        tag = columns[-1]
        if tag != "O" and not (len(tag) > 2 and tag[:2] in ("B-", "I-", "E-", "S-")):
            raise ConllError(
                f"{source} line {number}: NER tag {tag!r} is not O, B-TYPE or I-TYPE "
                "(is the NER tag the last column?)"
            )
        tokens.append(columns[0])
        tags.append(tag)
    flush()
    return sentences


def read_conll(path: str | Path) -> list[Sentence]:
    """Read a CoNLL-format file (UTF-8). See :func:`parse_conll`."""
    # A symlink loop, pipe, device, folder or /proc file is refused (docs/security.md).
    path = check_readable(path, "CoNLL file", ConllError)
    try:
        text = read_bytes(path, "CoNLL file", error=ConllError).decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConllError(f"CoNLL file {path} is not UTF-8 text ({err}); save it as UTF-8") from err
    return parse_conll(text, source=str(path))


def write_conll(sentences: Iterable[Sentence], path: str | Path) -> Path:
    """Write sentences in the four-column format (POS and chunk columns set to ``_``)."""
    path = Path(path)
    lines = ["-DOCSTART- -X- -X- O", ""]
    for sentence in sentences:
        lines.extend(f"{tok} _ _ {tag}" for tok, tag in zip(sentence.tokens, sentence.tags))
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def entities(sentence: Sentence) -> list[tuple[str, str]]:
    """The entities of a sentence as ``(type, text)``, reading BIO and IOB1 tags alike."""
    out: list[tuple[str, str]] = []
    current_type: str | None = None
    current: list[str] = []
    for token, tag in zip(sentence.tokens, sentence.tags):
        if tag == "O":
            if current_type:
                out.append((current_type, " ".join(current)))
            current_type, current = None, []
            continue
        prefix, kind = tag[0], tag[2:]
        if prefix in ("B", "S") or kind != current_type:
            if current_type:
                out.append((current_type, " ".join(current)))
            current_type, current = kind, [token]
        else:
            current.append(token)
        if prefix in ("E", "S"):  # BIOES: the entity ends here
            out.append((current_type, " ".join(current)))
            current_type, current = None, []
    if current_type:
        out.append((current_type, " ".join(current)))
    return out


def person_names(sentences: Iterable[Sentence], *, entity_type: str = "PER") -> list[str]:
    """Distinct person names (or another ``entity_type``) in order of first appearance."""
    seen: dict[str, None] = {}
    for sentence in sentences:
        for kind, text in entities(sentence):
            if kind == entity_type:
                seen.setdefault(text, None)
    return list(seen)


def find_split_files(directory: str | Path) -> dict[str, Path]:
    """The train/dev/test files of a CoNLL-2003 folder (names as in ``SPLIT_FILES``).

    Raises:
        ConllError: the folder has none of the known file names.
    """
    directory = Path(directory)
    found: dict[str, Path] = {}
    for split, names in SPLIT_FILES.items():
        for name in names:
            if (directory / name).is_file():
                found[split] = directory / name
                break
    if not found:
        known = ", ".join(n for names in SPLIT_FILES.values() for n in names)
        raise ConllError(f"no CoNLL split file in {directory}; expected some of: {known}")
    return found


def conll_person_names(source: str | Path) -> dict[str, list[str]]:
    """PER names per split from a CoNLL-2003 folder or a single file.

    Args:
        source: a folder with split files (see ``SPLIT_FILES``) or one file (returned as split
            ``"train"``).

    Returns:
        split → distinct PER names.
    """
    source = Path(source)
    files = find_split_files(source) if source.is_dir() else {"train": source}
    return {split: person_names(read_conll(path)) for split, path in files.items()}


def hub_conll_person_names(
    dataset: str = "eriktks/conll2003", splits: Sequence[str] = ("train", "validation", "test")
) -> dict[str, list[str]]:
    """PER names per split from the CoNLL-2003 dataset on the Hugging Face hub.

    Needs the ``datasets`` package and network access (neither exists on the development
    machines; use :func:`conll_person_names` with local files there).

    Raises:
        ConllError: ``datasets`` is not installed, or the dataset lacks ``tokens``/``ner_tags``.
    """
    try:
        import datasets  # lazy: optional dependency, pulls in a lot
    except ImportError as err:
        raise ConllError(
            "loading CoNLL-2003 from the hub needs the 'datasets' package: "
            "pip install datasets (and network access); or pass local CoNLL files instead"
        ) from err
    out: dict[str, list[str]] = {}
    for split in splits:
        data = datasets.load_dataset(dataset, split=split)
        if "tokens" not in data.column_names or "ner_tags" not in data.column_names:
            raise ConllError(
                f"hub dataset {dataset} split {split} has columns {data.column_names}; "
                "expected 'tokens' and 'ner_tags'"
            )
        names = data.features["ner_tags"].feature.names
        sentences = (
            Sentence(tuple(row["tokens"]), tuple(names[i] for i in row["ner_tags"])) for row in data
        )
        out["dev" if split == "validation" else split] = person_names(sentences)
    return out
