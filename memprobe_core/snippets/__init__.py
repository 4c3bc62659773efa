"""Snippets: the texts an audit probes for, where they come from, and how each is cut.

- :mod:`.split`: :class:`~.split.Snippet`, the prefix/suffix split by tokens (``split``).
- :mod:`.loaders`: snippets from a user's file (.txt, .jsonl, .csv, .parquet), bounded and checked.
- :mod:`.corpus`: the built-in demo corpus assembled from what installed packages ship.
- :mod:`.nonmembers`: the generated non-member set of a labelled audit (made on this machine).
- :mod:`.dated`: the dated split, release notes labelled by their date against the embedded
  victim's training cut-off (a labelled audit of one genre).
"""

from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.loaders import load_snippets
from memprobe_core.snippets.split import DataError, Snippet, SplitSnippet, split

__all__ = ["DataError", "Snippet", "SplitSnippet", "demo_corpus", "load_snippets", "split"]
