"""DC-PDD (docs/method.md §8): hand-worked values on the bigram, the definition written out in
numpy on a tiny random Llama's own logits, leave-one-out for counted non-members, the stored
table, what is not measurable, and `memprobe audit --dc-pdd-corpus / --dc-pdd-nonmembers`."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict

import numpy as np
import pytest
import torch

from memprobe_core import models as models_pkg
from memprobe_core.cli.main import main
from memprobe_core.errors import OptionError, UsageError
from memprobe_core.measuring import dc_pdd as dc
from memprobe_core.membership import MeasureOptions
from memprobe_core.membership import signals as sig
from memprobe_core.models import measure_cache as mc
from memprobe_core.models.openai import OpenAIGenerator
from memprobe_core.snippets.split import Snippet, split
from memprobe_core.store import Store
from tests.helpers.openai_server import serve
from tests.helpers.tiny_models import tiny_hf_generator
from tests.unit.membership.test_signals import bigram_victim, piece_of

LICENCE = (
    "Licensed under the Apache License, Version 2.0 (the License); you may not use this file "
    "except in compliance with the License. You may obtain a copy of the License at the the"
)
REFERENCE = [
    "The river office opens at nine and closes before the evening bus.",
    "License terms: you may copy the file, and the License applies to the copy.",
    "",
]


@pytest.fixture(autouse=True)
def fresh_cache():
    sig.clear_cache()
    yield
    sig.clear_cache()


def table(counts: dict[int, int], tokenizer_name: str = "chars", **kwargs) -> dc.TokenFrequencies:
    return dc.TokenFrequencies(
        source=kwargs.pop("source", "corpus"),
        origin="test",
        tokenizer=tokenizer_name,
        texts=1,
        total=sum(counts.values()),
        counts=dc.encode_counts(counts),
        **kwargs,
    )


# --- hand-worked ------------------------------------------------------------------------------


def test_hand_worked_on_the_bigram():
    """With BOS, "abAAb" scores ids a b A A b with p = 1/2 1/2 1/2 1/8 1/4. First occurrences:
    a, b, A (p = 1/2 each). Counts a:6 b:2 (A never), C = 8, V = 4 (the bigram's logits):
    f = 7/12, 3/12, 1/12; α = ½ ln(12/7), ½ ln 4, ½ ln 12. With a = 0.5 the last two are cut."""
    victim = bigram_victim()
    counts = {0: 6, 1: 2}
    expected = [0.5 * math.log(12 / 7), 0.5 * math.log(4), 0.5 * math.log(12)]
    out = sig.compute_signals(
        victim, piece_of(victim), MeasureOptions(dc_pdd_frequencies=table(counts), dc_pdd_cap=10)
    )
    assert out["dc_pdd"] == pytest.approx(sum(expected) / 3, rel=1e-6)
    capped = sig.compute_signals(
        victim, piece_of(victim), MeasureOptions(dc_pdd_frequencies=table(counts), dc_pdd_cap=0.5)
    )
    assert capped["dc_pdd"] == pytest.approx((expected[0] + 0.5 + 0.5) / 3, rel=1e-6)
    # Without BOS the first a is not scored: b|a, A|b, A|A, b|A (p = 1/2 1/2 1/8 1/4); first
    # occurrences b and A, p = 1/2 each: α = ½ ln 4, ½ ln 12.
    plain = bigram_victim(bos=False)
    out = sig.compute_signals(
        plain, piece_of(plain), MeasureOptions(dc_pdd_frequencies=table(counts), dc_pdd_cap=10)
    )
    assert out["dc_pdd"] == pytest.approx((0.5 * math.log(4) + 0.5 * math.log(12)) / 2, rel=1e-6)


def test_only_the_first_occurrence_counts_and_the_cap_applies():
    counts = {7: 3}
    # tokens 7, 9, 7: the second 7 (p = 1, would be α = log(1/f) ≫ the others) is dropped
    lps = [math.log(0.5), math.log(0.25), 0.0]
    f7, f9 = (3 + 1) / (3 + 10), (0 + 1) / (3 + 10)
    want = (0.5 * -math.log(f7) + 0.25 * -math.log(f9)) / 2
    assert dc.dc_pdd_score(lps, [7, 9, 7], counts, 3, 10, cap=1.0) == pytest.approx(want)
    assert dc.dc_pdd_score(lps, [7, 9, 7], counts, 3, 10, cap=0.01) == pytest.approx(0.01)
    assert dc.dc_pdd_score([], [], counts, 3, 10, cap=1.0) is None


# --- differential: the definition in numpy on a real model's logits ---------------------------


def numpy_dc_pdd(model, tok, text_ids, adds_bos, references, cap):
    """DC-PDD as com_det_sco.py spells it, from transformers' logits directly."""
    vocab = model.config.vocab_size
    counts = np.zeros(vocab, dtype=np.int64)
    for ref in references:
        for i in tok.encode(ref, add_special_tokens=False)[:1024]:
            counts[i] += 1
    smoothed = (counts + 1) / (counts.sum() + vocab)
    row = ([tok.bos_token_id] if adds_bos else []) + list(text_ids)
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([row])).logits[0].double()
    logp = torch.log_softmax(logits, -1)[:-1].numpy()
    targets = np.array(row[1:])
    probs = np.exp(logp[np.arange(len(targets)), targets])
    first, seen = [], []
    for i, t in enumerate(targets):
        if t not in seen:
            first.append(i)
            seen.append(t)
    alpha = probs[first] * np.log(1 / smoothed[targets[first]])
    alpha[alpha > cap] = cap
    return float(np.mean(alpha))


@pytest.mark.parametrize("adds_bos", [False, True])
@pytest.mark.parametrize("cap", [0.01, 1.0])
def test_equals_the_reference_formula_on_a_tiny_llama(adds_bos, cap):
    victim = tiny_hf_generator(seed=2, adds_bos=adds_bos)
    tok = victim.tokenizer
    piece = split(Snippet("lic", LICENCE), tok, 40)
    counted = dc.frequencies(
        tok, REFERENCE, source="corpus", origin="ref", tokenizer_name=mc.tokenizer_name(tok)
    )
    out = sig.compute_signals(
        victim, piece, MeasureOptions(dc_pdd_frequencies=counted, dc_pdd_cap=cap)
    )
    ids = [*piece.prefix_ids, *piece.suffix_ids]
    want = numpy_dc_pdd(victim.torch_model, tok, ids, adds_bos, REFERENCE, cap)
    assert out["dc_pdd"] == pytest.approx(want, rel=1e-5, abs=1e-9)
    assert 0 < out["dc_pdd"] <= cap


def test_a_counted_nonmember_is_scored_leave_one_out():
    victim = tiny_hf_generator(seed=2)
    tok = victim.tokenizer
    name = mc.tokenizer_name(tok)
    snippets = [
        Snippet("m0", LICENCE, label="member"),
        Snippet("n0", LICENCE, label="nonmember"),  # the same text as the member
        Snippet("n1", REFERENCE[0], label="nonmember"),
        Snippet("n2", REFERENCE[1], label="nonmember"),
    ]
    counted = dc.nonmember_frequencies(tok, snippets, name)
    assert counted.counted_ids == ("n0", "n1", "n2") and counted.texts == 3
    options = MeasureOptions(dc_pdd_frequencies=counted, dc_pdd_cap=1.0)
    member = sig.compute_signals(victim, split(snippets[0], tok, 40), options)
    nonmember = sig.compute_signals(victim, split(snippets[1], tok, 40), options)
    # n0 is scored against n1 and n2 only; m0 (same text) against all three.
    others = dc.frequencies(tok, REFERENCE[:2], source="corpus", origin="o", tokenizer_name=name)
    alone = sig.compute_signals(
        victim,
        split(Snippet("x", LICENCE), tok, 40),
        MeasureOptions(dc_pdd_frequencies=others, dc_pdd_cap=1.0),
    )
    assert nonmember["dc_pdd"] == pytest.approx(alone["dc_pdd"], rel=1e-9)
    assert member["dc_pdd"] < nonmember["dc_pdd"]  # its own tokens counted: more frequent
    with pytest.raises(UsageError, match="non-members"):
        dc.nonmember_frequencies(tok, snippets[:1], name)


# --- not measurable, stored, validated --------------------------------------------------------


def test_black_box_or_another_tokenizer_gives_none_not_zero(caplog):
    victim = tiny_hf_generator(seed=2, adds_bos=True)
    piece = split(Snippet("lic", LICENCE), "whitespace", 20)
    options = MeasureOptions(dc_pdd_frequencies=table({5: 3}, tokenizer_name="other"))
    white = sig.compute_signals(victim, piece, options)
    assert white["dc_pdd"] is None and white["loss"] is not None
    assert "counted with tokenizer 'other'" in caplog.text
    with serve(victim, "m") as srv:
        gen = OpenAIGenerator("m", base_url=srv.base_url, backoff_s=0.01, max_retries=0)
        black = sig.compute_signals(gen, piece, options)
    assert black["scored_by"] == "server" and black["dc_pdd"] is None
    assert "server tokenizes" in caplog.text
    assert "dc_pdd" not in sig.compute_signals(victim, piece, MeasureOptions())


def test_the_table_round_trips_through_a_stored_config_and_keys_the_cache():
    counts = {0: 6, 1: 2, 40_000: 1}
    assert dc.decode_counts(dc.encode_counts(counts)) == counts
    options = MeasureOptions(dc_pdd_frequencies=table(counts, counted_ids=("a",)), dc_pdd_cap=10)
    stored = json.loads(json.dumps(asdict(options)))
    assert MeasureOptions.from_dict(stored) == options
    victim = bigram_victim()
    first = sig.compute_signals(victim, piece_of(victim), options)
    other = MeasureOptions(dc_pdd_frequencies=table({0: 1}), dc_pdd_cap=10)
    assert sig.compute_signals(victim, piece_of(victim), other)["dc_pdd"] != first["dc_pdd"]


@pytest.mark.parametrize("cap", [0, -0.01, float("nan"), float("inf"), "0.01", True])
def test_a_bad_cap_is_refused_naming_it(cap):
    with pytest.raises(OptionError, match="dc_pdd_cap="):
        MeasureOptions(dc_pdd_cap=cap)


def test_an_empty_corpus_is_refused_naming_it():
    tok = tiny_hf_generator(seed=2).tokenizer
    with pytest.raises(UsageError, match="corpus empty.txt: no text"):
        dc.frequencies(tok, ["", ""], source="corpus", origin="empty.txt", tokenizer_name="t")


# --- the CLI: counted once, kept in the config, stored per unit, in the report ----------------


@pytest.fixture
def tiny_models(monkeypatch):
    """Every model name loads the same tiny random Llama (white-box: signals are measured)."""
    gen = tiny_hf_generator(seed=2)
    monkeypatch.setattr(models_pkg, "load", lambda name, *, backend=None, **kw: gen)
    return gen


def labelled_csv(path, rows):
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


ROWS = [
    (LICENCE, "member"),
    (
        "Permission is hereby granted, free of charge, to any person obtaining a copy of it",
        "member",
    ),
    (REFERENCE[0] + " " + REFERENCE[0], "nonmember"),
    (REFERENCE[1] + " " + REFERENCE[1], "nonmember"),
]
MODELS = ["--victim", "tiny-v", "--base", "tiny-b", "--attacker", "tiny-a"]


@pytest.mark.parametrize("source", ["corpus", "nonmembers"])
def test_audit_stores_dc_pdd_per_unit_and_the_report_scores_it(
    tiny_models, tmp_path, capsys, source
):
    data = labelled_csv(tmp_path / "labelled.csv", ROWS)
    corpus = tmp_path / "reference.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in REFERENCE[:2]), "utf-8")
    flag = ["--dc-pdd-corpus", str(corpus)] if source == "corpus" else ["--dc-pdd-nonmembers"]
    store = tmp_path / "runs.sqlite"
    args = ["--store", str(store), "audit", str(data), "--methods", "ps_base", "--lengths", "16"]
    assert main([*args, *MODELS, "--seed", "1", *flag]) == 0, capsys.readouterr().err
    assert "DC-PDD: " in capsys.readouterr().err  # what was counted, said once
    with Store(store) as opened:
        run = opened.list_runs()[0]
        counted = run["config"]["options"]["measure"]["dc_pdd_frequencies"]
        frame = opened.results_frame(run["id"])
        units = opened.units(run["id"])
    assert counted["source"] == source and counted["tokenizer"] == mc.tokenizer_name(
        tiny_models.tokenizer
    )
    assert counted["counted_ids"] == ([] if source == "corpus" else ["labelled:3", "labelled:4"])
    # The unit's manifest names the table, it does not copy it.
    manifest_counts = units[0]["manifest"]["options"]["measure"]["dc_pdd_frequencies"]
    assert "counts" not in manifest_counts and manifest_counts["total"] == counted["total"]
    # Each unit's value is the one the stored table gives (as a resume or a Ray worker would).
    options = MeasureOptions.from_dict(run["config"]["options"]["measure"])
    with Store(store) as opened:
        snippets = {s.id: s for s in opened.samples(run["id"])}
    sig.clear_cache()
    for unit in units:
        piece = split(snippets[unit["key"].snippet_id], tiny_models.tokenizer, 16)
        again = sig.compute_signals(tiny_models, piece, options)["dc_pdd"]
        assert unit["membership"]["dc_pdd"] == pytest.approx(again, rel=1e-6)
        assert 0 < again <= options.dc_pdd_cap
    assert frame["signal_dc_pdd"].notna().all() and len(frame) == 4
    assert main(["--store", str(store), "report", str(run["id"]), "--json"]) == 0
    rows = {row["score"]: row for row in json.loads(capsys.readouterr().out)["membership"]}
    assert (rows["dc_pdd"]["n_members"], rows["dc_pdd"]["n_nonmembers"]) == (2, 2)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--dc-pdd-corpus", "missing.jsonl"], "--dc-pdd-corpus missing.jsonl"),
        (["--dc-pdd-corpus", "EMPTY"], "the reference corpus has no text"),
        (["--dc-pdd-cap", "0.1"], "--dc-pdd-cap applies to DC-PDD"),
        (["--dc-pdd-nonmembers", "--dc-pdd-cap", "-1"], "--dc-pdd-cap -1.0"),
        (["--dc-pdd-nonmembers", "--dc-pdd-corpus", "x.txt"], "not allowed with"),
    ],
)
def test_bad_dc_pdd_input_exits_2_naming_it(tiny_models, tmp_path, capsys, extra, message):
    data = labelled_csv(tmp_path / "labelled.csv", ROWS)
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"text": ""}) + "\n", "utf-8")
    extra = [str(empty) if e == "EMPTY" else e for e in extra]
    store = tmp_path / "runs.sqlite"
    args = ["--store", str(store), "audit", str(data), "--methods", "ps_base", "--lengths", "16"]
    assert main([*args, *MODELS, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not store.exists() or not Store(store).list_runs()  # nothing was recorded
