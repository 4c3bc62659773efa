"""Audits: a dataset × methods × lengths, run unit by unit against the store (start, run, resume).

The layers below it: :mod:`memprobe_core.runs` (the unit runner, probes, model roles) and
:mod:`memprobe_core.executors` (where units run); :mod:`memprobe_core.report` turns a run's
units into tables, text, HTML and CSV. The model-role names are re-exported here because an
audit is where a user names its models.
"""

from memprobe_core.audit.audit import (
    AuditBusyError,
    AuditProgress,
    AuditSummary,
    ProgressCallback,
    Runner,
    resume_audit,
    run_audit,
    start_audit,
)
from memprobe_core.audit.inference import (
    SharedTexts,
    TooFewTexts,
    inference_snippets,
    start_inference,
)
from memprobe_core.runs.roles import (
    ModelNames,
    default_model_names,
    load_models,
    models_from_config,
)

__all__ = [
    "AuditBusyError",
    "AuditProgress",
    "AuditSummary",
    "ModelNames",
    "ProgressCallback",
    "Runner",
    "SharedTexts",
    "TooFewTexts",
    "default_model_names",
    "inference_snippets",
    "load_models",
    "models_from_config",
    "resume_audit",
    "run_audit",
    "start_audit",
    "start_inference",
]
