"""Property-based tests of the other dataset inputs: the DC-PDD and divergence reference corpora,
the ``memprobe infer`` suspect / held-out pair, and ``memprobe audit FILE`` / ``memprobe infer``
end to end (up to the model load).

For any file: the texts come back (non-empty, no lone surrogate), or a ``UsageError`` naming the
file; on the command line exit 2 with one terminal-safe line naming it and no store written, or
the dataset loads and the (absent) model is what fails, exit 3.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from memprobe_core.attacks.divergence import DivergenceOptions, check_reference_corpus
from memprobe_core.audit import SharedTexts, TooFewTexts, inference_snippets
from memprobe_core.cli import main
from memprobe_core.errors import MemprobeError, UsageError
from memprobe_core.measuring import dc_pdd
from memprobe_core.membership.inference import MIN_TEXTS
from memprobe_core.snippets.loaders import LoadSpec, load_snippets
from memprobe_core.snippets.overlap import normal_form
from memprobe_core.snippets.split import MEMBER, NONMEMBER
from tests.fuzz.dataset_files import (
    SURROGATE,
    csv_document,
    hostile_text,
    jsonl_document,
    txt_document,
)

# A model that cannot load: a dataset refused exits 2 before it; one that loaded exits 3 at it.
NO_MODEL = ["--victim", "no/such-model", "--base", "no/such-model", "--backend", "hf"]
EXIT_USAGE, EXIT_MODEL = 2, 3


@st.composite
def corpus_file(draw: st.DrawFn) -> tuple[str, bytes]:
    """A reference corpus or dataset file: a drawn name (format) and hostile content."""
    kind = draw(st.sampled_from(["jsonl", "csv", "txt", "bytes"]))
    if kind == "bytes":
        return draw(st.sampled_from(["b.txt", "b.jsonl", "b.csv", "b.parquet"])), draw(st.binary())
    document = draw({"jsonl": jsonl_document(), "csv": csv_document(), "txt": txt_document()}[kind])
    return f"corpus.{kind}", document.encode("utf-8")


def _written(folder: str, name: str, data: bytes) -> Path:
    path = Path(folder) / name
    path.write_bytes(data)
    return path


def _texts_or_usage_error(call, path: Path) -> list[str] | None:
    """``call()``'s texts, checked; ``None`` when it refused with a ``UsageError`` naming
    ``path``. Any other exception fails the test."""
    try:
        texts = call()
    except MemprobeError as exc:
        assert isinstance(exc, UsageError), f"{type(exc).__name__}: {exc}"
        assert str(path) in str(exc), exc
        event("refused")
        return None
    event("texts")
    assert texts, "an empty corpus must be refused"
    for text in texts:
        assert isinstance(text, str) and text.strip() and not SURROGATE.search(text)
    return texts


# --- DC-PDD's reference corpus ------------------------------------------------------------------


def _loaded_texts(path: Path) -> list[str] | None:
    """The texts the loader reads from a corpus file, no label column read (``None``: it refuses
    the file)."""
    blocks = path.suffix == ".txt"  # a .txt corpus: one text per blank-line-separated block
    spec = LoadSpec(txt_mode="blocks" if blocks else "file", read_labels=False)
    try:
        return [s.text for s in load_snippets(path, spec).snippets]
    except MemprobeError:
        return None


@given(file=corpus_file())
@example(file=("topics.jsonl", b'{"text": "a news story", "label": 2}\n'))
def test_dc_pdd_reference_corpus_gives_the_files_texts_or_names_it(file):
    name, data = file
    with tempfile.TemporaryDirectory() as folder:
        path = _written(folder, name, data)
        texts = _texts_or_usage_error(lambda: dc_pdd.reference_texts(path), path)
        # Exactly the texts the loader reads from the file, refused only when it has none: a
        # corpus's rows are texts, whatever else they carry (a `label` column of topics too).
        assert texts == (_loaded_texts(path) or None)


# --- divergence's reference corpus --------------------------------------------------------------


@given(file=corpus_file())
def test_divergence_reference_corpus_gives_texts_or_names_the_file(file):
    name, data = file
    with tempfile.TemporaryDirectory() as folder:
        path = _written(folder, name, data)
        opts = DivergenceOptions(reference_corpus=str(path))
        _texts_or_usage_error(lambda: [s.text for s in check_reference_corpus(opts)], path)


@given(value=st.one_of(st.text(min_size=1), st.sampled_from(["~", "~/", "/", ".", "~root/x"])))
@example(value="~no-such-user-memprobe/corpus.txt")
@example(value="~\x00")  # the user name's lookup raised ValueError (embedded null byte)
def test_divergence_reference_corpus_path_of_any_text_is_refused_naming_it(
    value, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # an empty folder: no drawn name is a file here
    with pytest.raises(UsageError) as refused:
        check_reference_corpus(DivergenceOptions(reference_corpus=value))
    try:
        named = repr(value) if "\x00" in value else str(Path(value).expanduser())
    except RuntimeError:  # a `~user` with no home directory: named as given
        named = repr(value)
    # A name no file can have (a NUL, a `~` with no home) is refused by the option's own check;
    # any other missing path by the one path check (user_paths), naming the option itself.
    prefixes = (f"divergence reference_corpus {named}", f"divergence.reference_corpus {named}")
    assert str(refused.value).startswith(prefixes), str(refused.value)


# --- dataset inference's suspect / held-out pair ------------------------------------------------


def _set_file(texts: list[str], kind: str) -> tuple[str, bytes]:
    """``texts`` as one set's file of ``kind``."""
    if kind == "jsonl":
        body = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    elif kind == "csv":
        buffer = io.StringIO()
        csv.writer(buffer).writerows([["text"], *[[t] for t in texts]])
        body = buffer.getvalue()
    else:  # .txt, one text per blank-line-separated block
        body = "\n\n".join(texts)
    return f"set.{kind}", SURROGATE.sub("?", body).encode("utf-8")


# Mostly enough texts for the test's halves; held-out texts marked so that the two sets share
# none unless a test gives the same file twice (`share`).
suspect_texts = st.lists(hostile_text, min_size=2, max_size=8)
heldout_texts = st.lists(hostile_text.map("held out: {}".format), min_size=2, max_size=8)
FORMATS = st.sampled_from(["jsonl", "csv", "txt"])
suspect_files = st.tuples(suspect_texts, FORMATS).map(lambda drawn: _set_file(*drawn))
heldout_files = st.tuples(heldout_texts, FORMATS).map(lambda drawn: _set_file(*drawn))


@given(
    suspect=suspect_files, heldout=heldout_files, share=st.sampled_from([False, False, False, True])
)
def test_inference_pair_is_labelled_or_refused_naming_the_set(suspect, heldout, share):
    if share:  # the same file given twice: every text is in both sets
        heldout = suspect
    spec = LoadSpec(txt_mode="blocks", read_labels=False)
    with tempfile.TemporaryDirectory() as folder:
        sets = []
        for which, (name, data) in (("suspect", suspect), ("heldout", heldout)):
            (Path(folder) / which).mkdir()
            path = _written(f"{folder}/{which}", name, data)
            spec_here = spec if path.suffix == ".txt" else LoadSpec(read_labels=False)
            try:
                sets.append(load_snippets(path, spec_here).snippets)
            except MemprobeError as exc:  # the loader's own property: test_fuzz_datasets.py
                assert path.name in str(exc)
                return
    try:
        labelled = inference_snippets(*sets)
    except (TooFewTexts, SharedTexts) as exc:
        event(type(exc).__name__)
        if isinstance(exc, TooFewTexts):
            assert exc.which in ("suspect", "heldout")
            assert len(sets[0 if exc.which == "suspect" else 1]) < MIN_TEXTS
        else:
            assert {normal_form(s.text) for s in sets[0]} & {normal_form(s.text) for s in sets[1]}
        return
    event("labelled")
    assert len(labelled) == len(sets[0]) + len(sets[1])
    assert len({s.id for s in labelled}) == len(labelled)
    assert [s.label for s in labelled] == [MEMBER] * len(sets[0]) + [NONMEMBER] * len(sets[1])
    assert not {normal_form(s.text) for s in sets[0]} & {normal_form(s.text) for s in sets[1]}


# --- the command line, end to end up to the model load ------------------------------------------


def _run_cli(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def _check_cli_outcome(code: int, err: str, names: list[str], store: Path) -> None:
    """Exit 2: one last ``memprobe: error:`` line naming one of ``names``, no store written;
    exit 3: the data loaded and the absent model failed. stderr is terminal-safe either way."""
    assert "Traceback" not in err, err
    assert "\x1b" not in err and "\u202e" not in err and "\x07" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code in (EXIT_USAGE, EXIT_MODEL), (code, err)
    event(f"exit {code}")  # --hypothesis-show-statistics: both outcomes are reached
    if code == EXIT_USAGE:
        assert lines[-1].startswith("memprobe: error: "), err
        assert [line for line in lines if line.startswith("memprobe:")] == [lines[-1]], err
        assert any(name in lines[-1] for name in names), err
        assert not store.exists()
    else:
        assert lines[-1].startswith("memprobe: model error: "), err


@settings(max_examples=15)  # a CLI run per example: fewer than the profile's
@given(file=corpus_file())
def test_audit_cli_loads_or_refuses_any_dataset_in_one_line(file):
    name, data = file
    with tempfile.TemporaryDirectory() as folder:
        path, store = _written(folder, name, data), Path(folder) / "runs.sqlite"
        code, err = _run_cli(["--store", str(store), "audit", str(path), *NO_MODEL])
        _check_cli_outcome(code, err, [name], store)
        if code == EXIT_MODEL:  # loaded: every rejected row was named on its own line
            skipped = [line for line in err.splitlines() if line.startswith(f"{path}: row ")]
            assert len(skipped) == len(load_snippets(path).rejected), err


@settings(max_examples=15)
@given(suspect=suspect_files, heldout=st.one_of(heldout_files, corpus_file()))
def test_infer_cli_loads_or_refuses_any_pair_in_one_line(suspect, heldout):
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for which, (name, data) in (("suspect", suspect), ("heldout", heldout)):
            (Path(folder) / which).mkdir()
            paths.append(_written(f"{folder}/{which}", name, data))
        store = Path(folder) / "runs.sqlite"
        argv = ["--store", str(store), "infer", str(paths[0]), "--heldout", str(paths[1])]
        code, err = _run_cli([*argv, *NO_MODEL])
        names = [p.name for p in paths] + ["SUSPECT", "--heldout"]
        _check_cli_outcome(code, err, names, store)
