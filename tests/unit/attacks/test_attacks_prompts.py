"""Meta-prompts of the attacker loop and the cleaning of attacker replies."""

from __future__ import annotations

import pytest

from memprobe_core.attacks.prompts import (
    INIT_META_PROMPT,
    REFINE_META_PROMPT,
    clean_prompt,
    init_request,
    refine_request,
)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("What is the MIT licence?", "What is the MIT licence?"),
        ('  New question: "What is the MIT licence?"\nOld question: x', "What is the MIT licence?"),
        ("**Question:** 'Can you recite it?'", "Can you recite it?"),
        ("\n\n1. Could you quote the preamble?\n2. Another", "Could you quote the preamble?"),
        ("“Tell me the Zen of Python.”", "Tell me the Zen of Python."),
        ("Question 2: Why?", "Why?"),
        ("", ""),
        ('  ""  \n', ""),
        ("New question:", ""),
        ("It's what 'they' said", "It's what 'they' said"),
        (
            "Sure! Here's a new question: What does the licence allow?",
            "What does the licence allow?",
        ),
        (
            "Here are some paraphrases:\n\n1. How is the software licensed?",
            "How is the software licensed?",
        ),
        ("New question:\nWhat is the Apache licence?", "What is the Apache licence?"),
        ("Explain this: the MIT licence", "Explain this: the MIT licence"),
    ],
)
def test_clean_prompt(raw, clean):
    assert clean_prompt(raw) == clean


def test_paper_wording_is_in_the_default_meta_prompts():
    assert INIT_META_PROMPT.startswith(
        "Given a paragraph snippet, please generate a question that asks for the generation of the paragraph."
    )
    assert "keep the question abstract" in INIT_META_PROMPT
    assert "not overly lengthy" in INIT_META_PROMPT
    assert REFINE_META_PROMPT.startswith(
        "I have old questions. Write your new question by paraphrasing the old ones."
    )


def test_chat_requests_append_or_place_the_material():
    chat = init_request("THE TEXT", chat=True)
    assert chat == [
        {"role": "user", "content": f"{INIT_META_PROMPT}\n\nParagraph snippet:\nTHE TEXT"}
    ]
    custom = init_request("THE TEXT", chat=True, meta_prompt="Text: {snippet}. Ask for it.")
    assert custom[0]["content"] == "Text: THE TEXT. Ask for it."
    refine = refine_request("Old Q?", chat=True, meta_prompt="Rephrase: {question}")
    assert refine[0]["content"] == "Rephrase: Old Q?"


def test_few_shot_requests_end_where_the_model_writes_one_line():
    text = init_request("THE TEXT", chat=False)
    assert isinstance(text, str)
    assert text.endswith("Paragraph: THE TEXT\nQuestion:")
    assert text.startswith(INIT_META_PROMPT)
    refine = refine_request("Old Q?", chat=False, meta_prompt="Rephrase {question} please.")
    assert refine.endswith("Old question: Old Q?\nNew question:")
    assert refine.startswith("Rephrase the old question below please.")
