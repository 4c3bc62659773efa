"""SaMIA (Kaneko et al. 2024): ROUGE-1 recall of sampled continuations against the true suffix.

ROUGE-1 and the mean are written out again here, on hand-worked strings; a scripted victim shows
what is asked of the model (one call, n samples, temperature 1, len(suffix) tokens, the seed);
a tiny HF model that the seed makes it reproducible; a served model without prompt log-probs
that SaMIA is measured where the log-prob signals are not; the CLI that it reaches the store and
the report.
"""

from __future__ import annotations

import csv
import json
import zlib

import pytest

from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.result import AttackResult
from memprobe_core.cli import main
from memprobe_core.errors import OptionError
from memprobe_core.membership import SIGNAL_BY_NAME, MeasureOptions
from memprobe_core.membership import samia as sm
from memprobe_core.membership import signals as sig
from memprobe_core.membership.measure import measure_result
from memprobe_core.membership.options import MAX_SAMIA_SAMPLES, signals_frame
from memprobe_core.models.openai import OpenAIGenerator
from memprobe_core.models.scripted import ScriptedGenerator
from memprobe_core.snippets.split import Snippet, split
from memprobe_core.store import Store
from tests.helpers.openai_server import serve
from tests.helpers.tiny_models import tiny_hf_generator
from tests.unit.cli.test_cli import MODELS, WORDS, fake_models  # noqa: F401 (a fixture)

SUFFIX = "the cat sat on the mat"  # 6 words: "the" twice
SAMPLES = [
    "the cat sat on the mat",  # every word: 6 / 6
    "the the the dog",  # "the" counts at most twice: 2 / 6
    "",  # no word: 0
    "The cat, sat",  # case and punctuation kept: only "sat" matches, 1 / 6
]
RECALLS = [1.0, 2 / 6, 0.0, 1 / 6]  # by hand


@pytest.fixture(autouse=True)
def fresh_caches():
    sm.clear_cache()
    sig.clear_cache()
    yield
    sm.clear_cache()
    sig.clear_cache()


def rouge1_recall_by_hand(candidate: str, reference: str) -> float:
    """Independent ROUGE-1 recall: strike each candidate word off a list of reference words."""
    left = reference.split()
    total = len(left)
    for word in candidate.split():
        if word in left:
            left.remove(word)
    return (total - len(left)) / total


def zlib_bytes(sample: str) -> int:
    return len(zlib.compress(" ".join(sample.split()).encode("utf-8")))


# --- the definition, on hand-worked strings ---------------------------------------------------


def test_rouge1_recall_matches_the_hand_worked_values():
    for sample, expected in zip(SAMPLES, RECALLS):
        assert rouge1_recall_by_hand(sample, SUFFIX) == pytest.approx(expected)
        assert sm.rouge1_recall(sm.words(sample), sm.words(SUFFIX)) == pytest.approx(expected)


def test_samia_is_the_mean_recall_and_samia_zlib_the_mean_of_recall_times_zlib_bytes():
    scores = sm.samia_scores(SAMPLES, SUFFIX)
    assert scores["samia"] == pytest.approx((1 + 2 / 6 + 0 + 1 / 6) / 4)  # 0.375
    expected_zlib = sum(r * zlib_bytes(s) for r, s in zip(RECALLS, SAMPLES)) / len(SAMPLES)
    assert scores["samia_zlib"] == pytest.approx(expected_zlib)
    assert scores["samia_zlib"] > scores["samia"]  # a multiplier of bytes, not a ratio


def test_words_split_at_any_whitespace_and_a_suffix_without_words_is_undefined():
    assert sm.words("the\ncat\tsat  on") == ["the", "cat", "sat", "on"]
    assert sm.samia_scores(["the cat"], " \n ") == {"samia": None, "samia_zlib": None}
    with pytest.raises(ValueError, match="empty reference"):
        sm.rouge1_recall(["a"], [])


def test_both_signals_point_to_member_when_higher_and_come_after_con_recall():
    names = list(SIGNAL_BY_NAME)
    assert names.index("samia") > names.index("con_recall")
    assert names.index("samia_zlib") == names.index("samia") + 1
    assert SIGNAL_BY_NAME["samia"].higher_is_member and SIGNAL_BY_NAME["samia"].needs_samples
    assert SIGNAL_BY_NAME["samia_zlib"].column == "signal_samia_zlib"


@pytest.mark.parametrize("samples", [-1, MAX_SAMIA_SAMPLES + 1, True, 2.0, "4"])
def test_samia_samples_out_of_range_is_refused_naming_it(samples):
    with pytest.raises(OptionError, match="samia_samples") as caught:
        MeasureOptions(samia_samples=samples)
    assert caught.value.option == "samia_samples"


def test_samia_samples_is_off_by_default_and_survives_a_stored_config():
    assert MeasureOptions().samia_samples == 0
    assert MeasureOptions.from_dict({"samia_samples": 10}).samia_samples == 10


# --- what is asked of the victim: a scripted model --------------------------------------------

TEXT = " ".join(f"w{i}" for i in range(30))  # whitespace split at 30: prefix w0..w9


def scripted_victim() -> ScriptedGenerator:
    # Sample i repeats the first i + 1 suffix words (w10 …): recalls 1/20, 2/20, 3/20, …
    return ScriptedGenerator(lambda ask: " ".join(f"w{10 + j}" for j in range(ask.index + 1)))


def whitespace_piece(text: str = TEXT, length: int = 30):
    return split(Snippet("s1", text, "legal"), "whitespace", length)


def test_one_call_of_n_samples_at_temperature_1_with_the_suffix_budget_and_the_seed():
    victim = scripted_victim()
    piece = whitespace_piece()
    assert (piece.prefix, piece.suffix_tokens) == (" ".join(f"w{i}" for i in range(10)), 20)
    out = sm.measure_samia(victim, piece, MeasureOptions(samia_samples=4), seed=7)
    [call] = victim.calls
    assert call.requests == [piece.prefix]  # the true prefix, as raw text
    assert (call.n, call.temperature, call.top_p, call.max_new_tokens, call.seed) == (
        4,
        1.0,
        1.0,
        20,
        7,
    )
    samples = [" ".join(f"w{10 + j}" for j in range(i + 1)) for i in range(4)]
    by_hand = sum(rouge1_recall_by_hand(s, piece.suffix) for s in samples) / 4
    assert by_hand == pytest.approx((1 + 2 + 3 + 4) / 20 / 4)
    assert out["samia"] == pytest.approx(by_hand)
    by_hand_zlib = sum(rouge1_recall_by_hand(s, piece.suffix) * zlib_bytes(s) for s in samples)
    assert out["samia_zlib"] == pytest.approx(by_hand_zlib / 4)
    assert out["samia_sampling"] == {
        "samples": 4,
        "seed": 7,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": None,
        "do_sample": True,
        "max_new_tokens": 20,
        "generated_tokens": 1 + 2 + 3 + 4,
    }


def test_the_methods_of_an_audit_share_one_sampling_per_snippet_length_and_seed():
    victim = scripted_victim()
    piece = whitespace_piece()
    options = MeasureOptions(samia_samples=3)
    first = sm.measure_samia(victim, piece, options, seed=0)
    for _ in range(4):  # the other four methods on the same snippet and length
        assert sm.measure_samia(victim, piece, options, seed=0) == first
    assert len(victim.calls) == 1
    sm.measure_samia(victim, piece, options, seed=1)  # another seed samples again
    sm.measure_samia(victim, whitespace_piece(length=20), options, seed=0)  # another length
    assert [c.seed for c in victim.calls] == [0, 1, 0]


def test_not_measured_says_why_and_never_gives_a_number():
    victim = scripted_victim()
    piece = whitespace_piece()
    assert sm.measure_samia(victim, piece, MeasureOptions(), seed=0) == {}  # off: nothing
    off = sm.measure_samia(victim, piece, MeasureOptions(signals=False, samia_samples=2), seed=0)
    assert off == {"samia_not_measured": "membership signals are off (signals=False, --no-signals)"}
    assert victim.calls == []

    def broken(ask):
        raise RuntimeError("CUDA out of memory")

    failed = sm.measure_samia(
        ScriptedGenerator(broken), piece, MeasureOptions(samia_samples=2), seed=0
    )
    assert set(failed) == {"samia_not_measured"}
    assert "RuntimeError: CUDA out of memory" in failed["samia_not_measured"]
    frame = signals_frame(failed)
    assert list(frame["signal"]) == ["SaMIA not measured"] and frame["value"].isna().all()


def test_a_failed_sampling_is_not_cached():
    calls = []

    def flaky(ask):
        calls.append(ask.index)
        if len(calls) == 1:
            raise RuntimeError("server went away")
        return "w10"

    victim = ScriptedGenerator(flaky)
    options = MeasureOptions(samia_samples=1)
    assert "samia_not_measured" in sm.measure_samia(victim, whitespace_piece(), options, seed=0)
    assert sm.measure_samia(victim, whitespace_piece(), options, seed=0)["samia"] == 1 / 20


# --- a tiny HF model: seeded and batched ------------------------------------------------------


def test_a_white_box_victim_samples_reproducibly_in_one_batched_call(monkeypatch):
    victim = tiny_hf_generator(seed=3)
    piece = split(Snippet("s", TEXT, "x"), victim.tokenizer, 24)
    seen: list[list[str]] = []
    real = victim.generate

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append([c.text for c in out[0]])
        return out

    monkeypatch.setattr(victim, "generate", spy)
    options = MeasureOptions(samia_samples=5)
    before = victim.stats.snapshot()
    first = sm.measure_samia(victim, piece, options, seed=11)
    used = victim.stats.since(before)
    assert (used.calls, used.requests, used.sequences) == (1, 1, 5)  # one batch of 5 samples
    sm.clear_cache()
    again = sm.measure_samia(victim, piece, options, seed=11)
    sm.clear_cache()
    sm.measure_samia(victim, piece, options, seed=12)
    assert again == first and seen[1] == seen[0]
    assert seen[2] != seen[0]  # another seed, other samples
    assert len(set(seen[0])) > 1  # sampled, not greedy
    assert first["samia_sampling"]["max_new_tokens"] == piece.suffix_tokens
    assert 0.0 <= first["samia"] <= 1.0
    by_hand = sum(rouge1_recall_by_hand(s, piece.suffix) for s in seen[0]) / 5
    assert first["samia"] == pytest.approx(by_hand)


# --- a black-box victim whose server gives no prompt log-probs --------------------------------


def unit_result(piece) -> AttackResult:
    return AttackResult(
        method="ps_inst",
        snippet_id=piece.snippet.id,
        domain=piece.snippet.domain,
        length=piece.length,
        prompt=piece.prefix,
        output="",
        mem=0.0,
        lcs_p=0.0,
        objective=0.0,
        alpha=1.0,
    )


def test_a_served_victim_without_prompt_log_probs_still_gets_samia():
    served = tiny_hf_generator(seed=3)
    piece = whitespace_piece()
    options = MeasureOptions(samia_samples=3)
    white = sm.measure_samia(served, piece, options, seed=4)
    sm.clear_cache()
    with serve(served, "m", echo="reject") as srv:
        victim = OpenAIGenerator("m", base_url=srv.base_url, backoff_s=0.01, max_retries=0)
        result = measure_result(unit_result(piece), piece, ModelSet(victim=victim), options, seed=4)
        sampled = [h["payload"] for h in srv.hits if not h["payload"].get("echo")]
    membership = result.membership
    assert "echo is not supported" in membership["not_measured"]  # no log-prob signal
    assert membership.get("loss") is None
    [payload] = sampled  # one request for all samples
    assert payload["prompt"] == piece.prefix
    assert (payload["n"], payload["temperature"], payload["top_p"]) == (3, 1.0, 1.0)
    assert (payload["max_tokens"], payload["seed"]) == (piece.suffix_tokens, 4)
    # The server's samples are the ones the same model gives in process: the same score.
    assert membership["samia"] == pytest.approx(white["samia"])
    assert membership["samia_zlib"] == pytest.approx(white["samia_zlib"])
    shown = signals_frame(membership)
    assert list(shown["signal"]) == ["not measured", "SaMIA", "SaMIA*zlib"]


# --- the CLI: stored with the unit, in the results CSV and the report -------------------------


@pytest.mark.usefixtures("fake_models")
def test_audit_with_samia_samples_stores_it_and_the_report_scores_it(tmp_path, capsys):
    data = tmp_path / "labelled.csv"
    with data.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows([WORDS, label] for label in ["member", "nonmember"] * 2)
    store = tmp_path / "runs.sqlite"
    args = ["--store", str(store), "audit", str(data), "--methods", "ps_base", "ps_inst"]
    args += ["--lengths", "30", "--samia-samples", "2", "--seed", "3", *MODELS]
    assert main(args) == 0, capsys.readouterr().err
    with Store(store) as opened:
        run = opened.list_runs()[0]
        assert run["config"]["options"]["measure"]["samia_samples"] == 2
        frame = opened.results_frame(run["id"])
        units = opened.units(run["id"])
    # The parrot victim answers "w20 … w25" to every prompt: 6 of the suffix's 20 words
    # (w10 … w29; prefix w0 … w9 is 0.33 of 30).
    assert len(frame) == 8 and frame["signal_samia"].tolist() == pytest.approx([0.3] * 8)
    assert frame["signal_loss"].isna().all()  # a parrot gives no log-probs
    sampling = units[0]["membership"]["samia_sampling"]
    assert (sampling["samples"], sampling["seed"], sampling["max_new_tokens"]) == (2, 3, 20)

    results_csv, html = tmp_path / "results.csv", tmp_path / "report.html"
    report = ["--store", str(store), "report", str(run["id"]), "--resamples", "100"]
    assert main([*report, "--csv", str(results_csv), "--html", str(html)]) == 0
    capsys.readouterr()
    with results_csv.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert {float(r["signal_samia"]) for r in rows} == {0.3}
    assert "SaMIA" in html.read_text("utf-8")
    assert main([*report, "--json"]) == 0
    scored = {row["score"]: row for row in json.loads(capsys.readouterr().out)["membership"]}
    assert scored["samia"]["auroc"] == pytest.approx(0.5)  # the same text in both classes
    assert (scored["samia"]["n_members"], scored["samia"]["n_nonmembers"]) == (2, 2)


@pytest.mark.usefixtures("fake_models")
def test_samia_samples_out_of_range_exits_2_naming_the_flag(tmp_path, capsys):
    args = ["--store", str(tmp_path / "runs.sqlite"), "probe", "--corpus-id", "legal:mit-33338842"]
    assert main([*args, *MODELS, "--samia-samples", str(MAX_SAMIA_SAMPLES + 1)]) == 2
    assert "--samia-samples" in capsys.readouterr().err
