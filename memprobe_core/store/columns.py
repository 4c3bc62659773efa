"""The result columns of table ``units``: SQL types, the versions that added them, JSON ones.

Read by the migrations that add them (:mod:`.migrations`, :mod:`.upgrade_v2`) and by the row
conversion that fills and reads them (:mod:`.rows`).
"""

from __future__ import annotations

# A unit's result is stored once: its scalars and small JSON parts as columns of ``units``, its
# trace as the ``candidates`` rows written while it ran. Version 1 kept the whole result as JSON
# in ``units.result`` (trace included, a second copy of the candidates).
RESULT_COLUMNS_SQL: dict[str, str] = {
    "domain": "TEXT",
    "prompt": "TEXT",
    "output": "TEXT",
    "mem": "REAL",
    "lcs_p": "REAL",
    "objective": "REAL",
    "dis": "REAL",
    "alpha": "REAL",
    "pii": "TEXT",
    "costs": "TEXT",
    "manifest": "TEXT",
    "mem_init": "REAL",
    "mem_best": "REAL",
    "mem_reference": "REAL",
    "verbatim": "TEXT",
    "membership": "TEXT",
}
# Columns added after version 2, with the migration that adds them (version 2 adds the rest).
V3_COLUMNS: tuple[str, ...] = ("mem_init", "mem_best", "mem_reference")
V4_COLUMNS: tuple[str, ...] = ("verbatim", "membership")
JSON_RESULT_COLUMNS: tuple[str, ...] = ("pii", "costs", "manifest", "verbatim", "membership")
