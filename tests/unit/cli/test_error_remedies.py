"""Every remedy an error names is tested (issue 51, category 7).

:mod:`tests.unit.cli.remedy_scan` finds, in memprobe_core's source, every error message that
names a flag or an option. Each is an entry of :data:`CASES` (a case that provokes it on the
command line, or through the library for a message the command line cannot reach, and the same
case with the named remedy applied, which must get further: no error, or another, later one;
the same check refusing the remedy's value in turn is not further, :func:`_check_of`) or
of :data:`NOT_COVERED` (why it has no case yet). A new message naming a flag fails
:func:`test_every_message_naming_a_flag_has_an_entry` until it has one.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from memprobe_core.cli import main
from tests.unit.cli.remedy_scan import sites
from tests.unit.cli.test_cli import MODELS, WORDS, fake_models  # noqa: F401 (a fixture)

Argv = Callable[[Path], list[str]]


@dataclass(frozen=True)
class Case:
    """``fail(tmp)``: a command line refused with ``says`` in its error; ``fixed(tmp)``: the same
    with the remedy the message names applied (``names``: the flag it names, shown). ``setup``
    makes the machine the case needs before both (a model only a test has, a machine without
    changelogs); a remedy that is another command first (``corpus nonmembers --build``) is run by
    ``fixed`` before it gives the failing command line again."""

    fail: Argv
    fixed: Argv
    says: str
    names: str
    setup: Callable[[pytest.MonkeyPatch, Path], None] | None = None


def _rows(tmp: Path, name: str = "data.jsonl", n: int = 3) -> Path:
    path = tmp / name
    path.write_text(
        "".join(json.dumps({"text": f"{WORDS} row {i}"}) + "\n" for i in range(n)),
        encoding="utf-8",
    )
    return path


def _latin1(tmp: Path, name: str = "latin.txt") -> Path:
    path = tmp / name
    path.write_bytes(f"caf\xe9 {WORDS}\n\nna\xefve {WORDS}".encode("latin-1"))
    return path


def _parquet(tmp: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp / "data.parquet"
    pq.write_table(pa.table({"text": [f"{WORDS} row {i}" for i in range(3)]}), path)
    return path


def _audit(tmp: Path, *args: str) -> list[str]:
    return ["--store", str(tmp / "runs.sqlite"), "audit", *args]


@functools.cache
def _tiny_llama() -> object:
    from tests.helpers.tiny_models import tiny_hf_generator

    return tiny_hf_generator(seed=7, adds_bos=True)


def _tiny_victim(mp: pytest.MonkeyPatch, tmp: Path) -> None:
    """``models.load('tiny')`` gives a tiny random Llama with weights (a map scores them); other
    names load as the ``fake_models`` fixture's parrots."""
    import memprobe_core.models as models_pkg

    parrots = models_pkg.load

    def load(name: str, *, backend: object = None, **options: object) -> object:
        return _tiny_llama() if name == "tiny" else parrots(name, backend=backend, **options)

    mp.setattr(models_pkg, "load", load, raising=False)


def _no_changelogs(mp: pytest.MonkeyPatch, tmp: Path) -> None:
    """A machine whose installed packages ship no dated release notes."""
    from memprobe_core.snippets import dated

    mp.setattr(dated, "dated_texts", lambda limit=None: [])


NER_PROMPTS = ("hello {name} .", "did {name} visit paris ?", "tell {name} to call !")
NER_IN = ["john smithson", "anna lee", "smiths", "park", "kim", "maria lee"]
NER_OUT = ["maria", "kim park", "lee anna", "john", "anna", "smith"]


def _tiny_ner_model(mp: pytest.MonkeyPatch, tmp: Path) -> None:
    """``tiny-ner``: a tiny random BERT token classifier with its own name lists."""
    from memprobe_core.ner import registry
    from tests.helpers.ner_models import tiny_ner

    mp.setattr(registry, "_CACHE", {})
    mp.setitem(
        registry._ENTRIES,
        "tiny-ner",
        registry.NerModelEntry(
            "tiny-ner",
            "tiny random BERT (test)",
            lambda device, progress: tiny_ner(seed=0),
            lambda: (list(NER_IN), list(NER_OUT)),
        ),
    )


def _lines(tmp: Path, name: str, lines: tuple[str, ...] | list[str]) -> str:
    path = tmp / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _ner(tmp: Path, *args: str) -> list[str]:
    return ["ner", "--prompts", _lines(tmp, "prompts.txt", NER_PROMPTS), "--json", *args]


def _short(tmp: Path) -> str:
    path = tmp / "short.txt"
    path.write_text("a b c", encoding="utf-8")
    return str(path)


def _step(argv: list[str]) -> None:
    """Run a command the case needs first (a stored run, a built set); it must succeed."""
    code, err = _run(argv)
    assert code == 0, err[-2000:]


def _continuation(tmp: Path) -> None:
    """Run 1 of ``tmp``'s store: a continuation (a document run)."""
    _step(
        _document(
            tmp,
            _short(tmp),
            "--mode",
            "continue",
            "--victim",
            "test-v",
            "--opening-words",
            "1",
            "--heldback-words",
            "2",
        )
    )


def _gate_after(tmp: Path, dataset: Path, *models: str) -> list[str]:
    """Run 1: an audit of ``dataset``; then the gate of a policy limiting AUROC on it."""
    _step(_audit(tmp, str(dataset), *models, "--methods", "ps_base", "--lengths", "30"))
    policy = _policy(tmp, "max_auroc = 0.9")
    return ["--store", str(tmp / "runs.sqlite"), "gate", "1", "--policy", str(policy)]


def _nonmember_set(tmp: Path, *, version: int | None = None, junk: bool = False) -> None:
    """Build a one-text-per-domain non-member set, then spoil it (an old generator version, or
    bytes that are no set at all)."""
    from memprobe_core.snippets import nonmembers

    _step(["corpus", "nonmembers", "--build", "--count", "1"])
    path = nonmembers.default_path()
    if junk:
        path.write_text("{not json", encoding="utf-8")
    if version is not None:
        record = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**record, "version": version}), encoding="utf-8")


def _rebuilt(argv: list[str]) -> list[str]:
    """The remedy ``memprobe corpus nonmembers --build``, then ``argv`` again."""
    _step(["corpus", "nonmembers", "--build"])
    return argv


TM = ["--victim", "tiny", "--base", "tiny", "--attacker", "test-a"]  # signals on the tiny Llama
NONMEMBERS_MORE = ["--corpus", "--nonmembers", "--per-domain", "2"]  # more texts than stored


LATE = ["--victim", "nosuch-model"]  # an unknown victim: refused after every input check (exit 3)
RUN = [*MODELS, "--methods", "ps_base", "--lengths", "30"]  # a whole run on the parrots
DIVERGE = [*MODELS, "--lengths", "30", "--method-option", "divergence.samples=1"]

CASES: dict[tuple[str, str, tuple[str, ...]], list[Case]] = {
    # --- loaders: a dataset's, and a reference corpus's own options -------------------------
    ("memprobe_core/snippets/loaders.py", "_decode_error", ("encoding",)): [
        Case(
            lambda t: _audit(t, str(_latin1(t)), *LATE),
            lambda t: _audit(t, str(_latin1(t)), "--encoding", "latin-1", *LATE),
            "is not valid utf-8",
            "--encoding 'latin-1'",
        ),
        Case(  # DC-PDD's corpus: its own flag (--encoding never reached it)
            lambda t: _audit(t, str(_rows(t)), "--dc-pdd-corpus", str(_latin1(t)), *RUN),
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--dc-pdd-corpus",
                str(_latin1(t)),
                "--dc-pdd-encoding",
                "latin-1",
                *RUN,
            ),
            "is not valid utf-8",
            "--dc-pdd-encoding 'latin-1'",
        ),
        Case(  # divergence's corpus: its own method option
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--methods",
                "divergence",
                "--method-option",
                f"divergence.reference_corpus={_latin1(t)}",
                *DIVERGE,
            ),
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--methods",
                "divergence",
                "--method-option",
                f"divergence.reference_corpus={_latin1(t)}",
                "--method-option",
                "divergence.reference_encoding=latin-1",
                *DIVERGE,
            ),
            "is not valid utf-8",
            "--method-option divergence.reference_encoding=latin-1",
        ),
    ],
    ("memprobe_core/snippets/loaders.py", "_codec", ("encoding",)): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--encoding", "rot13", *LATE),
            lambda t: _audit(t, str(_rows(t)), "--encoding", "utf-8", *LATE),
            "is not a text encoding",
            "--encoding 'utf-8'",
        ),
        Case(
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--dc-pdd-corpus",
                str(_rows(t, "c.jsonl")),
                "--dc-pdd-encoding",
                "rot13",
                *RUN,
            ),
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--dc-pdd-corpus",
                str(_rows(t, "c.jsonl")),
                "--dc-pdd-encoding",
                "utf-8",
                *RUN,
            ),
            "is not a text encoding",
            "--dc-pdd-encoding 'utf-8'",
        ),
    ],
    ("memprobe_core/snippets/loaders.py", "_check_size", ("max_bytes",)): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--max-bytes", "100", *LATE),
            lambda t: _audit(t, str(_rows(t)), "--max-bytes", "100000", *LATE),
            "the limit is",
            "--max-bytes",
        ),
        Case(  # an oversized DC-PDD corpus: --dc-pdd-max-bytes (--max-bytes never reached it)
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--dc-pdd-corpus",
                str(_rows(t, "c.jsonl")),
                "--dc-pdd-max-bytes",
                "100",
                *RUN,
            ),
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--dc-pdd-corpus",
                str(_rows(t, "c.jsonl")),
                "--dc-pdd-max-bytes",
                "100000",
                *RUN,
            ),
            "the limit is",
            "--dc-pdd-max-bytes",
        ),
        Case(
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--methods",
                "divergence",
                "--method-option",
                f"divergence.reference_corpus={_rows(t, 'c.jsonl')}",
                "--method-option",
                "divergence.reference_max_bytes=100",
                *DIVERGE,
            ),
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--methods",
                "divergence",
                "--method-option",
                f"divergence.reference_corpus={_rows(t, 'c.jsonl')}",
                "--method-option",
                "divergence.reference_max_bytes=100000",
                *DIVERGE,
            ),
            "the limit is",
            "--method-option divergence.reference_max_bytes=",
        ),
    ],
    ("memprobe_core/snippets/loaders.py", "TooManySnippets.__init__", ("limit", "max_snippets")): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--max-snippets", "1", *LATE),
            lambda t: _audit(t, str(_rows(t)), "--max-snippets", "3", *LATE),
            "holds more than 1 row",
            "--max-snippets",
        ),
    ],
    ("memprobe_core/snippets/loaders.py", "load_reference_corpus", ("max_texts",)): [
        Case(  # too many texts in DC-PDD's corpus: --dc-pdd-max-texts
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--dc-pdd-corpus",
                str(_rows(t, "c.jsonl")),
                "--dc-pdd-max-texts",
                "1",
                *RUN,
            ),
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--dc-pdd-corpus",
                str(_rows(t, "c.jsonl")),
                "--dc-pdd-max-texts",
                "3",
                *RUN,
            ),
            "holds more than 1 text(s)",
            "--dc-pdd-max-texts",
        ),
    ],
    ("memprobe_core/snippets/loaders.py", "_load", ("encoding",)): [
        Case(
            lambda t: _audit(t, str(_parquet(t)), "--encoding", "latin-1", *LATE),
            lambda t: _audit(t, str(_parquet(t)), *LATE),
            "does not apply to .parquet",
            "--encoding",
        ),
    ],
    # --- memprobe audit's flags -------------------------------------------------------------
    ("memprobe_core/cli/audit.py", "audit_methods", ("--methods", "--verbatim-only")): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--verbatim-only", "--methods", "ps_base", *LATE),
            lambda t: _audit(t, str(_rows(t)), "--verbatim-only", *LATE),
            "--verbatim-only runs the method",
            "drop --methods",
        ),
    ],
    ("memprobe_core/cli/audit.py", "_check_flags_apply", ("--corpus",)): [
        Case(
            lambda t: _audit(t, "--corpus", "--encoding", "latin-1", *LATE),
            lambda t: _audit(t, "--corpus", *LATE),
            "--encoding applies to a dataset file, not to --corpus",
            "leave it out",
        ),
        Case(
            lambda t: _audit(t, str(_rows(t)), "--per-domain", "2", *LATE),
            lambda t: _audit(t, str(_rows(t)), "--limit", "2", *LATE),
            "--per-domain applies to --corpus",
            "--limit N",
        ),
    ],
    (
        "memprobe_core/cli/audit.py",
        "_check_flags_apply",
        ("--corpus", "--label-column", "--nonmembers"),
    ): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--nonmembers", *LATE),
            lambda t: _audit(t, "--corpus", "--nonmembers", *LATE),
            "--nonmembers adds generated non-members",
            "use it with --corpus",
        ),
    ],
    ("memprobe_core/cli/audit.py", "_check_flags_apply", ("--canaries", "--corpus")): [
        Case(  # with --corpus it gets to the canary settings (--per-domain 1: too few)
            lambda t: _audit(t, str(_rows(t)), "--canaries"),
            lambda t: _audit(t, "--corpus", "--canaries", "--per-domain", "1"),
            "--canaries fine-tunes the embedded victim",
            "use it with --corpus",
        ),
    ],
    (
        "memprobe_core/cli/audit.py",
        "_check_flags_apply",
        ("--corpus", "--dated-split", "--label-column"),
    ): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--dated-split", *LATE),
            lambda t: _audit(t, "--corpus", "--dated-split", *LATE),
            "--dated-split is a labelled selection",
            "use it with --corpus",
        ),
    ],
    ("memprobe_core/cli/audit.py", "_check_flags_apply", ("--txt-mode",)): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--txt-mode", "blocks", *LATE),
            lambda t: _audit(t, str(_rows(t)), *LATE),
            "--txt-mode applies to .txt datasets only",
            "leave it out",
        ),
    ],
    ("memprobe_core/cli/audit.py", "_canary_settings", ("--canaries",)): [
        Case(  # with the clash left out it gets to the next check (--canary-epochs 0)
            lambda t: _audit(t, "--corpus", "--canaries", "--canary-epochs", "0", *LATE),
            lambda t: _audit(t, "--corpus", "--canaries", "--canary-epochs", "0"),
            "--canaries brings its own labels",
            "leave out --victim",
        ),
    ],
    ("memprobe_core/cli/audit.py", "_canary_settings", ("--canaries", "--domains")): [
        Case(
            lambda t: _audit(
                t, "--corpus", "--canaries", "--domains", "legal", "code", "--canary-epochs", "0"
            ),
            lambda t: _audit(
                t, "--corpus", "--canaries", "--domains", "legal", "--canary-epochs", "0"
            ),
            "--canaries fine-tunes on one domain",
            "--domains legal",
        ),
    ],
    ("memprobe_core/cli/audit.py", "_snippets", ("--canaries", "--canary-epochs")): [
        Case(
            lambda t: _audit(t, "--corpus", "--canary-epochs", "2", *LATE),
            lambda t: _audit(t, "--corpus", "--canary-epochs", "2", "--canaries", *LATE),
            "--canary-epochs sets the fine-tuning of --canaries",
            "add --canaries",
        ),
    ],
    ("memprobe_core/cli/audit.py", "_snippets", ("--corpus",)): [
        Case(
            lambda t: _audit(t, *LATE),
            lambda t: _audit(t, "--corpus", *LATE),
            "give a dataset file or --corpus",
            "--corpus",
        ),
    ],
    ("memprobe_core/cli/audit.py", "_snippets", ("--dated-split", "--domains", "--nonmembers")): [
        Case(
            lambda t: _audit(t, "--corpus", "--dated-split", "--nonmembers", *LATE),
            lambda t: _audit(t, "--corpus", "--dated-split", *LATE),
            "--dated-split has its own members",
            "leave out --nonmembers",
        ),
    ],
    ("memprobe_core/cli/audit.py", "dc_pdd_reading", ("--dc-pdd-corpus",)): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--dc-pdd-encoding", "latin-1", *LATE),
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--dc-pdd-encoding",
                "latin-1",
                "--dc-pdd-corpus",
                str(_latin1(t)),
                *LATE,
            ),
            "--dc-pdd-encoding says how the --dc-pdd-corpus file is read",
            "add --dc-pdd-corpus FILE",
        ),
    ],
    (
        "memprobe_core/cli/audit.py",
        "with_dc_pdd",
        ("--dc-pdd-cap", "--dc-pdd-corpus", "--dc-pdd-nonmembers"),
    ): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--dc-pdd-cap", "0.02", *RUN),
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--dc-pdd-cap",
                "0.02",
                "--dc-pdd-corpus",
                str(_rows(t, "c.jsonl")),
                *RUN,
            ),
            "--dc-pdd-cap applies to DC-PDD",
            "add --dc-pdd-corpus FILE",
        ),
    ],
    (
        "memprobe_core/cli/audit.py",
        "with_dc_pdd",
        ("--dc-pdd-corpus", "--dc-pdd-nonmembers", "--no-signals"),
    ): [
        Case(
            lambda t: _audit(
                t, str(_rows(t)), "--no-signals", "--dc-pdd-corpus", str(_rows(t, "c.jsonl")), *RUN
            ),
            lambda t: _audit(t, str(_rows(t)), "--dc-pdd-corpus", str(_rows(t, "c.jsonl")), *RUN),
            "DC-PDD is a membership signal and --no-signals",
            "leave out one of --no-signals",
        ),
    ],
    # --- the shared flags ---------------------------------------------------------------------
    ("memprobe_core/cli/common.py", "parse_method_option", ("--method-option", "gcg.top_k")): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--method-option", "gcg", *LATE),
            lambda t: _audit(t, str(_rows(t)), "--method-option", "gcg.top_k=64", *LATE),
            "write METHOD.FIELD=VALUE",
            "gcg.top_k=64",
        ),
    ],
    ("memprobe_core/cli/common.py", "model_names", ("--api-key-env",)): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--api-key-env", "sk-abc123-def", *LATE),
            lambda t: _audit(t, str(_rows(t)), "--api-key-env", "OPENAI_API_KEY", *LATE),
            "is not a variable name",
            "OPENAI_API_KEY",
        ),
    ],
    ("memprobe_core/cli/common.py", "model_names", ("--api-key-env", "--base-url")): [
        Case(
            lambda t: _audit(
                t, str(_rows(t)), "--base-url", "http://user:secret@127.0.0.1:9/v1", *LATE
            ),
            lambda t: _audit(t, str(_rows(t)), "--base-url", "http://127.0.0.1:9/v1", *LATE),
            "--base-url holds a password",
            "--api-key-env",
        ),
    ],
    ("memprobe_core/cli/common.py", "parse_method_option", ("--method-option",)): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--method-option", "gcg.nosuch=1", *LATE),
            lambda t: _audit(t, str(_rows(t)), "--method-option", "gcg.top_k=1", *LATE),
            "gcg has no option 'nosuch'; use",
            "top_k",
        ),
    ],
    # --- memprobe document --------------------------------------------------------------------
    ("memprobe_core/cli/documents.py", "run_document", ("--builtin", "--resume", "--show")): [
        Case(
            lambda t: _document(t, *LATE),
            lambda t: _document(t, str(_rows(t, "doc.txt")), *LATE),
            "give exactly one of",
            "a DOCUMENT file",
        ),
    ],
    ("memprobe_core/cli/documents.py", "_refuse_unused_flags", ("--show", "--victim")): [
        Case(  # without --victim it gets to the stored run (none in an empty store)
            lambda t: _document(t, "--show", "1", "--victim", "test-v"),
            lambda t: _document(t, "--show", "1"),
            "--victim does not apply to --show",
            "a stored run keeps the victim",
        ),
    ],
    ("memprobe_core/cli/documents.py", "_refuse_unused_flags", ("--mode",)): [
        Case(
            lambda t: _document(t, "--show", "1", "--mode", "continue"),
            lambda t: _document(t, "--show", "1"),
            "--mode does not apply to --show",
            "keeps its options",
        ),
    ],
    ("memprobe_core/cli/documents.py", "_refuse_unused_flags", ("--executor", "--show")): [
        Case(
            lambda t: _document(
                t, str(_rows(t, "doc.txt")), "--mode", "continue", "--executor", "ray", *LATE
            ),
            lambda t: _document(t, str(_rows(t, "doc.txt")), "--mode", "continue", *LATE),
            "--executor ray spreads a map's windows",
            "a continuation asks turn after turn",
        ),
    ],
    ("memprobe_core/cli/documents.py", "_refuse_endpoint_flags", ("--show",)): [
        Case(
            lambda t: _document(t, "--show", "1", "--base-url", "http://127.0.0.1:9/v1"),
            lambda t: _document(t, "--show", "1"),
            "--base-url does not apply to --show",
            "--base-url",
        ),
    ],
    (
        "memprobe_core/cli/documents.py",
        "_refuse_endpoint_flags",
        ("--backend", "--resume", "--show"),
    ): [
        Case(
            lambda t: _document(t, "--resume", "1", "--backend", "openai"),
            lambda t: _document(t, "--resume", "1"),
            "--backend does not apply to --resume",
            "--backend",
        ),
    ],
    (
        "memprobe_core/cli/documents.py",
        "_refuse_endpoint_flags",
        ("--base-url", "--resume", "--show", "--switch-endpoint"),
    ): [
        Case(  # with --switch-endpoint it gets to the stored run (none in an empty store)
            lambda t: _document(t, "--resume", "1", "--base-url", "http://127.0.0.1:9/v1"),
            lambda t: _document(
                t, "--resume", "1", "--base-url", "http://127.0.0.1:9/v1", "--switch-endpoint"
            ),
            "--base-url does not apply to --resume alone",
            "add --switch-endpoint",
        ),
    ],
    (
        "memprobe_core/cli/documents.py",
        "_refuse_endpoint_flags",
        ("--base-url", "--resume", "--switch-endpoint"),
    ): [
        Case(
            lambda t: _document(t, "--resume", "1", "--switch-endpoint"),
            lambda t: _document(
                t, "--resume", "1", "--base-url", "http://127.0.0.1:9/v1", "--switch-endpoint"
            ),
            "--switch-endpoint goes with --resume RUN and --base-url URL",
            "--base-url URL",
        ),
    ],
    # --- memprobe infer -----------------------------------------------------------------------
    ("memprobe_core/cli/infer.py", "_check_lengths", ("--lengths",)): [
        Case(
            lambda t: _infer(t, "--split-tokenizer", "whitespace", "--lengths", "400"),
            lambda t: _infer(t, "--split-tokenizer", "whitespace", "--lengths", "30"),
            "have fewer than 400 words",
            "give a shorter --lengths",
        ),
    ],
    (
        "memprobe_core/cli/release.py",
        "_check_fits_audit",
        ("--canaries", "--dated-split", "--nonmembers"),
    ): [
        Case(
            lambda t: _audit(t, "--corpus", "--policy", str(_policy(t, "max_auroc = 0.9")), *LATE),
            lambda t: _audit(
                t,
                "--corpus",
                "--nonmembers",
                "--policy",
                str(_policy(t, "max_auroc = 0.9")),
                *LATE,
            ),
            "limits AUROC",
            "--nonmembers",
        ),
    ],
    ("memprobe_core/release/gate.py", "check_baseline_use", ("--baseline",)): [
        Case(  # with --baseline it gets to reading that run (none in an empty store)
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--policy",
                str(_policy(t, "mean_mem = 0.1", "increase")),
                *LATE,
            ),
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--policy",
                str(_policy(t, "mean_mem = 0.1", "increase")),
                "--baseline",
                "1",
                *LATE,
            ),
            "sets [increase] limits",
            "--baseline RUN",
        ),
    ],
    ("memprobe_core/membership/recall.py", "with_recall_prefixes", ("recall_shots",)): [
        Case(
            lambda t: _audit(t, str(_labelled(t)), "--recall-shots", "2", *RUN),
            lambda t: _audit(t, str(_labelled(t)), "--recall-shots", "1", *RUN),
            "ReCaLL puts 2 labelled members in front of every text",
            "--recall-shots 2",
        ),
    ],
    # --- memprobe corpus ----------------------------------------------------------------------
    ("memprobe_core/cli/corpus.py", "run", ("--export", "--show")): [
        Case(
            lambda t: ["corpus", "--show", "legal:mit-33338842", "--export", str(t / "x.csv")],
            lambda t: ["corpus", "--show", "legal:mit-33338842"],
            "give one of them",
            "--export",
        ),
    ],
    ("memprobe_core/cli/corpus.py", "run", ("--build", "--seed")): [
        Case(
            lambda t: ["corpus", "--seed", "3"],
            lambda t: ["corpus", "nonmembers", "--seed", "3"],
            "--build and --seed apply to the non-member set",
            "memprobe corpus nonmembers --build",
        ),
    ],
    ("memprobe_core/cli/corpus.py", "_nonmembers", ("--build", "--seed")): [
        Case(  # with --build it gets to the next check (--count 0)
            lambda t: ["corpus", "nonmembers", "--seed", "3", "--count", "0"],
            lambda t: ["corpus", "nonmembers", "--build", "--seed", "3", "--count", "0"],
            "--seed only applies with --build",
            "--build --seed N",
        ),
    ],
    # --- memprobe probe -----------------------------------------------------------------------
    ("memprobe_core/cli/probe.py", "_snippet", ("--corpus-id", "--file")): [
        Case(
            lambda t: ["--store", str(t / "runs.sqlite"), "probe", *LATE],
            lambda t: [
                "--store",
                str(t / "runs.sqlite"),
                "probe",
                "--corpus-id",
                "legal:mit-33338842",
                *LATE,
            ],
            "give exactly one snippet",
            "--corpus-id ID",
        ),
    ],
    # --- gates --------------------------------------------------------------------------------
    ("memprobe_core/cli/release.py", "read_gate_flags", ("--baseline", "--junit", "--policy")): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--junit", str(t / "j.xml"), *LATE),
            lambda t: _audit(
                t, str(_rows(t)), "--junit", str(t / "j.xml"), "--policy", str(_policy(t)), *LATE
            ),
            "--baseline and --junit belong to a gate",
            "give --policy FILE too",
        ),
    ],
    ("memprobe_core/cli/release.py", "_check_fits_audit", ("--no-signals",)): [
        Case(
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--no-signals",
                "--policy",
                str(_policy(t, "max_auroc = 0.9")),
                *LATE,
            ),
            lambda t: _audit(
                t, str(_rows(t)), "--policy", str(_policy(t, "max_auroc = 0.9")), *LATE
            ),
            "limits AUROC, which --no-signals turns off",
            "--no-signals",
        ),
    ],
    ("memprobe_core/cli/release.py", "_check_bounds_measured", ("--no-pz",)): [
        Case(  # the remedy "drop --no-pz" gets past the check to the run
            lambda t: _audit(
                t, str(_rows(t)), "--no-pz", "--policy", str(_policy(t, "min_bits = 10")), *LATE
            ),
            lambda t: _audit(t, str(_rows(t)), "--policy", str(_policy(t, "min_bits = 10")), *LATE),
            "measured beside p_z, which --no-pz turns off",
            "drop --no-pz",
        ),
    ],
    # --- method options and signals ---------------------------------------------------------
    (
        "memprobe_core/attacks/acr.py",
        "ACROptions.__post_init__",
        ("acr.max_tokens", "acr.min_tokens"),
    ): [
        Case(
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--method-option",
                "acr.max_tokens=2",
                "--method-option",
                "acr.min_tokens=5",
                *LATE,
            ),
            lambda t: _audit(
                t,
                str(_rows(t)),
                "--method-option",
                "acr.max_tokens=5",
                "--method-option",
                "acr.min_tokens=5",
                *LATE,
            ),
            "--method-option acr.max_tokens=2: give at least",
            "acr.min_tokens=5",
        ),
    ],
    ("memprobe_core/audit/audit.py", "start_audit", ("--no-signals",)): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--methods", "signals", "--no-signals", *DIVERGE),
            lambda t: _audit(t, str(_rows(t)), "--methods", "signals", *DIVERGE),
            "they are turned off",
            "(--no-signals): turn them on",
        ),
    ],
    ("memprobe_core/models/dtypes.py", "parse_dtype_flags", ("--dtype",)): [
        Case(
            lambda t: _audit(t, str(_rows(t)), "--dtype", "victim=float8", *LATE),
            lambda t: _audit(t, str(_rows(t)), "--dtype", "victim=float32", *LATE),
            "unknown dtype 'float8'",
            "use one of auto, bfloat16, float16, float32",
        ),
        Case(
            lambda t: _audit(t, str(_rows(t)), "--dtype", "victm=float32", *LATE),
            lambda t: _audit(t, str(_rows(t)), "--dtype", "victim=float32", *LATE),
            "this command has no role 'victm'",
            "its roles are victim",
        ),
    ],
    # --- the non-member set and the dated split ----------------------------------------------
    ("memprobe_core/cli/corpus.py", "_nonmembers", ("--count",)): [
        Case(
            lambda t: ["corpus", "nonmembers", "--count", "0"],
            lambda t: ["corpus", "nonmembers", "--count", "1"],
            "--count 0: give 1 to",
            "texts per domain",
        ),
    ],
    ("memprobe_core/cli/corpus.py", "_nonmembers", ("--domain",)): [
        Case(
            lambda t: ["corpus", "nonmembers", "--domain", "poetry"],
            lambda t: ["corpus", "nonmembers", "--domain", "legal"],
            "--domain poetry: the non-member set has",
            "'legal', 'code'",
        ),
    ],
    ("memprobe_core/snippets/nonmembers.py", "generate_text", ("--build",)): [
        Case(  # a set stored by an older generator, asked for more texts than it stores
            lambda t: _nonmember_set(t, version=0) or _audit(t, *NONMEMBERS_MORE, *LATE),
            lambda t: _nonmember_set(t, version=0) or _rebuilt(_audit(t, *NONMEMBERS_MORE, *LATE)),
            "non-member generator version 0 is not this code's",
            "memprobe corpus nonmembers --build",
        ),
    ],
    ("memprobe_core/snippets/nonmembers.py", "read", ("--build",)): [
        Case(
            lambda t: _nonmember_set(t, junk=True) or ["corpus", "nonmembers"],
            lambda t: _nonmember_set(t, junk=True) or _rebuilt(["corpus", "nonmembers"]),
            "is unreadable",
            "rebuild it: memprobe corpus nonmembers --build",
        ),
        Case(
            lambda t: _nonmember_set(t, junk=True) or _audit(t, "--corpus", "--nonmembers", *LATE),
            lambda t: (
                _nonmember_set(t, junk=True)
                or _rebuilt(_audit(t, "--corpus", "--nonmembers", *LATE))
            ),
            "is unreadable",
            "rebuild it: memprobe corpus nonmembers --build",
        ),
    ],
    ("memprobe_core/snippets/dated.py", "dated_split", ("--label-column", "--nonmembers")): [
        Case(
            lambda t: _audit(t, "--corpus", "--dated-split", *LATE),
            lambda t: _audit(t, "--corpus", "--nonmembers", *LATE),
            "the dated split is empty",
            "use --nonmembers",
            setup=_no_changelogs,
        ),
        Case(
            lambda t: _audit(t, "--corpus", "--dated-split", *LATE),
            lambda t: _audit(t, str(_labelled(t)), "--label-column", "label", *LATE),
            "the dated split is empty",
            "a labelled file with --label-column",
            setup=_no_changelogs,
        ),
    ],
    # --- documents: a map's windows, a continuation's split, a document run's reader ---------
    ("memprobe_core/documents/windows.py", "MapOptions.__post_init__", ("--suffix-tokens",)): [
        Case(
            lambda t: _document(
                t, str(_rows(t, "doc.txt")), "--stride", "50", "--suffix-tokens", "10", *LATE
            ),
            lambda t: _document(
                t, str(_rows(t, "doc.txt")), "--stride", "10", "--suffix-tokens", "10", *LATE
            ),
            "--stride 50: give at most",
            "--suffix-tokens (10)",
        ),
    ],
    ("memprobe_core/documents/windows.py", "cut_windows", ("--prefix-tokens", "--suffix-tokens")): [
        Case(
            lambda t: _document(t, _short(t), "--victim", "tiny"),
            lambda t: _document(
                t,
                _short(t),
                "--victim",
                "tiny",
                "--prefix-tokens",
                "1",
                "--suffix-tokens",
                "1",
                "--stride",
                "1",
            ),
            "fewer than one window of 50 + 50",
            "smaller --prefix-tokens / --suffix-tokens",
            setup=_tiny_victim,
        ),
    ],
    (
        "memprobe_core/documents/continuation.py",
        "split_document",
        ("heldback_words", "opening_words"),
    ): [
        Case(
            lambda t: _document(t, _short(t), "--mode", "continue", "--victim", "test-v"),
            lambda t: _document(
                t,
                _short(t),
                "--mode",
                "continue",
                "--victim",
                "test-v",
                "--opening-words",
                "1",
                "--heldback-words",
                "2",
            ),
            "the document has 3 words",
            "--opening-words + --heldback-words = 300 (give a longer document or smaller values)",
        ),
    ],
    ("memprobe_core/report/build.py", "require_attack_run", ("--show",)): [
        Case(
            lambda t: _continuation(t) or ["--store", str(t / "runs.sqlite"), "report", "1"],
            lambda t: _continuation(t) or _document(t, "--show", "1"),
            "run 1 is a document's continuation",
            "`memprobe document --show 1` prints it",
        ),
    ],
    # --- a gate on a run that cannot answer its limit -----------------------------------------
    ("memprobe_core/release/gate.py", "_absolute_checks", ("--corpus", "--nonmembers")): [
        Case(  # parrots on an unlabelled file: no signals of labelled texts
            lambda t: _gate_after(t, _rows(t), *MODELS),
            lambda t: _gate_after(t, _labelled(t), *TM),
            "limits.max_auroc applies to nothing",
            "a file with a label column, with the signals on",
            setup=_tiny_victim,
        ),
    ],
    # --- memprobe ner -------------------------------------------------------------------------
    ("memprobe_core/ner/audit.py", "_check_config", ("in_conll", "in_names")): [
        Case(
            lambda t: _ner(
                t,
                "--model",
                "tiny-ner",
                "--in-names",
                _lines(t, "in.txt", NER_IN),
                "--in-conll",
                _lines(t, "train.txt", ["-DOCSTART- O"]),
                "--out-names",
                _lines(t, "out.txt", NER_OUT),
            ),
            lambda t: _ner(
                t,
                "--model",
                "tiny-ner",
                "--in-names",
                _lines(t, "in.txt", NER_IN),
                "--out-names",
                _lines(t, "out.txt", NER_OUT),
            ),
            "give in-train names",
            "not both",
            setup=_tiny_ner_model,
        ),
    ],
    ("memprobe_core/ner/audit.py", "_names", ("in_conll", "in_names", "out_names")): [
        Case(  # a model folder has no name lists; with them it gets to loading the folder
            lambda t: _ner(t, "--model", str(t)),
            lambda t: _ner(
                t,
                "--model",
                str(t),
                "--in-names",
                _lines(t, "in.txt", NER_IN),
                "--out-names",
                _lines(t, "out.txt", NER_OUT),
            ),
            "has no built-in name lists",
            "out-of-train names",
        ),
    ],
}


def _policy(tmp: Path, line: str = "max_mean_mem = 0.9", table: str = "limits") -> Path:
    path = tmp / "policy.toml"
    path.write_text(f"[{table}]\n{line}\n", encoding="utf-8")
    return path


def _labelled(tmp: Path) -> Path:
    path = tmp / "labelled.jsonl"
    rows = [
        {"text": f"{WORDS} {label} {i}", "label": label}
        for label in ("member", "nonmember")
        for i in range(2)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _document(tmp: Path, *args: str) -> list[str]:
    return ["--store", str(tmp / "runs.sqlite"), "document", *args]


def _infer(tmp: Path, *args: str) -> list[str]:
    suspect, heldout = _rows(tmp, "suspect.jsonl", 4), tmp / "heldout.jsonl"
    heldout.write_text(
        "".join(json.dumps({"text": f"{WORDS} other {i}"}) + "\n" for i in range(4)),
        encoding="utf-8",
    )
    return [
        "--store",
        str(tmp / "runs.sqlite"),
        "infer",
        str(suspect),
        "--heldout",
        str(heldout),
        "--victim",
        "test-v",
        *args,
    ]


@dataclass(frozen=True)
class LibraryCase:
    """A message only the library can reach (the command line checks the value first, or has
    no flag for it): ``fail(tmp)`` raises it, ``fixed(tmp)`` applies the remedy it names."""

    fail: Callable[[Path], object]
    fixed: Callable[[Path], object]
    says: str
    names: str


def _load(tmp: Path, **spec: object) -> object:
    from memprobe_core.snippets.loaders import LoadSpec, load_snippets

    return load_snippets(_rows(tmp), LoadSpec(**spec))  # type: ignore[arg-type]


def _scheme(**given: object) -> object:
    from memprobe_core.measuring.sampler import SamplingScheme

    return SamplingScheme(**given)  # type: ignore[arg-type]


def _near_verbatim_budget(edits: object) -> object:
    from memprobe_core.measuring.near_verbatim import edit_budget

    return edit_budget(edits, 50)  # type: ignore[arg-type]


def _near_verbatim_beams(beams: object) -> object:
    from memprobe_core.measuring.near_verbatim import check_beam_width

    return check_beam_width(beams)  # type: ignore[func-returns-value]


def _ray(**given: object) -> object:
    from memprobe_core.executors.ray import RayOptions

    return RayOptions(**given)  # type: ignore[arg-type]


def _executor(name: str, **given: object) -> object:
    from memprobe_core.executors import make_executor

    return make_executor(name, **given)  # type: ignore[arg-type]


def _prefix(ratio: float) -> object:
    from memprobe_core.snippets.split import prefix_size

    return prefix_size(200, ratio)


def _spec_check(**given: object) -> object:
    from memprobe_core.snippets.loaders import LoadSpec

    return LoadSpec(**given).check()  # type: ignore[arg-type]


def _openai(**given: object) -> object:
    from memprobe_core.models.openai.generator import OpenAIGenerator

    return OpenAIGenerator("m", **given)  # type: ignore[arg-type]


def _urls(base_url: object) -> object:
    from memprobe_core.models.openai.generator import parse_base_urls

    return parse_base_urls(base_url)  # type: ignore[arg-type]


def _answer(body: bytes) -> object:
    from memprobe_core.models.openai.parse import decode_json

    return decode_json(body, "http://127.0.0.1:9/v1")


# What the base URL of a web page (not an API) answers: deeper than any API answer.
DEEP = b"[" * 100 + b"]" * 100
# What an OpenAI-compatible API answers.
COMPLETION = json.dumps({"id": "c1", "object": "text_completion", "choices": []}).encode()


def _schedule(min_tokens: int, max_tokens: int) -> object:
    from memprobe_core.attacks.acr import length_schedule

    return length_schedule(min_tokens, 1, max_tokens)


def _ner_audit(dev_fraction: float) -> object:
    """A NER audit on the tiny random BERT (registered for the call only)."""
    from memprobe_core.ner.audit import NerAuditConfig, run_ner_audit

    with pytest.MonkeyPatch.context() as mp:
        _tiny_ner_model(mp, Path())
        config = NerAuditConfig(
            models=("tiny-ner",),
            prompts=NER_PROMPTS,
            dev_fraction=dev_fraction,
            importance_steps=0,
            attention_pairs=0,
        )
        return run_ner_audit(config)


def _ner_scores(pairs: bool, batch_size: int = 8) -> object:
    from memprobe_core.ner.names import build_pairs
    from memprobe_core.ner.scoring import score_prompts
    from tests.helpers.ner_models import tiny_ner

    given = build_pairs(NER_IN, NER_OUT, max_pairs=2) if pairs else []
    return score_prompts(tiny_ner(seed=0), NER_PROMPTS[:1], given, batch_size=batch_size)


def _dev_split(dev_fraction: float) -> object:
    from memprobe_core.ner.names import build_pairs, split_pairs

    return split_pairs(build_pairs(NER_IN, NER_OUT), dev_fraction=dev_fraction)


def _p_z(**scheme: object) -> object:
    """p_z of a black-box victim whose server scores text (each token's own log-prob only)."""
    from memprobe_core.measuring.sampler import SamplingScheme
    from memprobe_core.membership.extraction_probability import suffix_log_probs
    from memprobe_core.models.base import TextLogprobs
    from tests.helpers.scripted_models import make_split, parrot

    class Scored(type(parrot("v", "x"))):  # type: ignore[misc]
        @property
        def scores_text(self) -> bool:
            return True

        def text_logprobs(self, texts):  # type: ignore[no-untyped-def]
            return [
                TextLogprobs(tuple(-1.0 for _ in t.split()), tuple(range(len(t.split()))))
                for t in texts
            ]

    victim = Scored(["x"])
    return suffix_log_probs(victim, make_split(), SamplingScheme(**scheme))  # type: ignore[arg-type]


LIBRARY_CASES: dict[tuple[str, str, tuple[str, ...]], list[LibraryCase]] = {
    ("memprobe_core/snippets/loaders.py", "LoadSpec.check", ("txt_mode",)): [
        LibraryCase(
            lambda t: _spec_check(txt_mode="lines"),
            lambda t: _spec_check(txt_mode="blocks"),
            "txt_mode 'lines' is unknown",
            "use one of",
        )
    ],
    ("memprobe_core/snippets/loaders.py", "_load", ("txt_mode",)): [
        LibraryCase(
            lambda t: _load(t, txt_mode="blocks"),
            lambda t: _load(t),
            "applies to .txt files only",
            "leave it out",
        )
    ],
    ("memprobe_core/measuring/sampler.py", "SamplingScheme.__post_init__", ("pz_temperature",)): [
        LibraryCase(
            lambda t: _scheme(temperature=-1.0),
            lambda t: _scheme(temperature=1.0),
            "pz_temperature=-1.0",
            "e.g. 1",
        )
    ],
    ("memprobe_core/measuring/sampler.py", "SamplingScheme.__post_init__", ("pz_top_k",)): [
        LibraryCase(
            lambda t: _scheme(top_k=-1), lambda t: _scheme(top_k=40), "pz_top_k=-1", "e.g. 40"
        )
    ],
    ("memprobe_core/measuring/sampler.py", "SamplingScheme.__post_init__", ("pz_top_p",)): [
        LibraryCase(
            lambda t: _scheme(top_p=0.0), lambda t: _scheme(top_p=0.95), "pz_top_p=0.0", "e.g. 0.95"
        )
    ],
    ("memprobe_core/measuring/near_verbatim.py", "check_edits", ("near_verbatim_edits",)): [
        LibraryCase(
            lambda t: _near_verbatim_budget(1.5),
            lambda t: _near_verbatim_budget(2),
            "near_verbatim_edits=1.5",
            "e.g. 5",
        )
    ],
    ("memprobe_core/measuring/near_verbatim.py", "check_beam_width", ("near_verbatim_beams",)): [
        LibraryCase(
            lambda t: _near_verbatim_beams(0),
            lambda t: _near_verbatim_beams(20),
            "near_verbatim_beams=0",
            "from 1 to",
        )
    ],
    ("memprobe_core/executors/ray.py", "RayOptions.__post_init__", ("max_attempts",)): [
        LibraryCase(
            lambda t: _ray(max_attempts=0),
            lambda t: _ray(max_attempts=1),
            "max_attempts=0",
            "give 1 or more",
        )
    ],
    ("memprobe_core/executors/ray.py", "RayOptions.__post_init__", ("prefetch_window",)): [
        LibraryCase(
            lambda t: _ray(prefetch_window=0),
            lambda t: _ray(prefetch_window=1),
            "prefetch_window=0",
            "give 1 or more",
        )
    ],
    ("memprobe_core/executors/__init__.py", "make_executor", ("executor",)): [
        LibraryCase(
            lambda t: _executor("local", workers=2),
            lambda t: _executor("local"),
            "applies to executor='ray' only",
            "drop the option",
        )
    ],
    ("memprobe_core/snippets/split.py", "prefix_size", ("prefix_ratio",)): [
        LibraryCase(
            lambda t: _prefix(1.5),
            lambda t: _prefix(0.5),
            "prefix_ratio 1.5 must be strictly between 0 and 1",
            "prefix_ratio",
        )
    ],
    ("memprobe_core/attacks/acr.py", "length_schedule", ("max_tokens",)): [
        LibraryCase(
            lambda t: _schedule(5, 2),
            lambda t: _schedule(2, 5),
            "no schedule from 5 to 2 tokens",
            "give 1 <= min_tokens <= max_tokens",
        )
    ],
    ("memprobe_core/models/openai/generator.py", "_check_key_env", ("api_key_env",)): [
        LibraryCase(
            lambda t: _openai(api_key_env="sk-abc123"),
            lambda t: _openai(api_key_env="OPENAI_API_KEY"),
            "api_key_env is not an environment-variable name",
            "api_key_env='OPENAI_API_KEY'",
        )
    ],
    ("memprobe_core/models/openai/generator.py", "_normalize_url", ("base_url",)): [
        LibraryCase(
            lambda t: _urls("ftp://127.0.0.1:8000/v1"),
            lambda t: _urls("http://127.0.0.1:8000/v1"),
            "is not an http(s) URL",
            "e.g. http://127.0.0.1:8000/v1",
        )
    ],
    ("memprobe_core/models/openai/generator.py", "parse_base_urls", ("base_url",)): [
        LibraryCase(
            lambda t: _urls([8000]),
            lambda t: _urls(["http://127.0.0.1:8000/v1"]),
            "give URLs as strings",
            "e.g. http://127.0.0.1:8000/v1",
        ),
        LibraryCase(
            lambda t: _urls(" , "),
            lambda t: _urls("http://127.0.0.1:8000/v1"),
            "holds no URL",
            "e.g. http://127.0.0.1:8000/v1",
        ),
        LibraryCase(
            lambda t: _urls("http://127.0.0.1:8000/v1,http://127.0.0.1:8000/v1/"),
            lambda t: _urls("http://127.0.0.1:8000/v1"),
            "lists http://127.0.0.1:8000/v1 twice",
            "list each server once",
        ),
    ],
    ("memprobe_core/models/openai/parse.py", "decode_json", ("base_url",)): [
        LibraryCase(
            lambda t: _answer(DEEP),
            lambda t: _answer(COMPLETION),
            "answered with JSON nested 100 levels deep",
            "check that base_url points at an OpenAI-compatible API",
        )
    ],
    (
        "memprobe_core/membership/extraction_probability.py",
        "suffix_scores",
        ("--pz-temperature", "--pz-top-k", "--pz-top-p"),
    ): [
        LibraryCase(
            lambda t: _p_z(temperature=1.0, top_k=40, top_p=1.0),
            lambda t: _p_z(temperature=1.0, top_k=0, top_p=1.0),
            "returns each token's log-prob, not the whole distribution",
            "--pz-top-k 0 --pz-temperature 1 --pz-top-p 1",
        )
    ],
    ("memprobe_core/ner/audit.py", "NerAuditResult.tau_across_models", ("dev_fraction",)): [
        LibraryCase(
            lambda t: _ner_audit(0.0).tau_across_models("dev"),  # type: ignore[attr-defined]
            lambda t: _ner_audit(0.5).tau_across_models("dev"),  # type: ignore[attr-defined]
            "no dev split",
            "set dev_fraction above 0",
        )
    ],
    ("memprobe_core/ner/audit.py", "NerAuditResult.tau_dev_vs_test", ("dev_fraction",)): [
        LibraryCase(
            lambda t: _ner_audit(0.0).tau_dev_vs_test(),  # type: ignore[attr-defined]
            lambda t: _ner_audit(0.5).tau_dev_vs_test(),  # type: ignore[attr-defined]
            "no dev/test split",
            "set dev_fraction above 0",
        )
    ],
    ("memprobe_core/ner/model.py", "NerModel._batches", ("batch_size",)): [
        LibraryCase(
            lambda t: _ner_scores(pairs=True, batch_size=0),
            lambda t: _ner_scores(pairs=True, batch_size=1),
            "batch_size=0",
            "must be at least 1",
        )
    ],
    ("memprobe_core/ner/names.py", "split_pairs", ("dev_fraction",)): [
        LibraryCase(
            lambda t: _dev_split(1.0),
            lambda t: _dev_split(0.5),
            "dev_fraction=1.0",
            "must be between 0 and 1",
        )
    ],
    ("memprobe_core/ner/scoring.py", "score_prompts", ("in_names", "out_names")): [
        LibraryCase(
            lambda t: _ner_scores(pairs=False),
            lambda t: _ner_scores(pairs=True),
            "no name pairs to score",
            "build them with build_pairs(in_names, out_names)",
        )
    ],
}


# Sites the scan cannot see, since the option they name is a variable (a reference corpus names
# its caller's option): their cases are kept all the same.
DYNAMIC = {("memprobe_core/snippets/loaders.py", "load_reference_corpus", ("max_texts",))}

# Messages that name a flag or option with no case, and why: each remedy is a change to the
# machine itself, which a test cannot make and undo (a case replaces the line).
NOT_COVERED: dict[tuple[str, str, tuple[str, ...]], str] = {
    ("memprobe_core/executors/ray.py", "_connect", ("--head",)): "its remedy starts a Ray "
    "cluster (`ray start --head`, a daemon of several processes) on the machine",
    ("memprobe_core/models/embedded.py", "_require_package", ("--no-deps",)): "its remedy "
    "installs a package (`pip install …`), which a test cannot do, nor uninstall one to provoke it",
    ("memprobe_core/cli/dashboard.py", "run", ("--port",)): "its remedy starts a dashboard "
    "server, which runs until stopped: tests/e2e/test_wheel_dashboard.py provokes the message on "
    "a taken port and serves on a free one",
}


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if "error:" in line]
    return lines[-1] if lines else ""


def _check_of(message: str) -> str:
    """``message`` with the values it quotes taken out (paths, quoted text, numbers): what is
    left names the check. The same check refusing the remedy's value again (``--count 1: give 2
    to …`` after ``--count 0: give 1 to …``) is not further."""
    message = re.sub(r"(?<![\w-])/\S+", "PATH", message)
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "Q", message)
    return re.sub(r"\d[\d,._]*", "N", message)


def test_every_message_naming_a_flag_has_an_entry():
    found = set(sites())
    entered = set(CASES) | set(LIBRARY_CASES) | set(NOT_COVERED)
    missing, stale = sorted(found - entered), sorted(entered - found - DYNAMIC)
    assert not missing, f"messages naming a flag with no entry (add a case): {missing}"
    assert not stale, f"entries no message needs any more (remove them): {stale}"
    assert not (set(CASES) | set(LIBRARY_CASES)) & set(NOT_COVERED)
    assert not set(CASES) & set(LIBRARY_CASES)


@pytest.mark.usefixtures("fake_models")
@pytest.mark.parametrize(
    "key, index",
    [(key, i) for key, cases in CASES.items() for i in range(len(cases))],
    ids=lambda v: (
        f"{v[0].split('/')[-1]}:{v[1]}:{','.join(v[2])}" if isinstance(v, tuple) else str(v)
    ),
)
def test_the_named_remedy_gets_further(tmp_path, monkeypatch, key, index):
    case = CASES[key][index]
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path / "home"))
    if case.setup is not None:
        case.setup(monkeypatch, tmp_path)
    code, err = _run(case.fail(tmp_path))
    refused = _error_line(err)
    assert code != 0 and case.says in refused, err[-2000:]
    assert case.names in refused, f"the message names no {case.names!r}: {refused}"
    (tmp_path / "runs.sqlite").unlink(missing_ok=True)
    code, err = _run(case.fixed(tmp_path))
    after = _error_line(err)
    # Further: done (0), or run with failed units (1), or refused by another, later check.
    assert case.says not in after, (code, after)
    assert code in (0, 1) or _check_of(after) != _check_of(refused), (code, after)


@pytest.mark.parametrize(
    "key, index",
    [(key, i) for key, cases in LIBRARY_CASES.items() for i in range(len(cases))],
    ids=lambda v: (
        f"{v[0].split('/')[-1]}:{v[1]}:{','.join(v[2])}" if isinstance(v, tuple) else str(v)
    ),
)
def test_the_named_remedy_gets_further_in_the_library(tmp_path, key, index):
    from memprobe_core.errors import MemprobeError

    case = LIBRARY_CASES[key][index]
    with pytest.raises((MemprobeError, ValueError)) as refused:
        case.fail(tmp_path)
    assert case.says in str(refused.value) and case.names in str(refused.value)
    try:
        case.fixed(tmp_path)
    except (MemprobeError, ValueError) as exc:  # a later check is further too
        assert case.says not in str(exc)
        assert _check_of(str(exc)) != _check_of(str(refused.value)), str(exc)


# Error messages naming a library argument (`name=`) that `memprobe` has no flag for, and why
# that is right: a programmer's misuse of a library call the command line makes correctly, or
# a file only a test writes. Any other one must become a flag or CLI words on the command line
# (memprobe_core.cli.errors.CLI_FLAGS / CLI_REWORDS).
LIBRARY_ONLY: dict[tuple[str, str], str] = {
    ("memprobe_core/attacks/registry.py", "MethodSpec.__post_init__"): "registering a method",
    ("memprobe_core/documents/perturb.py", "perturb"): "a library call's argument",
    ("memprobe_core/documents/perturb.py", "instruction_attempt"): "a library call's argument",
    ("memprobe_core/documents/perturb.py", "best_of_n_instructions"): "a library call's argument",
    ("memprobe_core/membership/token_stats.py", "calibrated"): "a library call's argument",
    ("memprobe_core/models/base.py", "Generator.generate"): "a backend's generate() arguments",
    ("memprobe_core/models/hf.py", "HFGenerator.__init__"): "the CLI passes a valid batch size",
    ("memprobe_core/models/openai/generator.py", "OpenAIGenerator._check_top_k"): (
        "a method's decoding: no flag sets top-k"
    ),
    ("memprobe_core/models/openai/generator.py", "OpenAIGenerator._ask_with_top_k"): (
        "a method's decoding: no flag sets top-k"
    ),
    ("memprobe_core/models/scripted.py", "load_scripted"): "a scripted model's file (tests)",
    ("memprobe_core/models/vllm_backend.py", "speculative_config"): "set from the CLI's value",
    ("memprobe_core/ner/importance.py", "iterative_importance"): "a library call's argument",
    ("memprobe_core/ner/model.py", "NerModel._attention_model"): "a transformers argument",
    ("memprobe_core/snippets/span_index.py", "SpanIndex.find_spans"): "a library call's argument",
}


def test_no_message_shown_on_the_command_line_names_an_argument_it_cannot_pass():
    from memprobe_core.cli.errors import cli_text
    from tests.unit.cli.remedy_scan import library_names_named

    named = library_names_named(cli_text)
    unreachable = {k: v for k, v in named.items() if k[:2] not in LIBRARY_ONLY}
    assert not unreachable, f"the CLI shows arguments it has no flag for: {unreachable}"
    stale = set(LIBRARY_ONLY) - {k[:2] for k in named}
    assert not stale, f"LIBRARY_ONLY entries no message needs any more: {stale}"


def test_every_command_an_error_names_exists():
    import shlex

    from memprobe_core.cli.main import build_parser
    from tests.unit.cli.remedy_scan import commands_named

    commands = commands_named()
    assert "memprobe document --show RUN" in commands  # the scan reads them
    for command, where in commands.items():
        argv = [("1" if a in ("RUN", "{}") else a) for a in shlex.split(command)[1:]]
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                build_parser().parse_args(argv)
            except SystemExit as exc:  # a command named without its arguments still exists
                said = err.getvalue()
                assert exc.code == 0 or "arguments are required" in said, (
                    f"{where} names `{command}`: {said[-300:]}"
                )


def test_too_large_and_no_echo_messages_name_what_a_cli_user_can_do():
    from memprobe_core.cli.errors import cli_text

    large = (
        "http://h/v1/completions sent a response larger than max_response_bytes=8,388,608 "
        "(8 MiB; 12,000,000 bytes read); lower max_new_tokens or n, or raise max_response_bytes"
    )
    shown = cli_text(large)
    assert "max_response_bytes" not in shown and "max_new_tokens" not in shown, shown
    assert "memprobe's cap for one answer (8,388,608 bytes, 8 MiB" in shown
    assert "nothing on memprobe's side raises that cap" in shown
    echo = "not measured (start it with prompt-logprob support, e.g. vLLM, or pass prompt_logprobs=False)"
    assert cli_text(echo) == "not measured (start it with prompt-logprob support, e.g. vLLM)"
