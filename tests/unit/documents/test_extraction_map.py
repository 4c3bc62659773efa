"""The extraction map (docs/method.md §19): windows cut from the document's own ids, one
teacher-forced pass per batch giving exactly what greedy generation writes and the p_z the
audits measure, the map's summary worked by hand, and a stored map that resumes without losing or
repeating a window."""

from __future__ import annotations

import html
import math
import re
import threading

import pytest

from memprobe_core.documents import extraction_map as xm
from memprobe_core.documents import map_run
from memprobe_core.documents.map_report import (
    describe_map,
    log10_text,
    map_frame,
    map_html,
    share_colour,
)
from memprobe_core.documents.reading import DocumentError
from memprobe_core.documents.windows import MapOptions, cut_windows, window_id, window_index
from memprobe_core.errors import OptionError
from memprobe_core.highlight import show_controls
from memprobe_core.measuring.sampler import SamplingScheme
from memprobe_core.membership import extraction_probability as xp
from memprobe_core.store import Store
from tests.helpers.tiny_models import tiny_hf_generator
from tests.unit.membership.test_extraction_probability import piece_of_ids

SMALL = MapOptions(prefix_tokens=6, suffix_tokens=6, stride=6, batch_windows=3)


@pytest.fixture(scope="module", params=[False, True], ids=["bos-never-added", "bos-added"])
def victim(request):
    return tiny_hf_generator(seed=5, adds_bos=request.param)


def looping_document(victim, n_random: int = 40, n_greedy: int = 80) -> str:
    """Random words, then what greedy decoding writes after them (text for the stored-run
    tests; a random model's tokens need not round-trip through text)."""
    import random

    import torch

    tok = victim.tokenizer
    rng = random.Random(1)
    words = ["the", "licence", "of", "this", "work", "is", "granted", "to", "any", "person"]
    start = " ".join(rng.choice(words) for _ in range(n_random))
    ids = tok.encode(start, add_special_tokens=False)
    front = xm.front_ids(tok, start)
    with torch.inference_mode():
        out = victim.torch_model.generate(
            torch.tensor([[*front, *ids]]), max_new_tokens=n_greedy, do_sample=False
        )[0, len(front) + len(ids) :]
    return tok.decode([*ids, *out.tolist()])


def chained_ids(victim, front, n: int = 6, pieces: int = 8) -> list[int]:
    """Document ids whose windows (``n`` + ``n``, stride ``n``) are written back in full, but
    the two around a random piece in the middle: each piece is what greedy decoding writes
    after the piece before it."""
    import random

    import torch

    rng = random.Random(2)
    vocab = len(victim.tokenizer)
    ids = [rng.randrange(10, vocab) for _ in range(n)]
    for k in range(pieces):
        if k == pieces // 2:
            ids += [rng.randrange(10, vocab) for _ in range(n)]
            continue
        with torch.inference_mode():
            out = victim.torch_model.generate(
                torch.tensor([[*front, *ids[-n:]]]),
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
            )
        ids += out[0, len(front) + n :].tolist()
    return ids


# --- windows -----------------------------------------------------------------------------------


def test_windows_tile_the_document_and_a_short_tail_is_left_out():
    windows = cut_windows(250, MapOptions())
    assert [w.start for w in windows] == [0, 50, 100, 150]
    assert [(w.suffix_start, w.end) for w in windows] == [
        (50, 100),
        (100, 150),
        (150, 200),
        (200, 250),
    ]
    assert [w.start for w in cut_windows(249, MapOptions())] == [0, 50, 100]
    assert window_index(window_id(12)) == 12 and window_id(12) == "w000012"


def test_a_document_shorter_than_one_window_is_refused_with_its_size():
    with pytest.raises(DocumentError, match=r"99 tokens, fewer than one window of 50 \+ 50"):
        cut_windows(99, MapOptions())
    assert len(cut_windows(100, MapOptions())) == 1


def test_window_options_that_do_not_fit_are_refused():
    with pytest.raises(OptionError, match="stride=60"):
        MapOptions(stride=60)
    with pytest.raises(OptionError, match="prefix_tokens=0"):
        MapOptions(prefix_tokens=0)
    assert MapOptions(stride=10).stride == 10  # overlapping suffixes are allowed


# --- scoring ----------------------------------------------------------------------------------


def front_of(victim):
    return xm.front_ids(victim.tokenizer, "the licence")


PLAIN = SamplingScheme()


def score_all(victim, ids, options, scheme=PLAIN, discover_p=0.5):
    windows = cut_windows(len(ids), options)
    front = front_of(victim)
    scores = []
    for first in range(0, len(windows), options.batch_windows):
        scores += xm.score_windows(
            victim.torch_model,
            ids,
            windows[first : first + options.batch_windows],
            front=front,
            scheme=scheme,
            discover_p=discover_p,
        )
    return windows, front, scores


def test_every_window_gets_what_greedy_generation_writes(victim):
    import torch

    ids = chained_ids(victim, front_of(victim))
    windows, front, scores = score_all(victim, ids, SMALL)
    matches = []
    for window, score in zip(windows, scores):
        prompt = torch.tensor([[*front, *window.prefix_ids(ids)]])
        with torch.inference_mode():
            out = victim.torch_model.generate(
                prompt, max_new_tokens=window.suffix_tokens, do_sample=False, min_new_tokens=6
            )[0, prompt.shape[1] :].tolist()
        suffix = window.suffix_ids(ids)
        lead = next((i for i, (a, b) in enumerate(zip(out, suffix)) if a != b), len(suffix))
        assert score.match_tokens == lead, window
        assert score.extractable == (lead == len(suffix))
        assert list(score.greedy_ids) == out[: len(score.greedy_ids)]
        matches.append(lead)
    # Chained pieces are written back, the random one is not: both kinds are checked.
    assert matches.count(SMALL.suffix_tokens) >= 5 and min(matches) < SMALL.suffix_tokens


@pytest.mark.parametrize(
    "scheme", [SamplingScheme(1.0, 0, 1.0), SamplingScheme(0.7, 40, 0.9)], ids=lambda s: s.label()
)
def test_p_z_of_a_window_is_the_audits_p_z_of_the_same_split(victim, scheme):
    ids = chained_ids(victim, front_of(victim))
    windows, _, scores = score_all(victim, ids, SMALL, scheme, 0.8)
    for window, score in list(zip(windows, scores))[:6]:
        xp.clear_cache()
        piece = piece_of_ids(victim.tokenizer, window.prefix_ids(ids), window.suffix_ids(ids))
        record = xp.measure_extraction_probability(victim, piece, scheme, 0.8)
        if record["log10_p_z"] is None:
            assert score.pz["log10_p_z"] is None
        else:
            assert score.pz["log10_p_z"] == pytest.approx(record["log10_p_z"], abs=1e-4)
        assert score.pz["discover_p"] == 0.8 and score.pz["pz_scheme"] == scheme.label()


def test_greedy_p_z_is_one_exactly_on_extractable_windows(victim):
    ids = chained_ids(victim, front_of(victim))
    _, _, scores = score_all(victim, ids, SMALL, SamplingScheme(0.0, 0, 1.0))
    assert any(s.extractable for s in scores) and not all(s.extractable for s in scores)
    for score in scores:
        assert (score.pz["log10_p_z"] == 0.0) == score.extractable
        assert (score.pz["log10_p_z"] is None) == (not score.extractable)


def test_batching_changes_nothing(victim):
    ids = chained_ids(victim, front_of(victim))
    _, _, one = score_all(victim, ids, MapOptions(6, 6, 6, batch_windows=1))
    _, _, many = score_all(victim, ids, MapOptions(6, 6, 6, batch_windows=7))
    assert [(s.match_tokens, s.greedy_ids) for s in one] == [
        (s.match_tokens, s.greedy_ids) for s in many
    ]
    for a, b in zip(one, many):
        if a.pz["log10_p_z"] is not None:
            assert a.pz["log10_p_z"] == pytest.approx(b.pz["log10_p_z"], abs=1e-4)


# --- the summary, by hand ---------------------------------------------------------------------


def hand_score(index: int, matched: int, log10_p_z: float | None) -> xm.WindowScore:
    return xm.WindowScore(
        index=index,
        start=index * 50,
        suffix_start=index * 50 + 50,
        suffix_tokens=50,
        match_tokens=matched,
        extractable=matched == 50,
        greedy_ids=(),
        pz={"log10_p_z": log10_p_z},
    )


def test_the_summary_worked_by_hand():
    # Windows 0, 1 and 3 extractable: suffix tokens 50–150 and 200–250 written back.
    scores = [
        hand_score(0, 50, 0.0),
        hand_score(1, 50, -1.0),
        hand_score(2, 10, None),
        hand_score(3, 50, -3.0),
    ]
    s = xm.summarise(scores, document_tokens=260)
    assert (s.windows, s.extractable, s.extractable_share) == (4, 3, 0.75)
    assert (s.asked_tokens, s.extracted_tokens, s.longest_stretch) == (200, 150, 100)
    assert s.extracted_share == pytest.approx(150 / 260)
    assert s.mean_match_share == pytest.approx((50 + 50 + 10 + 50) / 200)
    assert s.pz_zero_share == 0.25
    assert s.median_log10_p_z == -1.0
    assert s.log10_p_z_quantiles == pytest.approx((-2.6, -1.0, -0.2))


def test_an_empty_map_summarises_to_zeros():
    s = xm.summarise([], document_tokens=10)
    assert (s.windows, s.extractable_share, s.longest_stretch, s.median_log10_p_z) == (
        0,
        0.0,
        0,
        None,
    )


# --- the stored run ---------------------------------------------------------------------------


def start(victim, tmp_path, text, options=SMALL, name="doc.txt"):
    store = Store(tmp_path / "runs.sqlite")
    run_id = map_run.start_map(store, text, victim, name=name, victim_name="tiny", options=options)
    return store, run_id


def fingerprint(stored):
    return [
        (s.index, s.match_tokens, s.greedy_ids, s.pz.get("log10_p_z") is None)
        for s in stored.scores
    ]


def test_a_cancelled_map_resumes_with_nothing_lost_or_repeated(victim, tmp_path):
    text = looping_document(victim)
    store, whole = start(victim, tmp_path, text)
    straight = map_run.run_map(store, whole, victim)
    assert straight.status == "finished" and len(straight.scores) == straight.windows_total

    _, run_id = start(victim, tmp_path, text)
    cancel = threading.Event()
    first = map_run.run_map(
        store, run_id, victim, on_progress=lambda p: cancel.set(), cancel=cancel
    )
    assert first.status == "interrupted" and len(first.scores) == SMALL.batch_windows
    resumed = map_run.run_map(store, run_id, victim)
    assert resumed.status == "finished"
    assert fingerprint(resumed) == fingerprint(straight)
    attempts = [u["attempts"] for u in store.units(run_id)]
    assert set(attempts) == {0}  # windows are committed once each, never re-run


def test_an_interrupt_mid_batch_keeps_finished_batches_and_redoes_the_rest(
    victim, tmp_path, monkeypatch
):
    text = looping_document(victim)
    store, run_id = start(victim, tmp_path, text)
    real = xm.score_windows
    calls = []

    def second_call_interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(map_run, "score_windows", second_call_interrupted)
    with pytest.raises(KeyboardInterrupt):
        map_run.run_map(store, run_id, victim)
    kept = map_run.read_map(store, run_id)
    assert kept.status == "interrupted" and len(kept.scores) == SMALL.batch_windows
    monkeypatch.setattr(map_run, "score_windows", real)
    done = map_run.run_map(store, run_id, victim)
    assert [s.index for s in done.scores] == list(range(done.windows_total))


def test_a_resume_with_another_tokenizer_is_refused(victim, tmp_path):
    store, run_id = start(victim, tmp_path, looping_document(victim))
    other = tiny_hf_generator(vocab=300, seed=5)
    with pytest.raises(map_run.DocumentRunError, match="another tokenizer"):
        map_run.run_map(store, run_id, other)


def test_a_run_that_is_not_a_map_is_refused(tmp_path):
    store = Store(tmp_path / "runs.sqlite")
    run_id = store.create_run("audit", config={"methods": []})
    with pytest.raises(map_run.DocumentRunError, match="not a document's extraction map"):
        map_run.read_map(store, run_id)


def test_a_victim_without_weights_is_refused(tmp_path):
    from memprobe_core.attacks.model_set import MissingModelError
    from memprobe_core.models.scripted import ScriptedGenerator

    with pytest.raises(MissingModelError, match="needs the victim's weights"):
        map_run.start_map(
            Store(tmp_path / "s.sqlite"), "a b c", ScriptedGenerator(), name="d", victim_name="x"
        )


# --- the report -------------------------------------------------------------------------------


def test_the_report_escapes_the_document_and_the_csv_is_formula_safe(victim, tmp_path):
    from memprobe_core.report.export import to_safe_csv

    text = "=HYPERLINK(1) " + "<script>alert(1)</script> " * 8 + looping_document(victim)
    store, run_id = start(victim, tmp_path, text, name="<b>book</b>.txt")
    stored = map_run.run_map(store, run_id, victim)
    report = map_html(stored)
    assert "<script" not in report and "&lt;script" in report
    assert "<b>book" not in report and "&lt;b&gt;book&lt;/b&gt;" in report
    frame = map_frame(stored)
    assert len(frame) == stored.windows_total
    csv = to_safe_csv(frame).decode()
    assert ",=HYPER" not in csv and "'=HYPER" in csv  # window 0's prefix
    lines = describe_map(stored).splitlines()
    assert lines[0].startswith(f"extraction map of <b>book</b>.txt on tiny (run {run_id}")


def test_colours_rise_with_the_share_written_back():
    shades = [share_colour(x) for x in (0, 0.1, 0.5, 0.99, 1)]
    assert shades[0] != shades[1] and shades[-1] != shades[-2]
    assert len(set(shades)) == 5


@pytest.mark.parametrize(
    ("value", "shown"), [(-0.017, "-0.02"), (-0.001, "0.00"), (0.0, "0.00"), (-3.14159, "-3.14")]
)
def test_log10_p_z_has_two_decimals_and_no_negative_zero(value, shown):
    # A document the victim knows has p_z near 1: one decimal showed its -0.017 as "-0.0".
    assert log10_text(value) == shown


def test_p_z_zero_is_reported_as_such():
    assert math.isnan(float("nan"))  # the frame keeps None for p_z = 0, never a number
    s = xm.summarise([hand_score(0, 3, None)], 100)
    assert s.log10_p_z_quantiles is None and s.pz_zero_share == 1.0


class OracleLM:
    """A stand-in causal LM that predicts each next token right (teacher forcing agrees
    everywhere) but at the positions in ``wrong``: the leading-run rule is checked directly."""

    device = "cpu"

    def __init__(self, vocab: int, wrong: set[int]) -> None:
        self.vocab, self.wrong = vocab, wrong

    def __call__(self, input_ids, use_cache, logits_to_keep):
        import types

        import torch

        batch, width = input_ids.shape
        logits = torch.zeros(batch, width, self.vocab)
        for t in range(width - 1):
            nxt = input_ids[:, t + 1]
            logits[torch.arange(batch), t, (nxt + 1) % self.vocab if t in self.wrong else nxt] = 1
        return types.SimpleNamespace(logits=logits[:, -logits_to_keep:])


def test_only_the_leading_run_counts_not_agreements_after_a_miss():
    ids = list(range(10, 30))
    window = cut_windows(len(ids), MapOptions(4, 8, 8))[0]
    # Row: 4 prefix tokens (positions 0-3), suffix at 4-11; position t predicts token t+1.
    # Position 5 predicts the third suffix token (16) and misses (17); the rest agree.
    model = OracleLM(64, wrong={5})
    (score,) = xm.score_windows(
        model, ids, [window], front=[], scheme=SamplingScheme(0.0, 0, 1.0), discover_p=0.5
    )
    assert score.match_tokens == 2
    assert not score.extractable and score.greedy_ids == (14, 15, 17)
    (whole,) = xm.score_windows(
        OracleLM(64, wrong=set()),
        ids,
        [window],
        front=[],
        scheme=SamplingScheme(0.0, 0, 1.0),
        discover_p=0.5,
    )
    assert whole.extractable and whole.match_tokens == 8 and whole.pz["log10_p_z"] == 0.0


# --- the chunked projection -------------------------------------------------------------------


def tiny_gemma3(softcap: float | None):
    import torch
    from transformers import Gemma3ForCausalLM

    from tests.helpers.tiny_models import tiny_gemma3_config

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = Gemma3ForCausalLM(
            tiny_gemma3_config(400, sliding_window=4, final_logit_softcapping=softcap)
        )
    return model.eval()


def full_path(model, ids, options, scheme, monkeypatch):
    """The same windows read from the model's own forward (the fallback path)."""
    with monkeypatch.context() as patch:
        patch.setattr(xm, "_projection_matches", lambda *a: False)
        return batch_scores(model, ids, options, scheme)


def batch_scores(model, ids, options, scheme):
    windows = cut_windows(len(ids), options)
    out = []
    for first in range(0, len(windows), options.batch_windows):
        out += xm.score_windows(
            model,
            ids,
            windows[first : first + options.batch_windows],
            front=[2],
            scheme=scheme,
            discover_p=0.5,
        )
    return out


# A cap far below the tiny model's logits, so that capping changes them (Gemma 2 uses 30).
@pytest.mark.parametrize("softcap", [None, 0.05], ids=["no-softcap", "softcap"])
@pytest.mark.parametrize(
    "scheme", [SamplingScheme(1.0, 0, 1.0), SamplingScheme(1.0, 40, 1.0)], ids=lambda s: s.label()
)
def test_the_chunked_projection_reads_what_the_models_forward_gives(softcap, scheme, monkeypatch):
    import random

    model = tiny_gemma3(softcap)
    assert xm._projection_matches(model, __import__("torch").tensor([[2, 5, 6, 7]]), 2)
    ids = [random.Random(4).randrange(3, 400) for _ in range(60)]
    options = MapOptions(5, 20, 10, batch_windows=3)
    chunked = batch_scores(model, ids, options, scheme)
    full = full_path(model, ids, options, scheme, monkeypatch)
    for a, b in zip(chunked, full):
        assert (a.match_tokens, a.greedy_ids) == (b.match_tokens, b.greedy_ids)
        if b.pz["log10_p_z"] is None:
            assert a.pz["log10_p_z"] is None
        else:
            assert a.pz["log10_p_z"] == pytest.approx(b.pz["log10_p_z"], abs=1e-5)


def test_a_settled_window_stops_being_read_and_a_plain_scheme_reads_everything():
    import random

    model = tiny_gemma3(None)
    ids = [random.Random(5).randrange(3, 400) for _ in range(80)]
    options = MapOptions(5, 24, 12, batch_windows=4)
    narrow = batch_scores(model, ids, options, SamplingScheme(1.0, 1, 1.0))  # top-k 1
    assert any(s.pz["pz_read_tokens"] < 24 for s in narrow)
    assert all(s.pz["pz_tokens"] == 24 for s in narrow)
    plain = batch_scores(model, ids, options, SamplingScheme(1.0, 0, 1.0))
    assert all(s.pz["pz_read_tokens"] == 24 for s in plain)


def test_a_model_with_another_final_transform_is_read_from_its_forward(monkeypatch):
    import torch

    class Scaled(torch.nn.Module):
        """A model whose logits are twice its output layer's (Cohere-style logit scale)."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, **kwargs):
            out = self.inner(**kwargs)
            out.logits = out.logits * 2
            return out

        def get_decoder(self):
            return self.inner.get_decoder()

        def get_output_embeddings(self):
            return self.inner.get_output_embeddings()

    model = Scaled(tiny_gemma3(None))
    assert not xm._projection_matches(model, torch.tensor([[2, 5, 6, 7]]), 2)
    ids = list(range(10, 60))
    options = MapOptions(5, 10, 10, batch_windows=2)
    scheme = SamplingScheme(1.0, 0, 1.0)
    got = batch_scores(model, ids, options, scheme)
    full = full_path(model, ids, options, scheme, monkeypatch)
    assert [s.pz["log10_p_z"] for s in got] == pytest.approx([s.pz["log10_p_z"] for s in full])


# --- the text view ----------------------------------------------------------------------------


def text_map(scores, starts, text):
    import dataclasses

    blank = map_run.StoredMap(
        run_id=1,
        status="done",
        name="d",
        victim="v",
        text=text,
        document_tokens=len(starts),
        options=MapOptions(2, 2, 2),
        pz=map_run.PzSetting(),
        scores=scores,
        texts={},
        windows_total=len(scores),
        errors=0,
    )
    return dataclasses.replace(blank, token_starts=tuple(starts))


def window(index, matched, suffix_start, n=2):
    return xm.WindowScore(
        index=index,
        start=suffix_start - 2,
        suffix_start=suffix_start,
        suffix_tokens=n,
        match_tokens=matched,
        extractable=matched == n,
        greedy_ids=(),
        pz={},
    )


def test_the_text_view_colours_each_character_by_its_token_worked_by_hand():
    from memprobe_core.documents.map_report import TextSpan, text_spans

    # Tokens: "aa"(0) " b"(1) " cc"(2) " d"(3) " ee"(4) " f"(5) " g"(6); the leading " " of the
    # text belongs to no token and is outside. Window 0's suffix = tokens 2-3, both written back
    # (extracted); window 1's = tokens 4-5, the first written back; token 6 is in no suffix.
    text = "aa b cc d ee f g"
    starts = [0, 2, 4, 7, 9, 12, 14]
    spans = text_spans(text_map([window(0, 2, 2), window(1, 1, 4)], starts, text))
    assert spans == [
        TextSpan("aa b", "outside", None),
        TextSpan(" cc d", "extracted", 0),
        TextSpan(" ee", "written", 1),
        TextSpan(" f", "asked", 1),
        TextSpan(" g", "outside", None),
    ]
    assert "".join(s.text for s in spans) == text


def test_overlapping_suffixes_show_the_strongest_state():
    from memprobe_core.documents.map_report import text_spans

    text = "a b c d e"
    starts = [0, 1, 3, 5, 7]
    # Window 0 asks tokens 1-3 and writes none back; window 1 asks 2-4 and writes all back.
    scores = [window(0, 0, 1, n=3), window(1, 3, 2, n=3)]
    states = [(s.text, s.state, s.window) for s in text_spans(text_map(scores, starts, text))]
    assert states == [("a", "outside", None), (" b", "asked", 0), (" c d e", "extracted", 1)]


def test_the_text_view_escapes_the_document_and_needs_offsets(victim, tmp_path):
    from memprobe_core.documents.map_report import text_spans, text_view_html

    text = "<script>alert(1)</script> & " + looping_document(victim)
    store, run_id = start(victim, tmp_path, text)
    stored = map_run.run_map(store, run_id, victim)
    assert stored.token_starts is not None and len(stored.token_starts) == stored.document_tokens
    spans = text_spans(stored)
    assert "".join(s.text for s in spans) == text
    assert {s.state for s in spans} >= {"outside", "asked"}
    rendered = str(text_view_html(spans))
    assert "<script" not in rendered and "&lt;" in rendered
    # Every character is there, escaped: dropping the tags and unescaping gives the text back,
    # its control characters shown as escapes (escape_html).
    assert html.unescape(re.sub(r"<[^>]+>", "", rendered)) == show_controls(text)
    report = map_html(stored)
    assert "<script" not in report and rendered in report
    import dataclasses

    assert text_spans(dataclasses.replace(stored, token_starts=None)) is None
