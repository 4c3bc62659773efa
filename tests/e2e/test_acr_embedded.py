"""ACR on the embedded victim (Gemma-3-270M base, real weights): a licence header it reproduces
compresses (ACR > 1), a random string does not (nothing found up to past its length).

Budgets are cut to finish in about a minute on 2 CPU cores (a GCG step of width 16 on this
262k-token vocabulary takes about 2 s there). Measured on such a machine: the Apache header's
suffix ' License, Version 2.0 (the "' (10 tokens) is written back from a 4-token prompt — the
true prefix, the start of the 4-token length — after lengths 2 and 3 failed their 2 steps each:
ACR 2.5, 11–16 s. The 270M model does not reproduce the header's later words from
its first 1–8 tokens (it writes "<strong>License</strong>"), so the target is the part it does reproduce. GCG from the
filler alone does not get there on a CPU budget: 15 steps of width 64 at 3 tokens (about 4.5
min) left the target's loss at 1.85, and 40 steps of width 32 from the prefix's last 3 tokens
(about 2.7 min) at 1.0, neither reproducing a token of it. The random string (14 target tokens)
has nothing found up to 16 tokens with one step per length: ACR < 14/16, 16–21 s.
"""

from __future__ import annotations

import random
import string
import time

import pytest

from memprobe_core.attacks import AttackOptions, ModelSet, run_method
from memprobe_core.attacks.acr import ACROptions
from memprobe_core.snippets.split import Snippet, split

pytestmark = pytest.mark.slow

APACHE = 'Licensed under the Apache License, Version 2.0 (the "'
ALPHANUMERIC = string.ascii_letters + string.digits


@pytest.fixture(scope="module")
def victim(embedded_base):
    """The session's embedded Gemma-3-270M (tests/e2e/conftest.py)."""
    return embedded_base


def _piece(victim, snippet: Snippet, prefix_tokens: int):
    """The whole text as one split, cut after ``prefix_tokens`` tokens (the rest is the target)."""
    total = len(victim.tokenizer.encode(snippet.text, add_special_tokens=False))
    return split(snippet, victim.tokenizer, total, prefix_ratio=prefix_tokens / total)


def _run(victim, piece, **acr):
    options = AttackOptions(seed=0, method_options={"acr": ACROptions(**acr)})
    started = time.perf_counter()
    result = run_method("acr", piece, ModelSet(victim=victim), options)
    seconds = time.perf_counter() - started
    record = result.trace[0].extra
    tried = [(t["tokens"], t["steps"], t["matched"]) for t in record["lengths"]]
    print(
        f"\n{piece.snippet.id}: {result.verbatim} in {seconds:.1f} s; "
        f"(tokens, steps, matched) per length: {tried}; prompt {result.prompt!r}"
    )
    return result


def test_a_licence_header_is_written_back_from_a_shorter_prompt(victim):
    piece = _piece(victim, Snippet("apache-2.0", APACHE, "legal"), prefix_tokens=4)
    assert piece.suffix_tokens == 10
    result = _run(
        victim, piece, min_tokens=2, step_tokens=1, steps_per_length=2, top_k=64, search_width=16
    )
    v = result.verbatim
    assert result.status == "finished" and v["acr_memorized"] and v["acr"] > 1
    assert v["acr_prompt_tokens"] < v["acr_target_tokens"] == 10
    # What plain greedy generation writes for the found prompt: the whole target.
    plain = victim.variant(speculative=False).generate([result.prompt], max_new_tokens=10)
    assert plain[0][0].token_ids == list(piece.suffix_ids)
    assert result.mem == 1.0


def test_a_random_string_is_not_compressed(victim):
    rng = random.Random(0)
    text = "".join(rng.choice(ALPHANUMERIC) for _ in range(24))
    piece = _piece(victim, Snippet("random", text, "cc"), prefix_tokens=7)
    target = piece.suffix_tokens
    result = _run(
        victim,
        piece,
        min_tokens=2,
        step_tokens=4,
        max_tokens=target + 2,
        steps_per_length=1,
        top_k=64,
        search_width=16,
    )
    v = result.verbatim
    assert result.status == "finished" and not v["acr_memorized"]
    # Nothing found up to a prompt longer than the target: ACR is below 1.
    assert v["acr"] is None and v["acr_prompt_tokens"] is None
    assert v["acr_bound"] == target / (target + 2) < 1
    assert result.manifest["acr"]["lengths_tried"] == [2, 6, 10, 14, 16]
