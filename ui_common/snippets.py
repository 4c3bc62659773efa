"""Choosing what to probe: a snippet from the built-in corpus, pasted or uploaded, and its options
(ROUGE-L scoring, α from the paper's table, the tokenizer that cuts it).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import streamlit as st

from memprobe_core.config import (
    DEFAULT_PREFIX_RATIO,
    LENGTHS,
    alpha_for,
    family_of,
)
from memprobe_core.highlight import show_controls
from memprobe_core.snippets import loaders
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import DataError, Snippet
from ui_common import presets
from ui_common.page import carried, md


@st.cache_data(show_spinner="Collecting the built-in corpus…")
def _corpus() -> list[Any]:

    return demo_corpus()


def read_upload(upload: Any, spec: loaders.LoadSpec | None = None) -> Any | None:
    """Snippets of an uploaded file (``LoadResult``), or ``None`` with the problem shown.

    Files over ``memprobe_core.snippets.loaders.MAX_FILE_BYTES`` are refused before they are parsed,
    files of more rows than ``MAX_FILE_SNIPPETS`` as soon as the row after it is read.
    """

    size = getattr(upload, "size", None)
    if size is None:
        size = len(upload.getvalue())
    if size > loaders.MAX_FILE_BYTES:
        st.error(
            md(
                f"{upload.name} is {size / 2**20:.1f} MiB; uploads are capped at "
                f"{loaders.MAX_FILE_BYTES / 2**20:.0f} MiB. Split the file, or run it with the "
                "`memprobe audit` command, which reads files from disk."
            )
        )
        return None
    try:
        result = loaders.load_snippets_from_bytes(
            upload.getvalue(),
            upload.name,
            # The cap read now, not the class default's: a test may lower it.
            replace(spec or loaders.LoadSpec(), max_snippets=loaders.MAX_FILE_SNIPPETS),
        )
    except loaders.TooManySnippets as exc:
        held = f"{exc.rows:,}" if exc.rows is not None else f"more than {exc.max_snippets:,}"
        st.error(
            md(
                f"{upload.name} holds {held} rows; uploads are capped at "
                f"{exc.max_snippets:,} snippets. Upload a part of the file, or audit it with the "
                "`memprobe audit FILE --limit N` command (or raise its `--max-snippets`), which "
                "reads files from disk."
            )
        )
        return None
    except DataError as exc:
        st.error(md(str(exc)))
        return None
    st.text(result.summary())
    if not result.snippets:
        st.error(
            "No usable snippet in this file; check the text column and the rejected rows above."
        )
        return None
    return result


def snippet_picker(key: str) -> Any | None:
    """Choose one snippet: from the built-in corpus by domain, pasted, or uploaded.

    Returns:
        A ``Snippet``, or ``None`` (with the reason shown) when none is chosen yet.
    """

    sources = ["Built-in corpus", "Paste", "Upload"]
    source = st.radio(
        "Snippet",
        sources,
        horizontal=True,
        key=carried(f"snip_{key}_source", "snippet_source", sources[0], sources),
    )
    if source == "Built-in corpus":
        corpus = _corpus()
        if not corpus:
            st.error("The built-in corpus is empty on this machine; paste or upload a snippet.")
            return None
        domains = list(dict.fromkeys(s.domain for s in corpus))  # corpus order: legal first
        domain = st.selectbox(
            "Domain",
            domains,
            key=carried(f"snip_{key}_domain", "snippet_domain", domains[0], domains),
        )
        pool = [s for s in corpus if s.domain == domain]
        chosen = st.selectbox(
            "Snippet",
            range(len(pool)),
            key=carried(f"snip_{key}_corpus_{domain}", f"snippet_{domain}", 0, range(len(pool))),
            format_func=lambda i: f"{pool[i].id} ({len(pool[i].text.split())} words)",
        )
        snippet = pool[chosen or 0]
    elif source == "Paste":
        text = st.text_area(
            "Text the model may have seen",
            key=carried(f"snip_{key}_text", "snippet_text", ""),
            height=160,
        )
        c1, c2 = st.columns(2)
        domain = c1.text_input(
            "Domain (picks the default α)",
            key=carried(f"snip_{key}_pdomain", "snippet_pdomain", "unknown"),
        )
        sid = c2.text_input("Id", key=carried(f"snip_{key}_pid", "snippet_pid", "pasted"))
        if not text.strip():
            st.info("Paste a text above (a few hundred words), or pick the built-in corpus.")
            return None
        snippet = Snippet(
            id=sid.strip() or "pasted",
            text=text,
            domain=domain.strip() or "unknown",
            source="pasted in the dashboard",
        )
    else:
        upload = st.file_uploader(
            "A .txt, .jsonl, .csv or .parquet file (column 'text')",
            type=["txt", "jsonl", "ndjson", "csv", "parquet"],
            key=f"upload_{key}",
        )  # uploads cannot be kept in state
        if upload is None:
            st.info("Upload a file, or pick the built-in corpus.")
            return None
        result = read_upload(upload)
        if result is None:
            return None
        pool = result.snippets
        chosen = st.selectbox(
            "Snippet",
            range(len(pool)),
            key=f"snip_{key}_up_pick",
            format_func=lambda i: f"{pool[i].id} ({len(pool[i].text.split())} words)",
        )
        snippet = pool[chosen or 0]
    with st.expander("Snippet text", expanded=False):
        st.text(show_controls(snippet.text[:4000]) + (" …" if len(snippet.text) > 4000 else ""))
    return snippet


# How the length widgets describe the paper's setting (config's constants, as text).
PAPER_LENGTHS = ", ".join(map(str, LENGTHS))
PAPER_SPLIT = f"{round(100 * DEFAULT_PREFIX_RATIO)}/{100 - round(100 * DEFAULT_PREFIX_RATIO)}"
# The Audit page's length choices: short ones for a quick look, then the paper's.
LENGTH_CHOICES: tuple[int, ...] = tuple(sorted({50, 100, *LENGTHS}))


def length_widget(key: str) -> int:
    """Tokens of prefix + suffix for one snippet (``{key}_length``; the paper's ``LENGTHS``)."""
    return int(
        st.number_input(
            "Length (tokens)",
            4,
            4000,
            step=10,
            key=carried(f"{key}_length", "length", presets.default_value(key, "length")),
            help=f"prefix + suffix, split {PAPER_SPLIT} (paper: {PAPER_LENGTHS})",
        )
    )


def alpha_widget(key: str, *, domain: str, length: int, model_name: str) -> float:
    """α pre-filled from the paper's table for (domain, length, family); overridable."""

    alpha, source = alpha_for(domain=domain, length=length, family=family_of(model_name))
    override = st.checkbox(
        "Set α myself",
        key=f"{key}_alpha_override",
        help="α weighs Mem against LCS_P in O = α·Mem − (1−α)·LCS_P",
    )
    if override:
        return float(st.slider("α", 0.0, 1.0, value=alpha, step=0.05, key=f"{key}_alpha"))
    st.caption(
        md(f"α = {alpha} from the paper's table ({source}; domain {domain}, length {length})")
    )
    return alpha
