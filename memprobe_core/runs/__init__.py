"""Runs: the one unit runner and what sits on it.

- :mod:`.unit`: ``run_unit``, the unit runner every probe, comparison and audit goes through
  (split → method → events → store → measures).
- :mod:`.probe`: recorded probes and comparisons (``start_probe`` / ``run_probe``), ``RunConfig``.
- :mod:`.roles`: the models of a run by name, their defaults per role, and loading the roles the
  chosen methods need.

Audits build on these (:mod:`memprobe_core.audit`), through an executor
(:mod:`memprobe_core.executors`).
"""
