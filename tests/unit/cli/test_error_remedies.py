"""Every remedy an error names is tested (issue 51, category 7).

:mod:`tests.unit.cli.remedy_scan` finds, in memprobe_core's source, every error message that
names a flag or an option. Each is an entry of :data:`CASES` (a case that provokes it on the
command line, or through the library for a message the command line cannot reach, and the same
case with the named remedy applied, which must get further: no error, or another, later one) or
of :data:`NOT_COVERED` (why it has no case yet). A new message naming a flag fails
:func:`test_every_message_naming_a_flag_has_an_entry` until it has one.
"""

from __future__ import annotations

import contextlib
import io
import json
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
    with the remedy the message names applied (``names``: the flag it names, shown)."""

    fail: Argv
    fixed: Argv
    says: str
    names: str


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
    ("memprobe_core/cli/documents.py", "_refuse_unused_flags", ("--victim",)): [
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
    from memprobe_core.membership.sampler import SamplingScheme

    return SamplingScheme(**given)  # type: ignore[arg-type]


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
    ("memprobe_core/membership/sampler.py", "SamplingScheme.__post_init__", ("pz_temperature",)): [
        LibraryCase(
            lambda t: _scheme(temperature=-1.0),
            lambda t: _scheme(temperature=1.0),
            "pz_temperature=-1.0",
            "e.g. 1",
        )
    ],
    ("memprobe_core/membership/sampler.py", "SamplingScheme.__post_init__", ("pz_top_k",)): [
        LibraryCase(
            lambda t: _scheme(top_k=-1), lambda t: _scheme(top_k=40), "pz_top_k=-1", "e.g. 40"
        )
    ],
    ("memprobe_core/membership/sampler.py", "SamplingScheme.__post_init__", ("pz_top_p",)): [
        LibraryCase(
            lambda t: _scheme(top_p=0.0), lambda t: _scheme(top_p=0.95), "pz_top_p=0.0", "e.g. 0.95"
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
}


# Sites the scan cannot see, since the option they name is a variable (a reference corpus names
# its caller's option): their cases are kept all the same.
DYNAMIC = {("memprobe_core/snippets/loaders.py", "load_reference_corpus", ("max_texts",))}

# Messages that name a flag or option with no case yet, and why (each a debt, counted in the
# report of issue 51; a case replaces the line).
NOT_COVERED: dict[tuple[str, str, tuple[str, ...]], str] = {
    ("memprobe_core/cli/audit.py", "run", ("--dc-pdd-corpus",)): "unreachable from the command "
    "line: the path check of every named file (user_paths) refuses a missing --dc-pdd-corpus "
    "first ('does not exist; check the path')",
    (
        "memprobe_core/attacks/acr.py",
        "ACROptions.__post_init__",
        ("acr.max_tokens", "acr.min_tokens"),
    ): "no case yet (an ACR option pair; the CLI reaches it through --method-option)",
    (
        "memprobe_core/attacks/acr.py",
        "length_schedule",
        ("max_tokens",),
    ): "no case yet (ACR's length schedule)",
    (
        "memprobe_core/audit/audit.py",
        "start_audit",
        ("--no-signals",),
    ): "no case yet (signals-only with --no-signals)",
    (
        "memprobe_core/cli/audit.py",
        "_snippets",
        ("--limit",),
    ): "unreachable from the command line: --limit's range (CLI_SIZE_LIMITS) refuses 0 first, naming --limit too",
    (
        "memprobe_core/cli/corpus.py",
        "_nonmembers",
        ("--count",),
    ): "no case yet (its remedy builds the machine's non-member set)",
    (
        "memprobe_core/cli/corpus.py",
        "_nonmembers",
        ("--domain",),
    ): "no case yet (its remedy builds the machine's non-member set)",
    (
        "memprobe_core/cli/infer.py",
        "run",
        ("--limit",),
    ): "unreachable from the command line: --limit's range (CLI_SIZE_LIMITS) refuses 0 first, naming --limit too",
    (
        "memprobe_core/documents/continuation.py",
        "split_document",
        ("heldback_words", "opening_words"),
    ): "no case yet (a continuation's document split)",
    (
        "memprobe_core/documents/windows.py",
        "MapOptions.__post_init__",
        ("--suffix-tokens",),
    ): "no case yet (a map's window sizes)",
    (
        "memprobe_core/documents/windows.py",
        "cut_windows",
        ("--prefix-tokens", "--suffix-tokens"),
    ): "no case yet (a document shorter than one window)",
    (
        "memprobe_core/executors/ray.py",
        "_connect",
        ("--head",),
    ): "no case yet (needs a Ray cluster address that refuses)",
    (
        "memprobe_core/membership/extraction_probability.py",
        "suffix_log_probs",
        ("--pz-temperature", "--pz-top-k", "--pz-top-p"),
    ): "no case yet (p_z on a victim that cannot give it)",
    ("memprobe_core/models/dtypes.py", "parse_dtype_flags", ("--dtype",)): "no case yet",
    (
        "memprobe_core/models/embedded.py",
        "_require_package",
        ("--no-deps",),
    ): "no case yet (a missing package; its remedy is a pip install)",
    ("memprobe_core/models/openai/generator.py", "_check_key_env", ("api_key_env",)): "no case yet",
    ("memprobe_core/models/openai/generator.py", "_normalize_url", ("base_url",)): "no case yet",
    ("memprobe_core/models/openai/generator.py", "parse_base_urls", ("base_url",)): "no case yet",
    (
        "memprobe_core/models/openai/parse.py",
        "decode_json",
        ("base_url",),
    ): "no case yet (a server answering bad JSON)",
    (
        "memprobe_core/ner/audit.py",
        "NerAuditResult.tau_across_models",
        ("dev_fraction",),
    ): "no case yet (memprobe ner)",
    (
        "memprobe_core/ner/audit.py",
        "NerAuditResult.tau_dev_vs_test",
        ("dev_fraction",),
    ): "no case yet (memprobe ner)",
    (
        "memprobe_core/ner/audit.py",
        "_check_config",
        ("in_conll", "in_names"),
    ): "no case yet (memprobe ner)",
    (
        "memprobe_core/ner/audit.py",
        "_names",
        ("in_conll", "in_names", "out_names"),
    ): "no case yet (memprobe ner)",
    (
        "memprobe_core/ner/model.py",
        "NerModel._batches",
        ("batch_size",),
    ): "no case yet (memprobe ner)",
    ("memprobe_core/ner/names.py", "split_pairs", ("dev_fraction",)): "no case yet (memprobe ner)",
    (
        "memprobe_core/ner/scoring.py",
        "score_prompts",
        ("in_names", "out_names"),
    ): "no case yet (memprobe ner)",
    (
        "memprobe_core/release/gate.py",
        "_absolute_checks",
        ("--corpus", "--nonmembers"),
    ): "no case yet (memprobe gate on a stored unlabelled run)",
    (
        "memprobe_core/report/build.py",
        "require_attack_run",
        ("--show",),
    ): "no case yet (memprobe report of a stored document run)",
    (
        "memprobe_core/snippets/dated.py",
        "dated_split",
        ("--label-column", "--nonmembers"),
    ): "no case yet",
    ("memprobe_core/snippets/nonmembers.py", "generate_text", ("--build",)): "no case yet",
    (
        "memprobe_core/snippets/nonmembers.py",
        "read",
        ("--build",),
    ): "no case yet (an unreadable non-member set)",
}


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if "error:" in line]
    return lines[-1] if lines else ""


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
    code, err = _run(case.fail(tmp_path))
    refused = _error_line(err)
    assert code != 0 and case.says in refused, err[-2000:]
    assert case.names in refused, f"the message names no {case.names!r}: {refused}"
    (tmp_path / "runs.sqlite").unlink(missing_ok=True)
    code, err = _run(case.fixed(tmp_path))
    after = _error_line(err)
    # Further: done (0), or run with failed units (1), or refused by another, later check.
    assert case.says not in after and (code in (0, 1) or after != refused), (code, after)


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
