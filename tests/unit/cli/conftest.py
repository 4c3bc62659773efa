"""Fixtures of the CLI tests: ``tiny`` and ``tiny_models`` serve a tiny random Llama as the model
named ``tiny`` (:mod:`tests.unit.cli.tiny_victim`)."""

from tests.unit.cli.tiny_victim import tiny, tiny_models  # noqa: F401 - fixtures by name
