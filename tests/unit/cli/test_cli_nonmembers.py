"""`memprobe corpus nonmembers`, `memprobe audit --corpus --nonmembers` and labelled datasets."""

from __future__ import annotations

import csv
import json

import pytest

from memprobe_core.cli import main
from memprobe_core.snippets import nonmembers as nm
from memprobe_core.store import Store
from tests.unit.cli.test_cli import MODELS, WORDS, fake_models  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("fake_models")  # "test-*" models are parrots, others unknown


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "runs.sqlite"


def test_help_documents_the_new_options(capsys):
    assert main(["audit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--nonmembers" in text and "generated non-members" in text
    assert "--label-column" in text and "member / nonmember" in text
    assert main(["corpus", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("nonmembers", "--build", "--seed", "--count"):
        assert flag in text
    assert f"texts per domain (default: {nm.DEFAULT_PER_DOMAIN})" in text


def test_corpus_build_list_and_show(home, store_path, capsys):
    base = ["--store", str(store_path), "corpus"]
    assert main(base) == 0
    assert "generated non-member set: not built yet" in capsys.readouterr().out
    assert main([*base, "nonmembers", "--build", "--seed", "5", "--count", "2"]) == 0
    record = json.loads((home / nm.FILE_NAME).read_text("utf-8"))
    assert (record["seed"], record["count"]) == (5, 4)
    assert "non-member set built: 4 texts (seed 5" in capsys.readouterr().err
    assert main(base) == 0
    assert "generated non-member set: legal 2, code 2 (seed 5, generator v1" in (
        capsys.readouterr().out
    )
    assert main([*base, "nonmembers", "--domain", "code"]) == 0
    listed = capsys.readouterr().out
    first_id = nm.generate(5, 2).snippets[2].id
    assert first_id in listed and "nonmember-legal:" not in listed
    assert main([*base, "nonmembers", "--show", first_id]) == 0
    assert capsys.readouterr().out.strip() == nm.generate(5, 2).snippets[2].text.strip()


def test_corpus_option_mistakes_are_bad_usage(home, store_path, capsys):
    base = ["--store", str(store_path), "corpus"]
    assert main([*base, "--build"]) == 2
    assert "memprobe corpus nonmembers --build" in capsys.readouterr().err
    assert main([*base, "nonmembers", "--seed", "3"]) == 2
    assert "--seed only applies with --build" in capsys.readouterr().err
    assert main([*base, "nonmembers", "--build", "--count", "0"]) == 2
    assert not (home / nm.FILE_NAME).exists()


def test_audit_corpus_nonmembers_stores_balanced_labels(home, store_path, capsys):
    nm.build(seed=3, per_domain=2)
    code = main(
        [
            *("--store", str(store_path), "audit", "--corpus", "--nonmembers"),
            *("--per-domain", "1", "--methods", "ps_base", "--lengths", "30", *MODELS),
        ]
    )
    assert code == 0, capsys.readouterr().err
    store = Store(store_path)
    run = store.list_runs()[0]
    samples = store.samples(run["id"])
    assert [(s.domain, s.label) for s in samples] == [
        ("legal", "member"),
        ("legal", "nonmember"),
        ("code", "member"),
        ("code", "nonmember"),
    ]
    made = nm.read()
    assert {s.id for s in samples if s.label == "nonmember"} == {
        made.for_domain("legal", 1)[0].id,
        made.for_domain("code", 1)[0].id,
    }
    recorded = run["config"]["dataset"]["nonmembers"]
    assert (recorded["seed"], recorded["file"]) == (3, str(home / nm.FILE_NAME))
    frame = store.results_frame(run["id"])
    assert sorted(frame["label"]) == ["member", "member", "nonmember", "nonmember"]


def test_nonmembers_needs_the_corpus_and_its_domains(tmp_path, home, store_path, capsys):
    base = ["--store", str(store_path), "audit"]
    dataset = _labelled_csv(tmp_path / "some.csv", ["member"])  # paths are checked first
    assert main([*base, str(dataset), "--nonmembers", *MODELS]) == 2
    assert "use it with --corpus" in capsys.readouterr().err
    assert main([*base, "--corpus", "--nonmembers", "--domains", "docs", *MODELS]) == 2
    assert "non-member set has no ['docs'] texts" in capsys.readouterr().err
    assert Store(store_path).list_runs() == []


def _labelled_csv(path, labels):
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows([WORDS, label] for label in labels)
    return path


def test_labelled_dataset_labels_reach_the_store(tmp_path, store_path, capsys):
    data = _labelled_csv(tmp_path / "labelled.csv", ["Member", "nonmember", "MEMBER"])
    args = ["--store", str(store_path), "audit", str(data), "--methods", "ps_base"]
    assert main([*args, "--lengths", "30", *MODELS]) == 0, capsys.readouterr().err
    store = Store(store_path)
    samples = store.samples(store.list_runs()[0]["id"])
    assert [(s.id, s.label) for s in samples] == [
        ("labelled:1", "member"),
        ("labelled:2", "nonmember"),
        ("labelled:3", "member"),
    ]


def test_labelled_dataset_named_column_and_bad_value(tmp_path, store_path, capsys):
    data = tmp_path / "seen.csv"
    data.write_text(f"text,seen\n{WORDS},yes\n{WORDS},perhaps\n", "utf-8")
    args = ["--store", str(store_path), "audit", str(data), "--methods", "ps_base"]
    assert main([*args, "--label-column", "seen", "--lengths", "30", *MODELS]) == 2
    err = capsys.readouterr().err
    assert "file 'seen.csv' row 2: label column 'seen' has value 'perhaps'" in err
    assert Store(store_path).list_runs() == []
