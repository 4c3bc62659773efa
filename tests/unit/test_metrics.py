"""memprobe_core.metrics: the fast ROUGE-L equals rouge-score exactly; Mem, LCS_P, Dis, O."""

from __future__ import annotations

import random

import pytest
from rouge_score.rouge_scorer import RougeScorer

from memprobe_core.config import ScoringConfig
from memprobe_core.metrics import (
    Scores,
    apply_output_window,
    dis,
    lcs_p,
    mem,
    objective,
    rouge_l,
    rouge_l_batch,
    rouge_tokens,
    score_candidates,
)
from memprobe_core.snippets.split import WhitespaceTokenizer

# Words chosen to exercise the tokenizer: stems (running/runs/ran), short words (not stemmed),
# digits, mixed case, non-ASCII (dropped or split by the rouge tokenizer), punctuation glued to
# words, underscores, the Kelvin sign (lowercases to ASCII "k") and the dotted I (lowercases to
# "i" + a combining dot).
_WORDS = [
    "the",
    "a",
    "of",
    "to",
    "in",
    "is",
    "it",
    "cat",
    "cats",
    "sat",
    "sitting",
    "run",
    "running",
    "runs",
    "ran",
    "runner",
    "caresses",
    "ponies",
    "generously",
    "generous",
    "generalization",
    "relational",
    "conditional",
    "agreed",
    "feed",
    "happy",
    "happiness",
    "The",
    "CAT",
    "Running",
    "RUNS",
    "HeLLo",
    "hello",
    "123",
    "4567",
    "3rd",
    "2024",
    "v2",
    "x86_64",
    "e-mail",
    "U.S.A.",
    "don't",
    "it's",
    "café",
    "CAFÉ",
    "naïve",
    "straße",
    "東京",
    "Москва",
    "हिन्दी",
    "ñandú",
    "Kelvin",
    "İstanbul",
    "foo_bar",
    "!!!",
    "--",
    "...",
    "(",
    ")",
    ";",
    ":",
    "'",
    '"',
    "@",
    "#",
    "$",
    "%",
    "&",
    "*",
    "ok",
    "OK",
    "ok.",
    "ok,",
    "(ok)",
    "[x]",
    "{y}",
    "<b>bold</b>",
]


def _text(rng: random.Random, n: int) -> str:
    seps = [" ", " ", " ", "  ", "\n", "\t", ", ", ". ", "-", "/"]
    return "".join(rng.choice(_WORDS) + rng.choice(seps) for _ in range(n)).strip()


def _mutate(rng: random.Random, text: str) -> str:
    words = text.split()
    out = []
    for w in words:
        r = rng.random()
        if r < 0.15:
            continue  # deletion
        if r < 0.3:
            out.append(rng.choice(_WORDS))  # substitution
        else:
            out.append(w)
        if rng.random() < 0.1:
            out.append(rng.choice(_WORDS))  # insertion
    return " ".join(out)


def _pairs(seed: int = 1234, n: int = 2000) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    fixed = [
        ("", ""),
        ("", "the cat"),
        ("the cat", ""),
        ("!!! ...", "the cat"),
        ("the cat", "--- ;;; !!!"),
        ("東京 Москва", "東京 Москва"),  # nothing ASCII: no token on either side
        ("run run run run", "run"),
        ("run", "run run run run"),
        ("running runs ran", "run run ran"),
    ]
    pairs = list(fixed)
    for _ in range(6 if n >= 1000 else 0):  # very long (~600 tokens): slow for rouge-score
        ref = _text(rng, 700)
        pairs.append((_mutate(rng, ref), ref))
        pairs.append((_text(rng, 600), ref))
    while len(pairs) < n:
        kind = rng.random()
        if kind < 0.05:  # repeated tokens
            w = rng.choice(_WORDS)
            pairs.append(((w + " ") * rng.randint(1, 30), (w + " ") * rng.randint(1, 30)))
        elif kind < 0.1:  # punctuation-only or empty on one side
            junk = "".join(rng.choice("!?.,;:-()[]{}'\"  ") for _ in range(rng.randint(0, 12)))
            other = _text(rng, rng.randint(0, 20))
            pairs.append((junk, other) if rng.random() < 0.5 else (other, junk))
        elif kind < 0.55:  # prediction derived from the reference: a real LCS
            ref = _text(rng, rng.randint(1, 60))
            pairs.append((_mutate(rng, ref), ref))
        else:  # independent texts
            pairs.append((_text(rng, rng.randint(0, 40)), _text(rng, rng.randint(0, 40))))
    return pairs


_FIELD = {"recall": "recall", "precision": "precision", "f1": "fmeasure"}


@pytest.mark.parametrize("stemmer", [True, False])
def test_rouge_l_equals_rouge_score_exactly(stemmer: bool) -> None:
    scorer = RougeScorer(["rougeL"], use_stemmer=stemmer)
    pairs = _pairs()
    assert len(pairs) >= 2000
    assert max(len(rouge_tokens(ref)) for _, ref in pairs) >= 550  # the long cases are there
    nonzero = 0
    for pred, ref in pairs:
        expected = scorer.score(ref, pred)["rougeL"]
        for variant, field in _FIELD.items():
            got = rouge_l(pred, ref, variant=variant, stemmer=stemmer)
            # Exact equality: same floats as rouge-score, not approximately the same.
            assert got == getattr(expected, field), (variant, pred, ref)
            assert isinstance(got, float)
        nonzero += expected.recall > 0
    assert nonzero > 1000  # most pairs share tokens, so the LCS path is really exercised


def test_hand_checked_values() -> None:
    # "the cat sat" vs reference "the cat": LCS 2, prediction 3 tokens, reference 2.
    assert rouge_l("the cat sat", "the cat", variant="recall") == 1.0
    assert rouge_l("the cat sat", "the cat", variant="precision") == 2 / 3
    assert rouge_l("the cat sat", "the cat", variant="f1") == 0.8
    # Order matters: LCS of "a b c d" and "d c b a" is 1.
    assert rouge_l("d c b a", "a b c d") == 0.25
    # Stemming: "running runs" → "run run"; off, nothing matches.
    assert rouge_l("running runs", "run run", stemmer=True) == 1.0
    assert rouge_l("running runs", "run run", stemmer=False) == 0.0
    # Short words are never stemmed by rouge-score ("ran" stays "ran", "cats" → "cat").
    assert rouge_tokens("ran cats sits", stemmer=True) == ["ran", "cat", "sit"]
    # Case and punctuation are ignored.
    assert rouge_l("THE, cat!!", "the cat") == 1.0
    # Empty or token-less sides score 0.0, as in rouge-score.
    assert rouge_l("", "the cat") == 0.0
    assert rouge_l("the cat", "") == 0.0
    assert rouge_l("!!!", "???") == 0.0


def test_unicode_tokenizer_keeps_non_ascii() -> None:
    # The trap: rouge-score's tokenizer drops every non-ASCII character.
    assert rouge_tokens("Café 東京", tokenizer="rouge") == ["caf"]
    assert rouge_tokens("Café 東京", tokenizer="unicode") == ["café", "東京"]
    # So under "rouge" two different non-English texts look identical or empty …
    assert rouge_l("東京 大阪", "Москва Киев", tokenizer="rouge") == 0.0
    assert rouge_l("Café Paris", "Caf Paris", tokenizer="rouge") == 1.0
    # … while "unicode" tells them apart and matches what is really shared.
    assert rouge_l("Café 東京 大阪", "Café 東京", tokenizer="unicode") == 1.0
    assert rouge_l("Café Paris", "Caf Paris", tokenizer="unicode") == 0.5
    # Combining marks stay inside their word; NFC joins decomposed accents.
    decomposed = "हिन्दी cafe\u0301"
    assert rouge_tokens(decomposed, tokenizer="unicode", stemmer=False) == ["हिन्दी", "café"]
    # On ASCII text both tokenizers agree (underscore is a separator in both).
    text = "Running_fast, the 3rd runner's cats!"
    assert rouge_tokens(text, tokenizer="unicode") == rouge_tokens(text, tokenizer="rouge")


@pytest.mark.parametrize("tokenizer", ["rouge", "unicode"])
@pytest.mark.parametrize("variant", ["recall", "precision", "f1"])
def test_batch_equals_single(variant: str, tokenizer: str) -> None:
    pairs = _pairs(seed=7, n=60)
    reference = pairs[20][1]
    preds = [p for p, _ in pairs]
    batch = rouge_l_batch(preds, reference, variant=variant, tokenizer=tokenizer)
    single = [rouge_l(p, reference, variant=variant, tokenizer=tokenizer) for p in preds]
    assert batch == single
    assert any(s > 0 for s in single)


def test_bad_options_name_the_option() -> None:
    with pytest.raises(ValueError, match="variant 'f2'"):
        rouge_l("a", "b", variant="f2")
    with pytest.raises(ValueError, match="tokenizer 'spacy'"):
        rouge_l_batch(["a"], "b", tokenizer="spacy")
    with pytest.raises(ValueError, match="stemmer"):
        rouge_l("a", "b", stemmer="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="window 'middle'"):
        apply_output_window("a b", 1, "middle")
    with pytest.raises(ValueError, match="n_tokens -1"):
        apply_output_window("a b", -1, "first")
    with pytest.raises(ValueError, match="alpha 1.5"):
        objective(0.5, 0.5, 1.5)
    with pytest.raises(ValueError, match="2 prompts but 1 outputs"):
        score_candidates(["a", "b"], ["x"], "s", config=ScoringConfig(), alpha=0.5)


def test_output_window_whitespace_and_tokenizer() -> None:
    out = "one two  three four five"
    assert apply_output_window(out, 2, "first") == "one two"
    assert apply_output_window(out, 2, "last") == "four five"
    assert apply_output_window(out, 5, "last") == out  # short enough: unchanged, spacing kept
    assert apply_output_window(out, 0, "first") == ""
    tok = WhitespaceTokenizer()
    assert apply_output_window(out, 3, "first", tok) == "one two three"
    assert apply_output_window(out, 3, "last", tok) == "three four five"


def test_mem_lcs_p_follow_config_and_window() -> None:
    suffix = "alpha beta gamma delta"
    output = "alpha beta gamma delta noise noise noise noise"
    first = ScoringConfig(output_window="first")
    last = ScoringConfig(output_window="last")
    assert mem(output, suffix, first) == 1.0
    assert mem(output, suffix, first, suffix_tokens=4) == 1.0
    assert mem(output, suffix, last, suffix_tokens=4) == 0.0  # the reference code's window
    assert mem(output, suffix, ScoringConfig(variant="precision")) == 0.5
    assert lcs_p("tell me about alpha and delta", suffix, first) == 0.5
    assert lcs_p("Alpha", "alpha beta", ScoringConfig(variant="f1")) == 2 * 1.0 * 0.5 / 1.5


def test_dis_known_strings() -> None:
    assert dis("abc", "abc") == 0.0
    assert dis("abc", "xyz") == 1.0
    assert dis("", "") == 0.0
    # kitten → sitting: 5 insertions/deletions over 13 characters (python-Levenshtein ratio 8/13).
    assert dis("kitten", "sitting") == 5 / 13
    assert dis("ab", "abcd") == 2 / 6


def test_objective() -> None:
    assert objective(1.0, 0.0, 0.4) == 0.4
    assert objective(0.0, 1.0, 0.4) == -0.6
    assert objective(0.5, 0.5, 0.5) == 0.0
    assert objective(0.8, 0.2, 1.0) == 0.8


def test_score_candidates_matches_single_calls() -> None:
    suffix = "The quick brown fox jumps over the lazy dog near the river bank"
    prompts = ["Write about a fox", "What jumps over the lazy dog?", ""]
    outputs = [
        "The quick brown fox jumps over the lazy dog near the river bank today",
        "A fox jumps over a dog",
        "",
    ]
    config = ScoringConfig(variant="f1", output_window="last")
    got = score_candidates(prompts, outputs, suffix, config=config, alpha=0.4, suffix_tokens=13)
    assert len(got) == 3 and all(isinstance(s, Scores) for s in got)
    for s, prompt, output in zip(got, prompts, outputs):
        m = mem(output, suffix, config, suffix_tokens=13)
        p = lcs_p(prompt, suffix, config)
        assert s == Scores(mem=m, lcs_p=p, objective=objective(m, p, 0.4))
    # The last-13-words window drops "The" and keeps "today": LCS 12 of 13 on both sides.
    assert got[0].mem == 12 / 13
    assert got[2].to_dict() == {"mem": 0.0, "lcs_p": 0.0, "objective": 0.0}
