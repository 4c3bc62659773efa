"""Dataset inference on the embedded victim (docs/method.md §10), the CLI path an auditor takes.

Members of the demo corpus against generated non-members must be told apart (the victim has
read licences and Python sources; it cannot have read texts made on this machine), and two
random halves of the same members must not be — the test's own control. Kept small for CI: 14
texts per set at length 64 (the README's figures come from the same commands at full size).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from memprobe_core.cli import main
from memprobe_core.snippets.corpus import demo_corpus


def _jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def _infer(tmp_path: Path, capsys, name: str, suspect: list[str], heldout: list[str]) -> dict:
    a = _jsonl(tmp_path / f"{name}-suspect.jsonl", suspect)
    b = _jsonl(tmp_path / f"{name}-heldout.jsonl", heldout)
    argv = ["--store", str(tmp_path / "runs.sqlite"), "infer", str(a), "--heldout", str(b)]
    assert main([*argv, "--lengths", "64", "--json"]) == 0, capsys.readouterr().err
    (inferred,) = json.loads(capsys.readouterr().out)["dataset_inference"]
    return inferred


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_members_against_unseen_texts_reject_and_random_halves_do_not(tmp_path, capsys):
    corpus = demo_corpus(domains=["legal", "code"], limit_per_domain=7, nonmembers=True)
    members = [s.text for s in corpus if s.label == "member"]
    unseen = [s.text for s in corpus if s.label == "nonmember"]
    assert len(members) == len(unseen) == 14

    found = _infer(tmp_path, capsys, "split", members, unseen)
    assert found["test"]["rejected"], found
    assert found["test"]["p_value"] < 0.01

    shuffled = random.Random(0).sample(members, len(members))
    halves = _infer(tmp_path, capsys, "halves", shuffled[:7], shuffled[7:])
    assert not halves["test"]["rejected"], halves
