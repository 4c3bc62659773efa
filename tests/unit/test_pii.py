"""memprobe_core.pii: each detector's positives and negatives, precedence, copied vs invented."""

from __future__ import annotations

import pytest

from memprobe_core.pii import (
    PII_KINDS,
    PIIReport,
    find_pii,
    find_pii_matches,
    pii_report,
    summarize,
)


def _only(text: str) -> dict[str, list[str]]:
    """find_pii without the empty kinds."""
    return {k: v for k, v in find_pii(text).items() if v}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("call (555) 123-4567 now", "5551234567"),
        ("call 555-123-4567.", "5551234567"),
        ("call 555.123.4567", "5551234567"),
        ("call +1 555 123 4567", "5551234567"),
        ("call 1-800-555-0199", "8005550199"),
        ("ring +44 20 7946 0958", "442079460958"),
        ("ring +33 1 23 45 67 89", "33123456789"),
    ],
)
def test_phone_positive(text: str, expected: str) -> None:
    assert _only(text) == {"phone": [expected]}


@pytest.mark.parametrize(
    "text",
    [
        "on 2023-01-15 at noon",  # a date
        "on 01/15/2023",
        "on 15.01.2023",
        "version 1.2.3.4",
        "it costs 5551234567 dollars",  # a bare 10-digit run: no separators, not a phone
        "+12 34",  # too few digits for an international number
    ],
)
def test_phone_negative(text: str) -> None:
    assert find_pii(text)["phone"] == []


def test_url_and_email() -> None:
    text = "See https://Example.com/a_b?x=1, www.foo.org/page. Mail Jane.Doe@Mail.Example.COM!"
    found = _only(text)
    assert found == {
        "url": ["https://example.com/a_b?x=1", "www.foo.org/page"],
        "email": ["jane.doe@mail.example.com"],
    }
    # A closing parenthesis belongs to the URL only when the URL opened one.
    assert _only("(see http://x.org/a)")["url"] == ["http://x.org/a"]
    assert _only("http://en.wikipedia.org/wiki/Foo_(bar)")["url"] == [
        "http://en.wikipedia.org/wiki/foo_(bar)"
    ]
    # Negatives: a bare domain or file name, an @handle, an address without a TLD.
    assert _only("edit setup.py, ping @alice, user@localhost, example.com") == {}


def test_credit_card_needs_luhn() -> None:
    assert _only("card 4111 1111 1111 1111 exp") == {"credit_card": ["4111111111111111"]}
    assert _only("card 4111-1111-1111-1111") == {"credit_card": ["4111111111111111"]}
    assert _only("amex 378282246310005") == {"credit_card": ["378282246310005"]}
    # Luhn-invalid: not a card, and its digits are not read as a phone or ZIP either.
    assert _only("card 4111 1111 1111 1112") == {}
    assert _only("card 4111-1111-1111-1112") == {}
    # Too short (12 digits), or a valid card number inside a 20-digit run: not a card.
    assert find_pii("id 4111 1111 1111")["credit_card"] == []
    assert find_pii("n 99994111111111111111")["credit_card"] == []
    assert find_pii("n 41111111111111119999")["credit_card"] == []


def test_ssn() -> None:
    assert _only("SSN 123-45-6789.") == {"ssn": ["123456789"]}
    assert _only("SSN 123 45 6789") == {"ssn": ["123456789"]}
    for bad in ("000-12-3456", "666-12-3456", "912-34-5678", "123-00-4567", "123-45-0000"):
        assert find_pii(f"SSN {bad}")["ssn"] == [], bad
    assert find_pii("123-45 6789")["ssn"] == []  # mixed separators
    assert find_pii("1-123-45-6789")["ssn"] == []  # part of a longer dashed number


def test_address() -> None:
    assert _only("at 1600 Pennsylvania Avenue NW today") == {
        "address": ["1600 Pennsylvania Avenue NW"]
    }
    assert _only("221B  Baker Street.") == {"address": ["221B Baker Street"]}
    assert _only("42 Wallaby Way, Sydney")["address"] == ["42 Wallaby Way"]
    assert _only("350 5th Ave")["address"] == ["350 5th Ave"]
    assert _only("12 MAIN ST")["address"] == ["12 MAIN ST"]
    # Lowercase words are not a street name; no suffix, no address.
    assert find_pii("in 2020 the main road closed")["address"] == []
    assert find_pii("I have 3 Big Dogs")["address"] == []


def test_zip_and_precedence() -> None:
    assert _only("Springfield, IL 62704") == {"zip": ["62704"]}
    assert _only("DC 20500-0003") == {"zip": ["20500-0003"]}
    # Bare 5-digit numbers are ZIP-shaped (documented); decimals, money, longer runs are not.
    assert _only("in 12345 cases") == {"zip": ["12345"]}
    assert _only("pi 3.14159, $12345, 12345.67, 123456, #12345") == {}
    # The address keeps its house number; the ZIP after the street line is its own item.
    assert _only("12345 Main St, Springfield, IL 62704") == {
        "address": ["12345 Main St"],
        "zip": ["62704"],
    }
    # Digits inside a URL or an email are not ZIPs or phones; an SSN is not a ZIP.
    url = "https://x.org/12345/555-123-4567"
    assert _only(url) == {"url": [url]}
    assert _only("id12345@mail.com") == {"email": ["id12345@mail.com"]}
    assert _only("SSN 123-45-6789") == {"ssn": ["123456789"]}


def test_matches_do_not_overlap_and_keep_positions() -> None:
    text = "Call +1 (555) 123-4567 or write to 9 Elm St, Boston, MA 02101 or x@y.io"
    matches = find_pii_matches(text)
    assert [m.kind for m in matches] == ["phone", "address", "zip", "email"]
    for a, b in zip(matches, matches[1:]):
        assert a.end <= b.start
    for m in matches:
        assert text[m.start : m.end] == m.text


def test_report_copied_vs_invented() -> None:
    truth = "Reach me at (555) 123-4567 or JOHN@EXAMPLE.COM; I live at 12 Oak Street, 90210."
    output = "Call 555.123.4567 or john@example.com. Card 4111111111111111. Live at 99 Pine Road."
    report = pii_report(truth, output)
    assert isinstance(report, PIIReport)
    assert report.truth["phone"] == ["5551234567"]
    assert report.copied == {
        **{k: [] for k in PII_KINDS},
        "phone": ["5551234567"],  # same number, other formatting: copied
        "email": ["john@example.com"],  # case differs: copied
    }
    assert report.invented["credit_card"] == ["4111111111111111"]
    assert report.invented["address"] == ["99 Pine Road"]
    assert report.counts == {"truth": 4, "copied": 2, "invented": 2}
    assert report.counts_by_kind["address"] == {"truth": 1, "copied": 0, "invented": 1}
    d = report.to_dict()
    assert d["counts"] == report.counts and d["copied"]["email"] == ["john@example.com"]


def test_repeated_items_count_once() -> None:
    report = pii_report("a@b.com a@b.com", "A@B.com and a@b.com and c@d.org c@d.org")
    assert report.counts == {"truth": 1, "copied": 1, "invented": 1}


def test_summarize() -> None:
    reports = [
        pii_report("call 555-123-4567 or mail a@b.com", "call 555-123-4567"),
        pii_report("SSN 123-45-6789", "SSN 321-54-9876"),
        pii_report("no pii here", "none here either"),
    ]
    summary = summarize(reports)
    assert summary["reports"] == 3
    assert (summary["truth"], summary["copied"], summary["invented"]) == (3, 1, 1)
    assert summary["recovered"] == 1 / 3
    assert summary["by_kind"]["ssn"] == {"truth": 1, "copied": 0, "invented": 1}
    assert summary["by_kind"]["phone"] == {"truth": 1, "copied": 1, "invented": 0}
    assert summarize([])["recovered"] is None


@pytest.mark.parametrize(
    "text",
    [
        "<div><a href='https://x.org/p'>Tel: 555-123-4567</a></div>",
        "東京都 〒100-0001 電話 +81 3 1234 5678 メール 山田@例え.jp",
        "Ünïcödé ✓ 🙂 \x00 \u202e (((((( ]]]] @@@@ ---- ++++",
        "",
        "9" * 5000,
    ],
)
def test_markup_and_non_ascii_do_not_crash(text: str) -> None:
    found = find_pii(text)
    assert set(found) == set(PII_KINDS)
    assert all(isinstance(v, list) for v in found.values())


def test_markup_and_non_ascii_values() -> None:
    assert _only("<a href='https://x.org/p'>Tel: 555-123-4567</a>") == {
        "url": ["https://x.org/p"],
        "phone": ["5551234567"],
    }
    assert find_pii("電話 +81 3 1234 5678")["phone"] == ["81312345678"]
