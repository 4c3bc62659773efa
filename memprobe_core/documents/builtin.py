"""Built-in documents: real texts an installed package ships, for a map without a file.

``apache-2.0`` is the Apache License 2.0 as the ``transformers`` distribution ships it (the
licence file of its wheel; ``accelerate`` and ``huggingface_hub`` ship the same text and are
tried next). The licence is public and widely copied on the web, so a model trained on web
text knows parts of it: the embedded Gemma-3-270M writes back short runs of it (docs/models.md).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass

from memprobe_core.documents.reading import DocumentError


@dataclass(frozen=True)
class BuiltInDocument:
    """A document shipped by an installed distribution.

    Attributes:
        name: what users type (``--builtin NAME``).
        title: shown on pages and in reports.
        distributions: where to look, in order (the first that has the file wins).
        file_name: the file's name inside the distribution's metadata.
        marker: words the right file holds (a distribution's LICENSE may be another licence).
        licence: the text's own licence (stated in the README).
    """

    name: str
    title: str
    distributions: tuple[str, ...]
    file_name: str
    marker: str
    licence: str


BUILT_IN_DOCUMENTS: dict[str, BuiltInDocument] = {
    d.name: d
    for d in (
        BuiltInDocument(
            name="apache-2.0",
            title="Apache License, Version 2.0 (as shipped by transformers)",
            distributions=("transformers", "accelerate", "huggingface_hub"),
            file_name="LICENSE",
            marker="Apache License",
            licence="the licence text itself (it may be copied verbatim)",
        ),
    )
}


def builtin_document(name: str) -> tuple[str, str]:
    """``(text, source)`` of built-in document ``name``.

    Raises:
        DocumentError: an unknown name, or no listed distribution ships the file.
    """
    doc = BUILT_IN_DOCUMENTS.get(name)
    if doc is None:
        raise DocumentError(
            f"built-in document {name!r} is unknown; choose from {', '.join(BUILT_IN_DOCUMENTS)}"
        )
    for dist_name in doc.distributions:
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in dist.files or ():
            if file.name == doc.file_name:
                text = file.read_text(encoding="utf-8")
                if doc.marker in text:
                    return text, f"{dist_name} {dist.version}: {file}"
    raise DocumentError(
        f"built-in document {name!r}: none of {', '.join(doc.distributions)} is installed with "
        f"its {doc.file_name} file; reinstall with scripts/setup.sh or give a file"
    )
