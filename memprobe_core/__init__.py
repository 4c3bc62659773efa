"""memprobe: measure how much of its training data a language model gives back.

The core package: metrics, PII, snippets, models, extraction methods, NER audits, store,
audits, reports and the CLI. It never imports streamlit.
"""

__version__ = "0.1.0"

# The root of memprobe's logger hierarchy: every module logs to ``logging.getLogger(__name__)``
# (``memprobe_core.runs.unit``, ...), so handlers and levels are set on this one logger
# (the CLI's ``-v``; tests' ``caplog.set_level(..., logger=LOGGER_ROOT)``).
LOGGER_ROOT = "memprobe_core"
