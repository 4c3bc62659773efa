"""PAC (docs/method.md §8): the polarized distance by hand, the word swaps against the reference
code's own (src/eda.py, copied below), the whole signal written out in numpy on a tiny random
Llama with each text run alone, one forward call, the server path, validation, and
`memprobe audit --pac-augmentations`."""

from __future__ import annotations

import csv
import hashlib
import json
import random

import numpy as np
import pytest
import torch

from memprobe_core import models as models_pkg
from memprobe_core.cli.main import main
from memprobe_core.errors import OptionError
from memprobe_core.measuring import pac
from memprobe_core.membership import MeasureOptions
from memprobe_core.membership import signals as sig
from memprobe_core.models.openai import OpenAIGenerator
from memprobe_core.snippets.split import Snippet, split
from memprobe_core.store import Store
from tests.helpers.openai_server import serve
from tests.helpers.tiny_models import tiny_hf_generator
from tests.unit.membership.test_signals import counted

LICENCE = (
    "Licensed under the Apache License, Version 2.0 (the License); you may not use this file "
    "except in compliance with the License. You may obtain a copy of the License at"
)


@pytest.fixture(autouse=True)
def fresh_cache():
    sig.clear_cache()
    yield
    sig.clear_cache()


# --- the reference code (github.com/yyy01/PAC), as written there -----------------------------


def ref_swap_word(new_words):
    random_idx_1 = random.randint(0, len(new_words) - 1)
    random_idx_2 = random_idx_1
    counter = 0
    while random_idx_2 == random_idx_1:
        random_idx_2 = random.randint(0, len(new_words) - 1)
        counter += 1
        if counter > 3:
            return new_words
    new_words[random_idx_1], new_words[random_idx_2] = (
        new_words[random_idx_2],
        new_words[random_idx_1],
    )
    return new_words


def ref_random_swap(words, n):
    new_words = words.copy()
    for _ in range(n):
        new_words = ref_swap_word(new_words)
    return new_words


def ref_eda(sentence, alpha=0.3, num_aug=5):
    words = sentence.split(" ")
    n_rs = max(1, int(alpha * len(words)))
    augmented = [" ".join(ref_random_swap(words, n_rs)) for _ in range(num_aug)]
    random.shuffle(augmented)
    return augmented[:num_aug]


def ref_polarized_distance(prob_list, ratio_local=0.3, ratio_far=0.05):
    local_region_length = max(int(len(prob_list) * ratio_local), 1)
    far_region_length = max(int(len(prob_list) * ratio_far), 1)
    local_region = np.sort(prob_list)[:local_region_length]
    far_region = np.sort(prob_list)[::-1][:far_region_length]
    return np.mean(far_region) - np.mean(local_region)


def text_seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


# --- hand-worked and against the reference ----------------------------------------------------


def test_polarized_distance_by_hand():
    lps = [-float(i) for i in range(1, 11)]  # −1 … −10
    # lowest int(10 · 0.3) = 3: −10 −9 −8 (mean −9); highest max(1, int(0.5)) = 1: −1
    assert pac.polarized_distance(lps, 30, 5) == pytest.approx(8.0)
    assert pac.polarized_distance(lps, 50, 20) == pytest.approx(-1.5 - -8.0)  # 5 low, 2 high
    assert pac.polarized_distance([-2.0], 30, 5) == 0.0
    for n in range(1, 60):  # int() truncation exactly as the reference, at every length
        values = list(np.random.default_rng(n).normal(size=n))
        assert pac.polarized_distance(values, 30, 5) == pytest.approx(
            ref_polarized_distance(values)
        )


@pytest.mark.parametrize("text", [LICENCE, "one", "two words", "a  b\nc d e f g h i j k l"])
def test_the_swaps_are_the_reference_codes_with_the_same_seed(text):
    random.seed(text_seed(text))
    want = ref_eda(text, alpha=0.3, num_aug=5)
    got = pac.augment(text, 5, 0.3)
    assert sorted(got) == sorted(want)  # eda shuffles its list; PAC averages over it
    assert pac.augment(text, 5, 0.3) == got  # the same copies every time
    assert all(sorted(c.split(" ")) == sorted(text.split(" ")) for c in got)  # only swaps


def test_one_word_has_nothing_to_swap_and_pac_is_zero():
    assert pac.augment("word", 3, 0.3) == ["word"] * 3
    assert pac.pac_score([-1.0, -2.0], [[-1.0, -2.0]] * 3, 30, 5) == 0.0
    assert pac.pac_score([-1.0], [[]], 30, 5) is None


# --- differential: the signal in numpy on a real model ---------------------------------------


def alone_log_probs(model, tok, text, adds_bos):
    """ℓ of a text run by itself (no batch, no padding), the reference's calculate_probs."""
    row = ([tok.bos_token_id] if adds_bos else []) + tok.encode(text, add_special_tokens=False)
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([row])).logits[0].double()
    logp = torch.log_softmax(logits, -1)[:-1]
    return logp[torch.arange(len(row) - 1), torch.tensor(row[1:])].numpy()


@pytest.mark.parametrize("adds_bos", [False, True])
def test_equals_the_reference_formula_on_a_tiny_llama(adds_bos):
    victim = tiny_hf_generator(seed=2, adds_bos=adds_bos)
    tok, model = victim.tokenizer, victim.torch_model
    piece = split(Snippet("lic", LICENCE), tok, 40)
    calls = counted(model)
    out = sig.compute_signals(victim, piece, MeasureOptions(pac_augmentations=5))
    assert len(calls) == 1  # x, lower(x) and the five copies in one forward call
    random.seed(text_seed(piece.text))
    copies = ref_eda(piece.text, alpha=0.3, num_aug=5)
    own = ref_polarized_distance(alone_log_probs(model, tok, piece.text, adds_bos))
    others = [ref_polarized_distance(alone_log_probs(model, tok, c, adds_bos)) for c in copies]
    assert out["pac"] == pytest.approx(own - np.mean(others), rel=1e-4, abs=1e-5)
    assert out["pac"] != 0.0
    plain = sig.compute_signals(victim, piece, MeasureOptions())
    assert "pac" not in plain
    assert plain["loss"] == pytest.approx(out["loss"], rel=1e-5)  # the copies change no x


def test_a_black_box_victim_gets_the_value_its_weights_give():
    victim = tiny_hf_generator(seed=2, adds_bos=True)
    piece = split(Snippet("lic", LICENCE), "whitespace", 20)
    options = MeasureOptions(pac_augmentations=4, pac_swap_rate=0.5)
    white = sig.compute_signals(victim, piece, options)
    sig.clear_cache()
    with serve(victim, "m") as srv:
        gen = OpenAIGenerator("m", base_url=srv.base_url, backoff_s=0.01, max_retries=0)
        black = sig.compute_signals(gen, piece, options)
    assert black["scored_by"] == "server"
    assert black["pac"] == pytest.approx(white["pac"], rel=1e-4, abs=1e-5)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pac_augmentations", -1),
        ("pac_augmentations", 33),
        ("pac_augmentations", 1.5),
        ("pac_augmentations", True),
        ("pac_swap_rate", 0),
        ("pac_swap_rate", 1.5),
        ("pac_low_percent", 0),
        ("pac_high_percent", 101),
    ],
)
def test_bad_pac_options_are_refused_naming_them(field, value):
    with pytest.raises(OptionError, match=f"{field}="):
        MeasureOptions(**{field: value})


# --- the CLI ----------------------------------------------------------------------------------


@pytest.fixture
def tiny_models(monkeypatch):
    gen = tiny_hf_generator(seed=2)
    monkeypatch.setattr(models_pkg, "load", lambda name, *, backend=None, **kw: gen)
    return gen


MODELS = ["--victim", "tiny-v", "--base", "tiny-b", "--attacker", "tiny-a"]
ROWS = [
    (LICENCE, "member"),
    ("Permission is hereby granted, free of charge, to any person obtaining a copy", "member"),
    ("The river office opens at nine and closes before the evening bus leaves town", "nonmember"),
    ("A list of the shops on the high street, with their opening hours and phones", "nonmember"),
]


def test_audit_stores_pac_per_unit_and_the_report_scores_it(tiny_models, tmp_path, capsys):
    data = tmp_path / "labelled.csv"
    with data.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(ROWS)
    store = tmp_path / "runs.sqlite"
    args = ["--store", str(store), "audit", str(data), "--methods", "ps_base", "--lengths", "16"]
    args += [*MODELS, "--pac-augmentations", "3", "--pac-swap-rate", "0.5"]
    assert main(args) == 0, capsys.readouterr().err
    capsys.readouterr()
    with Store(store) as opened:
        run = opened.list_runs()[0]
        frame = opened.results_frame(run["id"])
        units = opened.units(run["id"])
        snippets = {s.id: s for s in opened.samples(run["id"])}
    measure = run["config"]["options"]["measure"]
    assert (measure["pac_augmentations"], measure["pac_swap_rate"]) == (3, 0.5)
    options = MeasureOptions.from_dict(measure)
    sig.clear_cache()
    for unit in units:
        piece = split(snippets[unit["key"].snippet_id], tiny_models.tokenizer, 16)
        again = sig.compute_signals(tiny_models, piece, options)["pac"]
        assert unit["membership"]["pac"] == pytest.approx(again, rel=1e-6)
    assert frame["signal_pac"].notna().all() and len(frame) == 4
    report = ["--store", str(store), "report", str(run["id"])]
    assert main([*report, "--json"]) == 0
    rows = {row["score"]: row for row in json.loads(capsys.readouterr().out)["membership"]}
    assert (rows["pac"]["n_members"], rows["pac"]["n_nonmembers"]) == (2, 2)
    results_csv = tmp_path / "results.csv"
    assert main([*report, "--csv", str(results_csv)]) == 0
    with results_csv.open(encoding="utf-8") as handle:
        assert all(r["signal_pac"] != "" for r in csv.DictReader(handle))


@pytest.mark.parametrize(
    ("flag", "value"), [("--pac-augmentations", "-1"), ("--pac-swap-rate", "0")]
)
def test_bad_pac_flags_exit_2_naming_them(tiny_models, tmp_path, capsys, flag, value):
    args = ["--store", str(tmp_path / "runs.sqlite"), "audit", "--corpus", "--per-domain", "1"]
    assert main([*args, *MODELS, flag, value]) == 2
    assert flag in capsys.readouterr().err
