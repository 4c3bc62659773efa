"""The two embedded models end to end: real weights, offline, on the CPU.

Uses the user's model cache (converting once if needed) and the session's loaded models
(tests/e2e/conftest.py), except the reload test, which converts into a temporary MEMPROBE_HOME
to time a first conversion against a cached reload, with a model cache of its own.
"""

from __future__ import annotations

import time

import pytest

from memprobe_core.metrics import rouge_l
from memprobe_core.models import clear_cache, embedded, load
from memprobe_core.snippets.split import Snippet, split

pytestmark = pytest.mark.slow

# Built-in fallback when the demo corpus is unavailable: the MIT licence's permission grant.
MIT_GRANT = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy\n"
    'of this software and associated documentation files (the "Software"), to deal\n'
    "in the Software without restriction, including without limitation the rights\n"
    "to use, copy, modify, merge, publish, distribute, sublicense, and/or sell\n"
    "copies of the Software, and to permit persons to whom the Software is\n"
    "furnished to do so, subject to the following conditions:\n\n"
    "The above copyright notice and this permission notice shall be included in all\n"
    "copies or substantial portions of the Software."
)
CAPITAL = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
GRANT = "Permission is hereby granted, free of charge"


def _needs(name: str) -> None:
    if not embedded.package_installed(name):
        pytest.skip(f"{embedded.EMBEDDED[name].distribution} is not installed")


def licence_snippets() -> list[Snippet]:
    """The MIT licences of the demo corpus, from their permission grant on (built-in if absent)."""
    try:
        from memprobe_core.snippets.corpus import demo_corpus

        found = [
            Snippet(s.id, s.text[s.text.index(GRANT) :], s.domain, s.source)
            for s in demo_corpus(domains="legal")
            if s.id.startswith("legal:mit") and GRANT in s.text
        ]
    except ImportError:
        found = []
    return found or [Snippet("mit-grant", MIT_GRANT, "legal", "built-in")]


def test_base_model_continues_licences_and_is_reproducible(embedded_base):
    gen = embedded_base
    cuts = [split(s, gen.tokenizer, 80, prefix_ratio=0.5) for s in licence_snippets()]  # 40 + 40
    rows = gen.generate([c.prefix for c in cuts], max_new_tokens=40)  # one batched call
    recalls = {c.snippet.id: round(rouge_l(row[0].text, c.suffix), 3) for c, row in zip(cuts, rows)}
    mean = sum(recalls.values()) / len(recalls)
    message = (
        f"gemma-3-270m ROUGE-L recall of licence suffixes: mean {mean:.3f}, per snippet {recalls}"
    )
    print(message)
    # A random model scores ~0.05; the real one continues the MIT grant largely verbatim.
    assert mean >= 0.3 and max(recalls.values()) >= 0.6, message
    first = gen.generate([cuts[0].prefix], max_new_tokens=12)
    assert first == gen.generate([cuts[0].prefix], max_new_tokens=12)


def test_instruct_model_answers_a_chat_and_is_reproducible(embedded_instruct):
    gen = embedded_instruct
    assert gen.has_chat_template
    chat = CAPITAL
    first = gen.generate([chat], max_new_tokens=24)[0][0]
    assert first == gen.generate([chat], max_new_tokens=24)[0][0]
    assert "Paris" in first.text, first.text
    assert first.finish_reason == "stop"
    sampled = gen.generate([chat], n=4, max_new_tokens=16, temperature=1.0, seed=0)[0]
    assert sampled == gen.generate([chat], n=4, max_new_tokens=16, temperature=1.0, seed=0)[0]


def test_cached_reload_is_much_faster_than_conversion(tmp_path, monkeypatch, private_model_cache):
    # private_model_cache: the clear_cache() calls below empty a cache of this test's own, so
    # the session's models (tests/e2e/conftest.py, and the CLI modules' load()) stay loaded.
    name = "smollm2-135m-instruct"
    _needs(name)
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path))
    clear_cache()
    started = time.perf_counter()
    load(name)
    convert_s = time.perf_counter() - started
    clear_cache()
    started = time.perf_counter()
    reloaded = load(name)
    reload_s = time.perf_counter() - started
    message = f"first conversion {convert_s:.1f} s, cached reload {reload_s:.2f} s"
    print(message)
    assert convert_s >= 5 * reload_s, message
    assert "Paris" in reloaded.generate([CAPITAL], max_new_tokens=24)[0][0].text
    clear_cache()
