"""Every extraction method on the embedded models, one demo snippet of length 100 (one of the
paper's lengths; 200 doubled the victim's greedy answers and this module's time); prints the table.

Victim and base: Gemma-3-270M base (it continues the licence texts of the demo corpus); attacker
and init model: SmolLM2-135M-Instruct. To stay within a few minutes on 2 CPU cores the search
sizes are cut, not the paper's: the attacker loop runs 1 round × 4 candidates (paper 3 × 24),
GCG 2 steps × width 8, top-k 32 (paper 30 steps). No reverse LM is available offline, so
Reverse-LM uses a tiny word-level reversed model trained here in seconds on the snippet's text:
it shows the pipeline (flip → generate → flip back → victim → score), not a real reverse LM.
"""

from __future__ import annotations

import pytest

from memprobe_core.attacks import AttackOptions, ModelSet, method_label, registry, run_method
from memprobe_core.attacks.acr import ACROptions
from memprobe_core.attacks.options import GCGOptions, InteractiveOptions
from memprobe_core.metrics import objective
from tests.unit.attacks.test_attacks_reverse_lm import train_reversed, word_tokenizer

pytestmark = pytest.mark.slow
LENGTH = 100  # Gemma tokens: 33 prefix + 67 suffix


@pytest.fixture(scope="module")
def setup(embedded_base, embedded_instruct):
    from memprobe_core.models.hf import HFGenerator
    from memprobe_core.snippets.corpus import demo_corpus
    from memprobe_core.snippets.split import DataError, split

    victim = embedded_base
    attacker = embedded_instruct
    sp = None
    for snippet in demo_corpus(domains=["legal"]):
        try:
            sp = split(snippet, victim.tokenizer, LENGTH)
            break
        except DataError:
            continue
    assert sp is not None, f"no legal demo snippet has {LENGTH} Gemma tokens"
    tok = word_tokenizer([sp.text])
    rev_model, _ = train_reversed(tok, [sp.text], steps=80)
    reverse = HFGenerator(rev_model, tok, model_id="tiny-reverse (trained in test)")
    models = ModelSet(victim=victim, base=victim, attacker=attacker, reverse=reverse)
    return sp, models


OPTIONS = AttackOptions(
    seed=0,
    interactive=InteractiveOptions(rounds=1, n_candidates=4, max_prompt_tokens=48),
    gcg=GCGOptions(steps=2, search_width=8, top_k=32),
    # ACR's paper budget (30 steps × width 128 at every length up to 64 tokens) is hours on a
    # CPU; here two lengths of one step (its own e2e test shows a found prompt).
    method_options={
        "acr": ACROptions(
            min_tokens=4, step_tokens=4, max_tokens=8, steps_per_length=1, search_width=8, top_k=32
        ),
    },
)
_RESULTS: dict = {}  # method -> AttackResult: each method runs once per test session


def run(method, setup):
    """The method's result on the setup (run on first use, so no test depends on test order)."""
    if method not in _RESULTS:
        sp, models = setup
        _RESULTS[method] = run_method(method, sp, models, OPTIONS)
    r = _RESULTS[method]
    assert r.status == "finished", method
    assert 0.0 <= r.mem <= 1.0 and 0.0 <= r.lcs_p <= 1.0
    assert r.objective == pytest.approx(objective(r.mem, r.lcs_p, r.alpha))
    assert r.manifest["split"]["suffix_tokens"] == LENGTH - LENGTH // 3
    assert r.costs.victim_queries >= 1 and r.costs.wall_seconds > 0
    assert r.output.strip(), f"{method}: empty victim output"
    return r


def test_ps_base(setup):
    r = run("ps_base", setup)
    assert r.mem > 0.1  # measured 0.262 on the Apache-2.0 snippet (its output overlaps the suffix)
    assert r.dis is None


def test_ps_inst(setup):
    r = run("ps_inst", setup)
    assert r.manifest["ps_formats"] == ["raw"]  # Gemma base has no chat template
    # Base and victim are the same model here: the same greedy continuation of the same prefix.
    base = run("ps_base", setup)
    assert (r.output, r.mem) == (base.output, base.mem)


def test_reverse_lm(setup):
    r = run("reverse_lm", setup)
    assert r.dis is not None and r.costs.attacker_queries == 1


def test_gcg(setup):
    r = run("gcg", setup)
    losses = r.trace[0].extra["losses"]
    assert len(losses) == 2
    assert all(b <= a for a, b in zip(losses, losses[1:]))  # keeps the best: never rises
    assert losses[-1] <= r.trace[0].extra["initial_loss"]


def test_interactive(setup):
    r = run("interactive", setup)
    assert len(r.trace) == 5  # p_init + 4 candidates
    assert r.objective == max(c.objective for c in r.trace if "empty" not in c.flags)
    assert r.costs.attacker_queries == 1 + 4 and r.dis is not None


def test_result_table(setup, capsys):
    sp, _ = setup
    # Every extraction method these models can run (the signals-only method asks no model and
    # has no Mem to show; divergence needs a chat victim, and Gemma base has no chat template:
    # its own e2e test runs it on SmolLM2).
    offered = registry.offered_methods(
        ["victim", "base", "attacker", "reverse"], ["victim", "base"], chat=()
    )
    extracting = [s.name for s in registry.specs() if s.extracts and s.name in offered]
    assert "acr" in extracting and "divergence" not in extracting
    results = {method: run(method, setup) for method in extracting}
    assert [r.method for r in results.values()] == extracting
    with capsys.disabled():
        print(
            f"\nsnippet {sp.snippet.id}, length {sp.length} ({len(sp.prefix_ids)}+{sp.suffix_tokens}),"
            f" alpha {results['ps_base'].alpha}"
        )
        print(
            f"{'method':<20} {'Mem':>6} {'LCS_P':>6} {'Dis':>6} {'O':>7} {'vQ':>4} {'aQ':>4} {'seconds':>8}"
        )
        for method, r in results.items():
            c = r.costs
            dis = "-" if r.dis is None else f"{r.dis:.3f}"
            print(
                f"{method_label(method):<20} {r.mem:6.3f} {r.lcs_p:6.3f} {dis:>6} {r.objective:7.3f} "
                f"{c.victim_queries:>4} {c.attacker_queries:>4} {c.wall_seconds:8.1f}"
            )
