"""Run titles cut long numbers (issue 52): a 20-digit seed in the held-out set's name is shown
by its first digits in the title; the whole seed stays in the run's manifest."""

from __future__ import annotations

from memprobe_core.audit.inference import short_numbers, start_inference
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store

SEED = 8678137284779500208


def test_long_numbers_are_cut_short_numbers_kept() -> None:
    assert short_numbers(f"seed {SEED}") == "seed 867813…"
    assert short_numbers("audit 12 snippets, length 500, seed 123456789") == (
        "audit 12 snippets, length 500, seed 123456789"
    )


def test_an_inference_runs_title_has_the_short_seed_and_its_manifest_the_whole(tmp_path) -> None:
    texts = [f"text {i} " + "word " * 80 for i in range(8)]
    suspect = [Snippet(f"s{i}", t, "legal") for i, t in enumerate(texts[:4])]
    heldout = [Snippet(f"h{i}", t + "other", "legal") for i, t in enumerate(texts[4:])]
    sources = ("built-in corpus (legal)", f"generated non-members (seed {SEED})")
    with Store(tmp_path / "runs.sqlite") as store:
        run_id = start_inference(
            store,
            suspect,
            heldout,
            [50],
            significance=0.05,
            sources=sources,
            split_tokenizer="whitespace",
        )
        run = store.get_run(run_id)
    assert run["title"] == ("infer built-in corpus (legal) vs generated non-members (seed 867813…)")
    assert run["config"]["dataset"]["inference"]["heldout"] == sources[1]  # whole
