"""Canaries (docs/method.md §11): a random half of a generated pool fine-tuned into a copy of the
victim. The pool and its assignment, the fine-tuning's effect on a tiny model, the built folder
(whole or absent, reused), and what the CLI refuses."""

from __future__ import annotations

import json
import math
import os

import pytest

from memprobe_core.cli import main
from memprobe_core.errors import OptionError
from memprobe_core.membership import canaries as cn
from memprobe_core.snippets import nonmembers
from memprobe_core.snippets.split import MEMBER, NONMEMBER
from tests.helpers.tiny_models import tiny_causal_lm


def test_the_pool_is_a_seeded_random_half_of_unseen_generated_texts():
    settings = cn.CanarySettings(per_side=6)
    first, again = cn.pool(settings, 123), cn.pool(settings, 123)
    assert [(s.id, s.label) for s in first] == [(s.id, s.label) for s in again]
    labels = [s.label for s in first]
    assert labels.count(MEMBER) == labels.count(NONMEMBER) == 6
    assert labels != [MEMBER] * 6 + [NONMEMBER] * 6  # assigned at random, not by position
    assert len({s.id for s in first}) == 12
    audited = {s.text for s in nonmembers.generate(123, per_domain=50).snippets}
    assert not audited & {s.text for s in first}  # never a text of the audited non-member set
    other = [s.label for s in cn.pool(cn.CanarySettings(per_side=6, seed=1), 123)]
    assert other != labels  # the seed picks the half


def _mean_loss(model, tokenizer, texts: list[str], max_tokens: int) -> float:
    import torch

    losses = []
    with torch.inference_mode():
        for text in texts:
            ids = torch.tensor([tokenizer(text)["input_ids"][:max_tokens]])
            losses.append(float(model(input_ids=ids, labels=ids).loss))
    return sum(losses) / len(losses)


def test_fine_tuning_lowers_the_members_loss_and_not_the_held_out_ones_as_much():
    model, tokenizer = tiny_causal_lm(seed=4)
    settings = cn.CanarySettings(per_side=6, epochs=8, learning_rate=3e-3, max_tokens=48)
    snippets = cn.pool(settings, 77)
    members = [s.text for s in snippets if s.label == MEMBER]
    held_out = [s.text for s in snippets if s.label == NONMEMBER]
    before = (_mean_loss(model, tokenizer, members, 48), _mean_loss(model, tokenizer, held_out, 48))
    steps = []
    losses = cn.fine_tune(model, tokenizer, members, settings, lambda *a: steps.append(a))
    assert len(losses) == len(steps) == 8 * math.ceil(6 / 4) and steps[-1][:2] == (16, 16)
    after = (_mean_loss(model, tokenizer, members, 48), _mean_loss(model, tokenizer, held_out, 48))
    assert after[0] < before[0] - 0.5  # the members were learnt
    assert after[0] < after[1] - 0.3  # more than the held-out half of the same generator
    emb = model.get_input_embeddings().weight
    assert not emb.requires_grad  # frozen: no optimizer state for the vocabulary matrix


def test_a_built_victim_is_a_whole_folder_with_its_record_and_is_reused(tmp_path, monkeypatch):
    model, tokenizer = tiny_causal_lm(seed=1)
    source = tmp_path / "base"
    model.save_pretrained(str(source))
    tokenizer.save_pretrained(str(source))
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("memprobe_core.models.embedded.ensure_cache", lambda name: source)
    settings = cn.CanarySettings(per_side=3, epochs=1, max_tokens=16)
    built = cn.ensure_canaries(settings)
    record = json.loads((built.model_path / cn.RECORD).read_text())
    assert record["trained_ids"] == [s.id for s in built.snippets if s.label == MEMBER]
    assert record["steps"] == 1 and record["saved_dtype"] == "bfloat16"
    assert not list(built.model_path.parent.glob("*.partial"))
    from memprobe_core.models import load

    victim = load(str(built.model_path))  # loadable by path, as a run records it
    assert victim.white_box
    calls = []
    monkeypatch.setattr(cn, "_build", lambda *a: calls.append(a))
    assert cn.ensure_canaries(settings).record == record and calls == []  # reused, not rebuilt
    summary = cn.summary(built)
    assert (summary["trained"], summary["held_out"]) == (3, 3)


def test_a_failed_save_leaves_no_partial_copy_and_dead_ones_are_removed(tmp_path, monkeypatch):
    """Issue 51: a canary victim that could not be saved left its 544 MB ``*.partial`` folder
    behind on every try."""
    import subprocess

    import transformers

    model, tokenizer = tiny_causal_lm(seed=1)
    source = tmp_path / "base"
    model.save_pretrained(str(source))
    tokenizer.save_pretrained(str(source))
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("memprobe_core.models.embedded.ensure_cache", lambda name: source)
    settings = cn.CanarySettings(per_side=3, epochs=1, max_tokens=16)
    out = cn.model_dir(settings, nonmembers.ensure().seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    # A copy of a process that is gone (SIGKILLed mid-save), and one of a live process.
    dead = subprocess.Popen(["true"])
    dead.wait()
    (out.parent / f"{out.name}.{dead.pid}.partial").mkdir()
    live = out.parent / f"{out.name}.{os.getppid()}.partial"
    live.mkdir()
    real_save = transformers.PreTrainedModel.save_pretrained

    def disk_full(self, folder, *args, **kwargs):
        real_save(self, folder, *args, **kwargs)  # written in part, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", disk_full)
    for _ in range(2):  # every try cleans up after itself
        with pytest.raises(OSError, match="No space left"):
            cn.ensure_canaries(settings)
    assert not out.exists()
    assert [p.name for p in out.parent.glob("*.partial")] == [live.name]  # the live one stays
    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", real_save)
    built = cn.ensure_canaries(settings)  # and a later save succeeds
    assert (built.model_path / cn.RECORD).is_file()


@pytest.mark.parametrize(
    "field, value", [("per_side", 1), ("epochs", 0), ("domain", "docs"), ("learning_rate", 2.0)]
)
def test_bad_settings_are_refused_naming_them(field, value):
    with pytest.raises(OptionError, match=f"{field}="):
        cn.CanarySettings(**{field: value})


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--victim", "fake"], "leave out --victim"),
        (["--nonmembers"], "leave out --nonmembers"),
        (["--domains", "legal", "code"], "one domain"),
        (["--per-domain", "1"], "--per-domain 1"),
        (["--canary-epochs", "0"], "--canary-epochs 0"),
    ],
)
def test_the_cli_refuses_what_canaries_bring_themselves(tmp_path, capsys, extra, says):
    argv = ["--store", str(tmp_path / "runs.sqlite"), "audit", "--corpus", "--canaries", *extra]
    assert main(argv) == 2
    assert says in capsys.readouterr().err


def test_canaries_need_the_corpus(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a b c d e f g"}\n')
    assert main(["--store", str(tmp_path / "r.sqlite"), "audit", str(data), "--canaries"]) == 2
    assert "use it with --corpus" in capsys.readouterr().err


def test_canary_epochs_without_canaries_is_refused(tmp_path, capsys):
    argv = ["--store", str(tmp_path / "r.sqlite"), "audit", "--corpus", "--canary-epochs", "2"]
    assert main(argv) == 2
    assert "add --canaries" in capsys.readouterr().err


def test_a_bad_store_is_refused_before_any_fine_tuning(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cn, "_build", lambda *a: pytest.fail("fine-tuned before the checks"))
    argv = ["--store", str(tmp_path), "audit", "--corpus", "--canaries", "--per-domain", "3"]
    assert main([*argv, "--canary-epochs", "2"]) == 2  # a folder is no store
    assert "store" in capsys.readouterr().err
