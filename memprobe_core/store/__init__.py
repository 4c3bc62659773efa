"""The run store: one SQLite file holding every run, sample, unit, scored candidate and result.

- :mod:`.schema`: tables, ordered migrations, connections (``StoreFile``), ``UnitKey``.
- :mod:`.store`: ``Store``, the read/write API everything else uses.
- :mod:`.frames`: rows → pandas frames for reports and CSV exports.
"""

from memprobe_core.store.frames import RESULT_COLUMNS, pii_counts, result_row
from memprobe_core.store.schema import (
    BUSY_TIMEOUT_MS,
    MIGRATIONS,
    RUN_KINDS,
    RUN_STATUSES,
    SCHEMA_VERSION,
    UNIT_STATUSES,
    StoreError,
    StoreFile,
    UnitKey,
)
from memprobe_core.store.store import Store

__all__ = [
    "BUSY_TIMEOUT_MS",
    "MIGRATIONS",
    "RESULT_COLUMNS",
    "RUN_KINDS",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "UNIT_STATUSES",
    "Store",
    "StoreError",
    "StoreFile",
    "UnitKey",
    "pii_counts",
    "result_row",
]
