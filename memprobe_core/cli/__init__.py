"""The ``memprobe`` command line: one module per command over the core packages.

- :mod:`.main`: the parser and ``main`` (the console script's entry point).
- :mod:`.errors`: the one map from errors to exit codes.
- :mod:`.common`: the shared help formatter, option groups and option readers.
- :mod:`.output`: terminal rendering (live round table, progress bar, tables).
- one module per command: :mod:`.probe`, :mod:`.audit` (audit, resume), :mod:`.runs`,
  :mod:`.report`, :mod:`.corpus`, :mod:`.ner`.
"""

from memprobe_core.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
