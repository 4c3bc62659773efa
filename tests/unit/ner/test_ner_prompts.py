"""Prompt slots, properties, the template generator, prompt files and LLM generation (stub)."""

from __future__ import annotations

from collections import Counter

import pytest

from memprobe_core.models.scripted import Ask, ScriptedGenerator
from memprobe_core.ner.generation import generate_prompts, meta_prompt, parse_generated
from memprobe_core.ner.prompts import (
    PROMPT_TYPES,
    Prompt,
    PromptError,
    check_prompts,
    fill,
    guess_prompt_type,
    name_position,
    prompt_length,
    read_prompts,
    template_prompts,
)


def test_fill_returns_the_name_span() -> None:
    text, start, end = fill("Did {name} call {x}?", "Anna Lee")
    assert text == "Did Anna Lee call {x}?" and text[start:end] == "Anna Lee"


def test_slot_validation_names_the_index() -> None:
    with pytest.raises(PromptError, match="prompt 2 has no name slots"):
        check_prompts(["{name} ok", "ok {name}", "none"])
    with pytest.raises(PromptError, match="prompt 0 has 2 name slots"):
        check_prompts(["{name} and {name}"])
    with pytest.raises(PromptError, match="no prompts"):
        check_prompts([])
    checked = check_prompts(["Why did {name} leave?"])
    assert checked == [Prompt("Why did {name} leave?", "interrogative", "user")]


def test_properties() -> None:
    assert name_position("{name} left.") == "start"
    assert name_position("We met {name}!") == "end"
    assert name_position("Did {name} call?") == "middle"
    assert prompt_length("Did {name} call you, yesterday?") == 5
    assert guess_prompt_type("Why did {name} go?") == "interrogative"
    assert guess_prompt_type("What a day for {name}!") == "exclamatory"
    assert guess_prompt_type("Please call {name}.") == "imperative"
    assert guess_prompt_type("{name} called.") == "declarative"


def test_template_prompts_are_balanced_distinct_and_seeded() -> None:
    prompts = template_prompts(40, seed=3)
    assert len(prompts) == 40 and len({p.text for p in prompts}) == 40
    assert Counter(p.type for p in prompts) == {t: 10 for t in PROMPT_TYPES}
    assert all(
        p.text.count("{name}") == 1 and "{" not in p.text.replace("{name}", "") for p in prompts
    )
    assert {p.name_position for p in prompts} == {"start", "middle", "end"}
    assert template_prompts(40, seed=3) == prompts
    assert template_prompts(40, seed=4) != prompts
    assert len(template_prompts(400)) == 400
    with pytest.raises(PromptError, match="between 1 and"):
        template_prompts(10**6)


def test_read_prompts_txt_and_csv(tmp_path) -> None:
    txt = tmp_path / "p.txt"
    txt.write_text("# mine\nDid {name} call?\n\n{name} left.\n", encoding="utf-8")
    assert [p.type for p in read_prompts(txt)] == ["interrogative", "declarative"]
    csv = tmp_path / "p.csv"
    csv.write_text('prompt,type\n"Tell {name}, now.",imperative\nHi {name}!,\n', encoding="utf-8")
    assert [(p.text, p.type, p.source) for p in read_prompts(csv)] == [
        ("Tell {name}, now.", "imperative", "file"),
        ("Hi {name}!", "exclamatory", "file"),
    ]
    bad = tmp_path / "bad.txt"
    bad.write_text("fine {name}\nbroken\n", encoding="utf-8")
    with pytest.raises(PromptError, match=r"bad.txt: prompt 1 has no name slots"):
        read_prompts(bad)


def stub_generator(replies: dict[str, str]) -> ScriptedGenerator:
    """Answers each chat with a fixed reply for its prompt type (asked for in the meta-prompt)."""

    def answer(ask: Ask) -> str:
        return replies[next(t for t in PROMPT_TYPES if f" {t} " in ask.content)]

    return ScriptedGenerator(answer, model_id="stub")


REPLIES = {
    "declarative": "Here are sentences:\n1. [NAME] opened the new school.\n2. Yesterday {name} won the race.\n"
    "3. [NAME] met [NAME] there.\n- <name> signed it.",
    "exclamatory": "1. What a goal by [PERSON]!\n2. [NAME] won again.",
    "imperative": "* Tell [NAME] to wait.\n* Ask {{name}} about the plan.",
    "interrogative": "1. Did [NAME] call you?\n2. Did [NAME] call you?\n3. Where is [NAME]",
}


def test_parse_generated_normalises_and_rejects() -> None:
    kept, rejected = parse_generated(REPLIES["declarative"], "declarative")
    assert [p.text for p in kept] == [
        "{name} opened the new school.",
        "Yesterday {name} won the race.",
        "{name} signed it.",
    ]
    assert {r.reason for r in rejected} == {"no name slot", "2 name slots"}
    kept, rejected = parse_generated(REPLIES["interrogative"], "interrogative")
    assert [p.text for p in kept] == ["Did {name} call you?"]
    assert sorted(r.reason for r in rejected) == ["duplicate", "not a question"]


def test_generate_prompts_through_the_generator_contract() -> None:
    gen = stub_generator(REPLIES)
    progress: list[tuple[int, int, str]] = []
    report = generate_prompts(
        gen, n_per_type=2, per_request=5, max_rounds=2, on_progress=lambda *a: progress.append(a)
    )
    by_type = Counter(p.type for p in report.prompts)
    assert by_type == {"declarative": 2, "exclamatory": 1, "imperative": 2, "interrogative": 1}
    assert all(p.source == "llm" and p.text.count("{name}") == 1 for p in report.prompts)
    # Round 2 only asks again for the two types still short.
    assert report.requests == 4 + 2 and gen.stats.calls == 2
    assert report.rejection_counts()["duplicate"] >= 1
    assert progress[-1][:2] == (2, 2)
    assert "[NAME]" in meta_prompt("imperative") and "exactly once" in meta_prompt("imperative")
