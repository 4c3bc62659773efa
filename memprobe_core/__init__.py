"""memprobe: measure how much of its training data a language model gives back.

The core package: metrics, PII, snippets, models, extraction methods, NER audits, store,
audits, reports and the CLI. It never imports streamlit.
"""

__version__ = "0.1.0"
