"""Random names, places, dates, numbers and words for the generated non-member texts.

Hand-written short lists rather than a fake-data library: a set must be reproducible from its
seed and :data:`~memprobe_core.snippets.nonmembers.GENERATOR_VERSION` alone, not from the
version of a third-party word list.

Every name is made of ordinary words (``Ashbrook Ledger GmbH``, ``stale_invoice_count``), not
made-up syllables: made-up words split into many rare tokens, which alone would tell generated
texts from real ones (a "blind" membership test that needs no model). What makes a text new is
the combination — dozens of independent draws of names, dates, sums and reference numbers.
"""

from __future__ import annotations

import keyword
import random


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


FIRST_NAMES = _words(
    "Ada Bruno Celia Dario Edith Farid Greta Hugo Ines Jonas Kira Leon Mara Nils Olga Pavel "
    "Quinn Rosa Sven Tara Ugo Vera Wim Xenia Yusuf Zora Anouk Bram Cleo Dmitri Elin Fenna "
    "Gideon Hedda Ivo Janne Laura Martin Nadia Oscar Paula Ruth Simon Tomas Helen David"
)
SURNAMES = _words(
    "Berg Costa Novak Fischer Moreau Jansen Silva Kowalski Lindqvist Okafor Tanaka Haddad Rossi "
    "Petrov Walsh Byrne Keller Dubois Virtanen Horvat Nielsen Mendes Schmidt Brennan Varga "
    "Lambert Hansen Romero Weber Sato Mensah Kovacs Larsen Ferreira Wagner Murphy Marsh Porter "
    "Fleming Baker Holm Vidal Brandt Carver Morales Lund"
)
ROLES = (
    "managing director",
    "licensing officer",
    "head of legal affairs",
    "company secretary",
    "chief technical officer",
    "authorised signatory",
)
COMPANY_KINDS = _words("Ltd GmbH B.V. S.A. Cooperative Holdings Labs AB Oy Partners")
PLACE_HEADS = _words(
    "Ash Birch Stone Mill Oak Fair Lake Clear Red North West Elm High Long Green Silver Cold "
    "Wolf Deer Marsh Bright Kings Fern Hazel"
)
PLACE_TAILS = _words("ford brook field ton wick dale mere haven stead bury holm gate")
STREET_KINDS = _words("Street Road Lane Way Square Avenue")
CURRENCIES = _words("EUR CHF SEK NOK GBP DKK PLN")
MONTHS = _words(
    "January February March April May June July August September October November December"
)
TLDS = ("example", "test", "invalid")  # reserved names (RFC 2606): never a real address

NOUNS = _words(
    "record buffer ledger batch sample window queue token segment report cache index entry "
    "schedule account channel payload matrix vector column region bucket frame signal cursor "
    "profile archive budget tariff parcel gauge sensor reading invoice tally harbour meadow "
    "lantern compass orchard beacon quarry anchor summit"
)
VERBS = _words(
    "merge split load store parse render count filter rank scale shift clamp encode decode "
    "collect validate resolve balance compress expand align measure sort group flatten"
)
ADJECTIVES = _words(
    "pending active stale raw sorted partial nominal spare weighted rolling local remote "
    "nested hidden primary derived quiet amber northern silent hollow gentle rapid"
)
_SUFFIXES = _words("count total map list ids cache limit size rate step")


def identifier(rng: random.Random) -> str:
    """A snake_case identifier of ordinary words, e.g. ``"stale_invoice_count"``."""
    while True:
        kind = rng.random()
        if kind < 0.35:
            name = f"{rng.choice(ADJECTIVES)}_{rng.choice(NOUNS)}"
        elif kind < 0.6:
            name = f"{rng.choice(NOUNS)}_{rng.choice(_SUFFIXES)}"
        elif kind < 0.85:
            name = f"{rng.choice(ADJECTIVES)}_{rng.choice(NOUNS)}_{rng.choice(_SUFFIXES)}"
        else:
            name = f"{rng.choice(NOUNS)}_{rng.choice(NOUNS)}"
        if not keyword.iskeyword(name) and name.isidentifier():
            return name


def title_words(rng: random.Random) -> str:
    """Two capitalised words for a product or project, e.g. ``"Amber Ledger"``."""
    return f"{rng.choice(ADJECTIVES).title()} {rng.choice(NOUNS).title()}"


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(SURNAMES)}"


def place(rng: random.Random) -> str:
    return rng.choice(PLACE_HEADS) + rng.choice(PLACE_TAILS)


def company(rng: random.Random) -> str:
    return f"{place(rng)} {rng.choice(NOUNS).title()} {rng.choice(COMPANY_KINDS)}"


def street(rng: random.Random) -> str:
    return f"{rng.randint(1, 240)} {rng.choice(PLACE_HEADS)} {rng.choice(STREET_KINDS)}"


def date(rng: random.Random) -> str:
    """A date between 1990 and 2039, e.g. ``"14 March 2031"``."""
    return f"{rng.randint(1, 28)} {rng.choice(MONTHS)} {rng.randint(1990, 2039)}"


def iso_date(rng: random.Random) -> str:
    return f"{rng.randint(1990, 2039)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def reference(rng: random.Random) -> str:
    """A reference number such as ``"KV-482-ZQ"``."""
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    head = "".join(rng.choice(letters) for _ in range(2))
    tail = "".join(rng.choice(letters) for _ in range(2))
    return f"{head}-{rng.randint(100, 999)}-{tail}"


def email(rng: random.Random, name: str) -> str:
    first, last = name.lower().split(" ", 1)
    return f"{first}.{last}@{place(rng).lower()}.{rng.choice(TLDS)}"


def amount(rng: random.Random) -> str:
    """A sum of money such as ``"EUR 12,480"``."""
    return f"{rng.choice(CURRENCIES)} {rng.randint(2, 900) * rng.choice((10, 100, 1000)):,}"
