"""NER memorization: are names seen in training recognised more confidently (M-MEM)?

Reads the widgets into a ``NerAuditConfig``, runs ``run_ner_audit`` as a job and draws its result:
the ranking, M-MEM by prompt type, token importance and attention of the best and worst prompts,
and a Kendall τ matrix when several models are audited (:mod:`ui_common.ner_view`).
"""

from __future__ import annotations

import streamlit as st

import ui_common as ui
from memprobe_core.ner.audit import NerAuditConfig
from ui_common import ner_view

JOB = "ner_job"

ui.page_setup("NER")
st.title("NER memorization")
st.caption(
    "A prompt with a name slot is filled with a name the model was trained on and with one it "
    "never saw; M-MEM is the share of pairs where the trained name gets the higher PER "
    "confidence. 50 % means no memorization signal."
)

ner_view.size_widget()
config: NerAuditConfig | None = None
problem: str | None = None
try:
    config = ner_view.read_config()
except ValueError as exc:  # NerConfigError, PromptError, a missing upload: each says what to fix
    problem = str(exc)
if config is not None:
    st.caption(ui.md(ner_view.estimate_text(config)))
if st.button("Run NER audit", type="primary", disabled=ui.job_running(JOB), key="ner_run"):
    if config is None:
        st.error(ui.md(problem or "the NER audit cannot start"))
    else:
        ui.start_job(JOB, ner_view.job(config), "NER audit")
if ui.show_job(JOB, ner_view.render) is None:
    st.info(
        "Pick models, names and prompts, then press Run NER audit. The embedded model is "
        "trained on first use (about 4 minutes on a 2-core CPU; the bar shows its steps) and "
        "cached: later audits load it in seconds."
    )
