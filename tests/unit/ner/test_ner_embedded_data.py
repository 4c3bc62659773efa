"""The embedded NER model's names and corpus (no training here), and its cache logic."""

from __future__ import annotations

from collections import Counter

import pytest

from memprobe_core.ner import embedded
from memprobe_core.ner.conll import entities
from memprobe_core.ner.embedded import EmbeddedNerSettings, embedded_name_lists, generate_corpus

SMALL = EmbeddedNerSettings(n_in_names=30, n_out_names=20, repeats=3, other_sentences=10)


def test_name_lists_are_disjoint_down_to_tokens_and_seeded() -> None:
    in_names, out_names = embedded_name_lists(SMALL)
    assert len(in_names) == 30 and len(out_names) == 20
    assert len(set(in_names)) == 30 and len(set(out_names)) == 20
    in_tokens = {t for n in in_names for t in n.split()}
    out_tokens = {t for n in out_names for t in n.split()}
    assert not in_tokens & out_tokens
    assert embedded_name_lists(SMALL) == (in_names, out_names)
    other = embedded_name_lists(EmbeddedNerSettings(seed=1, n_in_names=30, n_out_names=20))
    assert other[0] != in_names


def test_pools_never_share_a_word() -> None:
    assert not set(embedded._FIRST) & set(embedded._LAST)


def test_corpus_repeats_in_names_and_never_mentions_out_names() -> None:
    in_names, out_names = embedded_name_lists(SMALL)
    corpus = generate_corpus(SMALL)
    assert len(corpus) == 30 * 3 + 10
    people = Counter(text for s in corpus for kind, text in entities(s) if kind == "PER")
    assert people == {name: 3 for name in in_names}
    words = {t for s in corpus for t in s.tokens}
    assert not words & {t for n in out_names for t in n.split()}
    kinds = {kind for s in corpus for kind, _ in entities(s)}
    assert kinds == {"PER", "LOC", "ORG", "MISC"}
    assert all(len(s.tokens) == len(s.tags) for s in corpus)


def test_cache_key_ignores_device_only() -> None:
    assert SMALL.key() == EmbeddedNerSettings(**{**SMALL.__dict__, "device": "cpu"}).key()
    assert SMALL.key() != EmbeddedNerSettings(**{**SMALL.__dict__, "epochs": 3}).key()


def test_complete_build_is_reused_and_partial_one_is_not(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path))
    target = embedded.embedded_ner_dir(SMALL)
    assert target.parent == tmp_path / "models" / "ner-minilm"
    target.mkdir(parents=True)
    assert not embedded.is_built(SMALL)
    calls: list[str] = []

    def fake_train(settings, out, on_progress):  # records that a build was attempted
        calls.append(str(out))
        (out / "weights").write_text("x")
        return {"steps": 0}

    monkeypatch.setattr(embedded, "_train", fake_train)
    path = embedded.ensure_embedded_ner(settings=SMALL)
    assert path == target and len(calls) == 1 and (path / embedded.MARKER).is_file()
    assert (path / "weights").is_file() and (path / "manifest.json").is_file()
    assert embedded.ensure_embedded_ner(settings=SMALL) == target and len(calls) == 1
    assert not list(target.parent.glob("*.tmp-*"))


def test_failed_build_leaves_nothing_behind(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path))

    def broken(settings, out, on_progress):
        raise RuntimeError("disk full")

    monkeypatch.setattr(embedded, "_train", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        embedded.ensure_embedded_ner(settings=SMALL)
    assert not embedded.is_built(SMALL)
    assert not list((tmp_path / "models" / "ner-minilm").iterdir())
