"""α table lookups (docs/method.md §3, paper Appendix A) and ScoringConfig validation."""

from __future__ import annotations

import pytest

from memprobe_core.config import DEFAULT_ALPHA, ScoringConfig, alpha_for, family_of

# Every cell of docs/method.md §3's Llama-family table: (length, domain, α).
LLAMA_TABLE = [
    (200, "c4", 0.4),
    (200, "cc", 0.4),
    (200, "github", 0.4),
    (200, "arxiv", 0.2),
    (200, "books", 0.2),
    (300, "cc", 0.5),
    (300, "c4", 0.5),
    (300, "github", 0.4),
    (300, "arxiv", 0.4),
    (300, "books", 0.3),
    (500, "c4", 0.5),
    (500, "cc", 0.5),
    (500, "arxiv", 0.5),
    (500, "github", 0.6),
    (500, "books", 0.4),
]


@pytest.mark.parametrize(("length", "domain", "alpha"), LLAMA_TABLE)
def test_llama_table_every_cell(length: int, domain: str, alpha: float) -> None:
    assert alpha_for(domain=domain, length=length) == (alpha, "paper:llama")
    # The table is the default for every family but Falcon.
    assert alpha_for(domain=domain, length=length, family="other") == (alpha, "paper:llama")


@pytest.mark.parametrize(
    ("domain", "key"),
    [
        ("code", "github"),
        ("git", "github"),
        ("commoncrawl", "cc"),
        ("book", "books"),
        ("  GitHub ", "github"),
        ("ArXiv", "arxiv"),
    ],
)
def test_domain_aliases_and_case(domain: str, key: str) -> None:
    for length in (200, 300, 500):
        assert alpha_for(domain=domain, length=length) == alpha_for(domain=key, length=length)


@pytest.mark.parametrize(("length", "alpha"), [(200, 0.2), (300, 0.3), (500, 0.8)])
def test_falcon_depends_on_length_only(length: int, alpha: float) -> None:
    for domain in ("books", "github", "legal", None):
        assert alpha_for(domain=domain, length=length, family="falcon") == (alpha, "paper:falcon")
    assert alpha_for(domain="cc", length=length, family="Falcon") == (alpha, "paper:falcon")


def test_falcon_untuned_length_uses_llama_table_then_fallback() -> None:
    assert alpha_for(domain="books", length=400, family="falcon") == (DEFAULT_ALPHA, "fallback")


@pytest.mark.parametrize(
    ("domain", "length"),
    [("legal", 200), ("docs", 500), (None, 300), ("", 200), ("books", 400), ("github", 100)],
)
def test_fallback(domain: str | None, length: int) -> None:
    assert DEFAULT_ALPHA == 0.5
    assert alpha_for(domain=domain, length=length) == (0.5, "fallback")


@pytest.mark.parametrize("value", [0.0, 0.25, 1.0, 1])
def test_override_wins(value: float) -> None:
    assert alpha_for(domain="books", length=200, family="falcon", override=value) == (
        float(value),
        "override",
    )


@pytest.mark.parametrize("value", [-0.01, 1.01, 5.0])
def test_bad_override(value: float) -> None:
    with pytest.raises(ValueError, match=rf"alpha {value} is outside \[0, 1\]"):
        alpha_for(domain="books", length=200, override=value)


@pytest.mark.parametrize(
    ("model_id", "family"),
    [
        ("tiiuae/falcon-7b", "falcon"),
        ("meta-llama/Llama-2-7b-hf", "llama"),
        ("lmsys/vicuna-7b-v1.5", "llama"),
        ("allenai/OLMo-7B", "llama"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "other"),
    ],
)
def test_family_of(model_id: str, family: str) -> None:
    assert family_of(model_id) == family


def test_scoring_defaults_match_paper() -> None:
    cfg = ScoringConfig()
    assert cfg.to_dict() == {
        "variant": "recall",
        "stemmer": True,
        "tokenizer": "rouge",
        "output_window": "first",
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variant": "fmeasure"}, "variant='fmeasure': use one of recall, precision, f1"),
        ({"tokenizer": "spacy"}, "tokenizer='spacy': use one of rouge, unicode"),
        ({"output_window": "middle"}, "output_window='middle': use one of first, last"),
    ],
)
def test_scoring_bad_values(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScoringConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"variant": "precision"},
        {"variant": "f1"},
        {"tokenizer": "unicode"},
        {"output_window": "last"},
        {"stemmer": False},
    ],
)
def test_scoring_good_values(kwargs: dict[str, object]) -> None:
    cfg = ScoringConfig(**kwargs)  # type: ignore[arg-type]
    for key, value in kwargs.items():
        assert cfg.to_dict()[key] == value
