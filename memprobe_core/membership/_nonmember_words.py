"""Random names, places, dates, numbers and words for the generated non-member texts.

Hand-written short lists rather than a fake-data library: a set must be reproducible from its
seed and :data:`~memprobe_core.membership.nonmembers.GENERATOR_VERSION` alone, not from the
version of a third-party word list. Surnames, companies, places and identifiers are made of
random syllables, so the combinations exist nowhere before the generator draws them.
"""

from __future__ import annotations

import keyword
import random

_ONSETS = [
    "b",
    "bl",
    "br",
    "d",
    "dr",
    "f",
    "fl",
    "g",
    "gr",
    "h",
    "k",
    "kl",
    "kr",
    "l",
    "m",
    "n",
    "p",
    "pl",
    "pr",
    "r",
    "s",
    "sk",
    "st",
    "t",
    "tr",
    "v",
    "w",
    "z",
]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y"]
_CODAS = ("", "", "", "n", "r", "l", "s", "th", "m", "nd", "rk", "x", "v", "st")

FIRST_NAMES = [
    "Ada",
    "Bruno",
    "Celia",
    "Dario",
    "Edith",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Kira",
    "Leon",
    "Mara",
    "Nils",
    "Olga",
    "Pavel",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
    "Ugo",
    "Vera",
    "Wim",
    "Xenia",
    "Yusuf",
    "Zora",
    "Anouk",
    "Bram",
    "Cleo",
    "Dmitri",
    "Elin",
    "Fenna",
    "Gideon",
    "Hedda",
    "Ivo",
    "Janne",
]
ROLES = (
    "managing director",
    "licensing officer",
    "head of legal affairs",
    "company secretary",
    "chief technical officer",
    "authorised signatory",
)
COMPANY_KINDS = ("Ltd", "GmbH", "B.V.", "S.A.", "Cooperative", "Holdings", "Labs", "AB", "Oy")
PLACE_ENDINGS = ("ton", "by", "stad", "holm", "ford", "vik", "burg", "mere", "dal", "wick")
CURRENCIES = ("EUR", "CHF", "SEK", "NOK", "GBP", "DKK", "PLN")
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
TLDS = ("example", "test", "invalid")  # reserved names (RFC 2606): never a real address

NOUNS = [
    "record",
    "buffer",
    "ledger",
    "batch",
    "sample",
    "window",
    "queue",
    "token",
    "segment",
    "report",
    "cache",
    "index",
    "entry",
    "schedule",
    "account",
    "channel",
    "payload",
    "matrix",
    "vector",
    "column",
    "region",
    "bucket",
    "frame",
    "signal",
    "cursor",
    "profile",
    "archive",
    "budget",
    "tariff",
    "parcel",
    "gauge",
    "sensor",
    "reading",
    "invoice",
    "tally",
]
VERBS = [
    "merge",
    "split",
    "load",
    "store",
    "parse",
    "render",
    "count",
    "filter",
    "rank",
    "scale",
    "shift",
    "clamp",
    "encode",
    "decode",
    "collect",
    "validate",
    "resolve",
    "balance",
    "compress",
    "expand",
    "align",
    "measure",
    "sort",
    "group",
    "flatten",
]
ADJECTIVES = [
    "pending",
    "active",
    "stale",
    "raw",
    "sorted",
    "partial",
    "nominal",
    "spare",
    "weighted",
    "rolling",
    "local",
    "remote",
    "nested",
    "hidden",
    "primary",
    "derived",
]


def pseudo_word(rng: random.Random, syllables: tuple[int, int] = (2, 3)) -> str:
    """A pronounceable made-up word in lowercase, e.g. ``"braskiol"``."""
    parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.randint(*syllables))]
    return "".join(parts) + rng.choice(_CODAS)


def identifier(rng: random.Random) -> str:
    """A snake_case identifier that is not a Python keyword, e.g. ``"stale_vorim"``."""
    while True:
        kind = rng.random()
        if kind < 0.4:
            name = f"{rng.choice(ADJECTIVES)}_{pseudo_word(rng, (1, 2))}"
        elif kind < 0.7:
            name = f"{pseudo_word(rng, (1, 2))}_{rng.choice(NOUNS)}"
        else:
            name = pseudo_word(rng)
        if not keyword.iskeyword(name) and name.isidentifier():
            return name


def surname(rng: random.Random) -> str:
    return pseudo_word(rng).capitalize()


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {surname(rng)}"


def company(rng: random.Random) -> str:
    return f"{pseudo_word(rng).capitalize()} {rng.choice(COMPANY_KINDS)}"


def place(rng: random.Random) -> str:
    return pseudo_word(rng, (1, 2)).capitalize() + rng.choice(PLACE_ENDINGS)


def date(rng: random.Random) -> str:
    """A date between 1990 and 2039, e.g. ``"14 March 2031"``."""
    return f"{rng.randint(1, 28)} {rng.choice(MONTHS)} {rng.randint(1990, 2039)}"


def iso_date(rng: random.Random) -> str:
    return f"{rng.randint(1990, 2039)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def reference(rng: random.Random) -> str:
    """A reference number such as ``"KV-48213-ZQ"``."""
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    head = "".join(rng.choice(letters) for _ in range(2))
    tail = "".join(rng.choice(letters) for _ in range(2))
    return f"{head}-{rng.randint(10000, 99999)}-{tail}"


def email(rng: random.Random, name: str) -> str:
    return f"{name.split()[0].lower()}.{pseudo_word(rng, (1, 2))}@{pseudo_word(rng)}.{rng.choice(TLDS)}"


def amount(rng: random.Random) -> str:
    """A sum of money such as ``"EUR 12,480"``."""
    return f"{rng.choice(CURRENCIES)} {rng.randint(2, 900) * rng.choice((10, 100, 1000)):,}"
