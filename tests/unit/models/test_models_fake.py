"""The fake backend: a memorizing victim with a graded signal, a seeded attacker, simple modes."""

from __future__ import annotations

import pytest

from memprobe_core.attacks.prompts import init_request, refine_request
from memprobe_core.metrics import rouge_l
from memprobe_core.models import ModelError, load
from memprobe_core.models.fake import FakeGenerator

MEMORY = (
    "It was a bright cold day in April and the clocks were striking thirteen while the wind "
    "swept dust along the empty streets of the old town where nobody walked after dark and the "
    "lamps burned low in every window facing the square near the river bank under grey skies"
)


@pytest.fixture
def victim() -> FakeGenerator:
    return FakeGenerator("victim", memory=[MEMORY])


def test_victim_signal_grows_with_the_match(victim):
    words = MEMORY.split()
    prefix, suffix = " ".join(words[:20]), " ".join(words[20:40])
    full = victim.generate([prefix], max_new_tokens=20)[0][0].text
    tail = victim.generate(["please continue: " + " ".join(words[16:20])], max_new_tokens=20)[0][
        0
    ].text
    none = victim.generate(["completely unrelated request about cooking pasta"], max_new_tokens=20)[
        0
    ][0].text
    scores = [rouge_l(out, suffix) for out in (full, tail, none)]
    assert full == suffix and scores[0] == 1.0
    assert scores[0] > scores[1] > scores[2], scores


def test_victim_is_deterministic_and_respects_max_tokens(victim):
    prompt = " ".join(MEMORY.split()[:15])
    a = victim.generate([prompt], n=2, max_new_tokens=7)
    assert a == victim.generate([prompt], n=2, max_new_tokens=7)
    assert a[0][0].num_tokens == 7 and a[0][0].finish_reason == "length"


def test_victim_defaults_to_demo_corpus():
    from memprobe_core.snippets.corpus import demo_corpus

    snippet = demo_corpus(domains="legal")[0].text.split()
    out = load("fake:victim").generate([" ".join(snippet[:40])], max_new_tokens=15)[0][0]
    assert out.text == " ".join(snippet[40:55])


def test_attacker_greedy_fixed_sampling_varied_and_seeded():
    attacker = FakeGenerator("attacker")
    material = " ".join(MEMORY.split()[:40])
    request = init_request(material, chat=False)
    greedy = attacker.generate([request], n=3, max_new_tokens=80)[0]
    assert len({c.text for c in greedy}) == 1
    sampled = attacker.generate([request], n=8, max_new_tokens=80, temperature=1.0, seed=0)[0]
    assert len({c.text for c in sampled}) >= 5
    assert (
        sampled == attacker.generate([request], n=8, max_new_tokens=80, temperature=1.0, seed=0)[0]
    )
    for c in sampled:
        assert "\n" not in c.text
        assert set(c.text.split()) & set(material.split())
        assert "Question" not in c.text


def test_auto_mode_switches_on_question_requests():
    fake = load("fake")
    ask = refine_request("How does the old poem begin?", chat=True)
    out = fake.generate([ask], max_new_tokens=40)[0][0].text
    assert "poem" in out
    assert fake.manifest()["mode"] == "auto"


def test_echo_copy_and_bad_mode():
    assert load("fake:echo").generate(["a b c"])[0][0].text == "a b c"
    copy = load("fake:copy:the fixed answer").generate(["anything"], max_new_tokens=2)[0][0]
    assert (copy.text, copy.num_tokens, copy.finish_reason) == ("the fixed", 2, "length")
    with pytest.raises(ModelError, match="unknown"):
        load("fake:telepathy")


def test_fake_tokenizer_and_chat_flag():
    fake = load("fake", chat_template=True)
    assert fake.has_chat_template and not fake.white_box
    assert fake.tokenizer.decode(fake.tokenizer.encode("x y z")) == "x y z"
