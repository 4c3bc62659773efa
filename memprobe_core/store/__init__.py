"""The run store: one SQLite file holding every run, sample, unit, scored candidate and result.

- :mod:`.records`: the typed records it returns (run, unit, candidate), ``UnitKey``, statuses.
- :mod:`.connections`: the SQLite file, its per-thread connections, one writer (``StoreFile``).
- :mod:`.schema`: opening a file at the current schema version (``migrate``), ``StoreError``.
- :mod:`.migrations`: the ordered migrations (``MIGRATIONS``), ``SCHEMA_VERSION``; the upgrade to
  version 2 in :mod:`.upgrade_v2`, rows it cannot read kept by :mod:`.quarantine`.
- :mod:`.columns`: the result columns of ``units``; :mod:`.rows`: rows ↔ records and results.
- :mod:`.store`: ``Store``, the read/write API everything else uses.
- :mod:`.frames`: rows → pandas frames for reports and CSV exports.
"""

from memprobe_core.store.connections import StoreFile
from memprobe_core.store.frames import RESULT_COLUMNS, pii_counts, result_row
from memprobe_core.store.migrations import MIGRATIONS, SCHEMA_VERSION
from memprobe_core.store.records import (
    RUN_KINDS,
    RUN_STATUSES,
    UNIT_STATUSES,
    CandidateRecord,
    RunRecord,
    RunStatus,
    UnitKey,
    UnitRecord,
    UnitStatus,
)
from memprobe_core.store.schema import BUSY_TIMEOUT_MS, StoreError
from memprobe_core.store.store import Store

__all__ = [
    "BUSY_TIMEOUT_MS",
    "MIGRATIONS",
    "RESULT_COLUMNS",
    "RUN_KINDS",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "UNIT_STATUSES",
    "CandidateRecord",
    "RunRecord",
    "RunStatus",
    "Store",
    "StoreError",
    "StoreFile",
    "UnitKey",
    "UnitRecord",
    "UnitStatus",
    "pii_counts",
    "result_row",
]
