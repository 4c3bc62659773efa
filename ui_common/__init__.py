"""Streamlit helpers shared by the dashboard's pages: set-up, models, snippet input, live jobs.

Pages stay thin: they read widgets, call ``memprobe_core`` and render with these helpers. The
core never imports Streamlit; everything that touches ``st`` lives here or in a page. Pages
import this package (``import ui_common as ui``); the helpers live in:

- :mod:`ui_common.page`: page set-up, kept widget state, Markdown escaping, the run store.
- :mod:`ui_common.models`: the sidebar's per-role model pickers and cached model loading.
- :mod:`ui_common.snippets`: snippet chooser and upload, scoring and α widgets.
- :mod:`ui_common.jobs`: starting, redrawing and cancelling live jobs.
- :mod:`ui_common.render`: candidate table, overlap view, PII, CSV download, probe view.
- :mod:`ui_common.methods`: method picker, option widgets, model-set loader (Probe, Compare,
  Audit).
- :mod:`ui_common.compare_view`, :mod:`ui_common.audit_view` (with
  :mod:`ui_common.audit_summary`, an audit's end box), :mod:`ui_common.ner_view`,
  :mod:`ui_common.runs_view`: the views of one page each (imported by that page).
- :mod:`ui_common.charts`: the plotly figures (no Streamlit), labels escaped.
- :mod:`ui_common.tables`: every table made for people before ``st.dataframe`` (labels,
  intervals as text, ``–`` for a missing value, yes/no, column help, widths that fit the page).

Safety rule kept by every helper: text a user (or a model) wrote is only ever shown through
widgets that render plain text (``st.text``, ``st.code``, ``st.dataframe``, widget option
labels), through :func:`md` (Markdown-escaped) or as ``html.escape``'d HTML in ``st.html``.
"""

from __future__ import annotations

from ui_common.jobs import (
    current_job,
    job_running,
    job_snapshot,
    live_job,
    render_status,
    show_job,
    start_job,
    watch_run,
)
from ui_common.models import (
    KINDS,
    ROLE_HELP,
    ROLE_LABELS,
    ModelChoice,
    asked_dtypes,
    default_model,
    device_summary,
    embedded_names,
    embedded_table,
    load_model,
    model_picker,
    model_sidebar,
    role_label,
)
from ui_common.page import (
    FAKE_ENV,
    fake_default,
    get_store,
    keep,
    md,
    page_setup,
    session_tag,
    sidebar_status,
)
from ui_common.render import (
    candidates_table,
    csv_download,
    html_report_download,
    measures_view,
    overlap_view,
    pii_view,
    probe_view,
    prompt_code,
    signals_view,
    split_caption,
    verbatim_caption,
)
from ui_common.snippets import (
    alpha_widget,
    length_widget,
    read_upload,
    snippet_picker,
)

__all__ = [
    "FAKE_ENV",
    "KINDS",
    "ROLE_HELP",
    "ROLE_LABELS",
    "ModelChoice",
    "alpha_widget",
    "asked_dtypes",
    "candidates_table",
    "csv_download",
    "current_job",
    "default_model",
    "device_summary",
    "embedded_names",
    "embedded_table",
    "fake_default",
    "get_store",
    "html_report_download",
    "job_running",
    "job_snapshot",
    "keep",
    "length_widget",
    "live_job",
    "load_model",
    "md",
    "measures_view",
    "model_picker",
    "model_sidebar",
    "overlap_view",
    "page_setup",
    "pii_view",
    "probe_view",
    "prompt_code",
    "read_upload",
    "render_status",
    "role_label",
    "session_tag",
    "show_job",
    "sidebar_status",
    "signals_view",
    "snippet_picker",
    "split_caption",
    "start_job",
    "verbatim_caption",
    "watch_run",
]
