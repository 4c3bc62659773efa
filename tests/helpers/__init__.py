"""Shared test helpers (tiny in-process models)."""
