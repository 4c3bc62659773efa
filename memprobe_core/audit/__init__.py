"""Audits: a dataset × methods × lengths, run unit by unit against the store, then reported.

- :mod:`.models`: which models each method needs (roles) and loading them by name.
- :mod:`.audit`: start, run and resume an audit.
- :mod:`.report`: Table 1 with intervals, paired gains, PII and cost summaries.
- :mod:`.export`: formula-safe CSV.
"""

from memprobe_core.audit.audit import (
    AuditBusyError,
    AuditProgress,
    AuditSummary,
    ProgressCallback,
    Runner,
    check_methods,
    resume_audit,
    run_audit,
    start_audit,
)
from memprobe_core.audit.models import (
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
    "check_methods",
    "default_model_names",
    "load_models",
    "models_from_config",
    "resume_audit",
    "run_audit",
    "start_audit",
]
