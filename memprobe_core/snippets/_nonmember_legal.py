"""Licence-shaped non-member texts (``legal`` domain), from memprobe's own template sentences.

The sentences below were written for memprobe; none is taken from a real licence (a test checks
that no 13-word run of a generated text appears in the demo corpus's licences). What makes each
text new is what fills them: made-up licensors, products, people, places, dates, sums, periods and
reference numbers, and which sentences and sections are drawn, in which order.
"""

from __future__ import annotations

import random

from memprobe_core.snippets import _nonmember_words as words

# Words a whole text should reach: ~1.3 Gemma tokens per word gives > 600 tokens with margin.
TARGET_WORDS = 640

_TITLES = (
    "{product} Usage Licence, revision {version}",
    "Terms of Use for {product} (release {version})",
    "The {product} Distribution Agreement, edition {version}",
    "{licensor} Licence for {product}, version {version}",
)
_PREAMBLES = (
    "This agreement is made on {date} between {licensor}, with its seat in {place} and entered "
    "in the trade register under number {ref}, and every person or body that obtains a copy of "
    "{product}.",
    "{licensor} publishes {product} under the terms set out below. They took effect on {date} "
    "and were last revised under reference {ref}.",
    "Read these terms before you install {product}. By installing, copying or running it you "
    "accept them as of the day you first do so; {licensor} accepted them on {date}.",
)

# (heading, sentence templates): a section draws three to five of its sentences.
_SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Definitions",
        (
            '"Product" means {product} in every form {licensor} makes it available, including '
            "updates issued before {date}.",
            '"Holder" means the person or organisation that has accepted these terms, and '
            '"you" refers to the Holder.',
            '"Site" means the premises in {place} named on the order form with reference {ref}.',
            '"Working Day" means any day except a Saturday, a Sunday or a public holiday in '
            "{region}.",
            '"Derived Material" means any work that incorporates more than {small} lines of the '
            "Product, whether altered or not.",
            '"Fee" means the sum stated on the order form, which for the base tier is {amount}.',
        ),
    ),
    (
        "Permission",
        (
            "Subject to these terms, {licensor} lets the Holder install the Product on up to "
            "{small} machines at the Site.",
            "The Holder may make working copies for backup, provided each copy keeps the notice "
            "that carries reference {ref}.",
            "This permission is personal to the Holder; it cannot be sold, pledged or handed on "
            "without written consent signed by {person}.",
            "Nothing here transfers ownership of the Product; {licensor} keeps every right it "
            "does not expressly grant.",
            "The Holder may show the Product to advisers who are bound by a duty of "
            "confidentiality no weaker than this one.",
        ),
    ),
    (
        "Restrictions",
        (
            "The Holder shall not rent the Product out or offer it to third parties as a hosted "
            "service.",
            "Taking the Product apart to learn how it works is allowed only where the law of "
            "{region} says so despite this clause.",
            "Labels, marks and the notice bearing reference {ref} must stay where {licensor} put "
            "them.",
            "Use of the Product to run a service for more than {medium} outside users at once "
            "needs a separate agreement.",
            "The Holder shall keep a list of every machine the Product runs on and show it to "
            "{licensor} within {days} days of a request.",
        ),
    ),
    (
        "Fees and Payment",
        (
            "The Holder shall pay the Fee within {days} days of the invoice date.",
            "Sums that remain unpaid after {days} days carry interest of {percent} per cent a "
            "year until paid.",
            "Each invoice states the reference {ref} and is payable to {licensor} in {currency}.",
            "Fees for a renewal period are those in the price list published on {date}, unless "
            "the parties agree otherwise in writing.",
            "A Holder that disputes an invoice shall say so within {days} days and pay the part "
            "that is not in dispute.",
        ),
    ),
    (
        "Data and Confidentiality",
        (
            "{licensor} handles personal data received under this agreement only to provide "
            "support and keeps it for at most {days} days.",
            "Each party keeps the other's confidential information secret for {small} years "
            "after this agreement ends.",
            "The duty of secrecy does not cover information that was public before {date} or "
            "that a party developed on its own.",
            "Requests about stored data go to {person}, who can be reached at {email}.",
        ),
    ),
    (
        "Updates and Support",
        (
            "{licensor} will answer support requests sent to {email} within {small} Working Days.",
            "Updates issued during the support period are covered by these terms as if they "
            "were part of the Product.",
            "Support ends on {date} for release {version} and {small} months after a newer "
            "release appears for later ones.",
            "A fault reported under reference {ref} is fixed in the next scheduled update if "
            "{licensor} can reproduce it.",
        ),
    ),
    (
        "No Promise of Fitness",
        (
            "{licensor} offers the Product as it stands and gives no assurance that it suits any "
            "particular task.",
            "No statement by a reseller or by staff of {licensor} enlarges what this section "
            "allows.",
            "The Holder decides on its own whether the Product's results are fit to rely on.",
            "Where the law of {region} forbids excluding an assurance, it lasts only for "
            "{days} days from delivery.",
        ),
    ),
    (
        "Limits on Liability",
        (
            "The total liability of {licensor} under this agreement shall not exceed {amount}.",
            "Neither party is liable for lost profit, lost data or harm that could not be "
            "foreseen on {date}.",
            "These limits do not apply to death or injury caused by negligence, or to fraud.",
            "A claim must be brought within {small} years of the day the claimant learned of it.",
        ),
    ),
    (
        "Term and Ending",
        (
            "This agreement runs from {date} for {small} years and renews for one year at a "
            "time unless ended.",
            "Either party may end it by giving {days} days' notice in writing.",
            "If the Holder breaches a term and does not cure the breach within {days} days, "
            "{licensor} may end the agreement at once.",
            "When the agreement ends the Holder shall delete every copy of the Product and "
            "confirm this to {person} in writing.",
            "Sections on payment, confidentiality and liability survive the end of the agreement.",
        ),
    ),
    (
        "Notices",
        (
            "Notices go to {licensor}, attention of {person}, {role}, at {street}, {place}.",
            "A notice sent by email to {email} counts as received on the next Working Day.",
            "Each party shall tell the other of a change of address within {days} days.",
        ),
    ),
    (
        "Governing Law",
        (
            "The law of {region} governs this agreement and any dispute about it.",
            "The courts sitting in {place} alone may hear such disputes, save for urgent "
            "measures that any competent court may grant.",
            "Before going to court the parties shall try for {days} days to settle the dispute "
            "through a mediator chosen by {person}.",
        ),
    ),
)
_SIGNATURES = (
    "Signed for {licensor} by {person}, {role}, at {place} on {date}.",
    "Accepted on behalf of {licensor}: {person} ({role}), {date}, reference {ref}.",
)


def _slots(rng: random.Random, fixed: dict[str, str]) -> dict[str, str]:
    """Values for one sentence: the text's fixed names plus fresh random ones."""
    return {
        **fixed,
        "date": words.date(rng),
        "ref": words.reference(rng),
        "person": words.person(rng),
        "role": rng.choice(words.ROLES),
        "days": str(rng.choice((7, 10, 14, 21, 28, 30, 45, 60, 90))),
        "small": str(rng.randint(2, 12)),
        "medium": str(rng.randint(20, 900)),
        "percent": f"{rng.randint(1, 9)}.{rng.randint(0, 9)}",
        "amount": words.amount(rng),
        "street": words.street(rng),
    }


def _fill(rng: random.Random, template: str, fixed: dict[str, str]) -> str:
    slots = _slots(rng, fixed)
    slots["email"] = words.email(rng, slots["person"])
    return template.format_map(slots)


def licence_text(rng: random.Random) -> str:
    """One licence-shaped text of at least :data:`TARGET_WORDS` words."""
    fixed = {
        "licensor": words.company(rng),
        "product": words.title_words(rng),
        "version": f"{rng.randint(1, 9)}.{rng.randint(0, 20)}",
        "region": f"the Province of {words.place(rng)}",
        "place": words.place(rng),
        "currency": rng.choice(words.CURRENCIES),
    }
    parts = [_fill(rng, rng.choice(_TITLES), fixed), _fill(rng, rng.choice(_PREAMBLES), fixed)]
    order = list(_SECTIONS)
    rng.shuffle(order)
    number = 0
    while sum(len(p.split()) for p in parts) < TARGET_WORDS:
        number += 1
        heading, sentences = order[(number - 1) % len(order)]
        if number > len(order):  # past one round of sections: schedules, not repeats
            heading = f"Schedule {chr(ord('A') + number - len(order) - 1)}: {heading}"
        parts.append(f"{number}. {heading}")
        picked = rng.sample(sentences, rng.randint(3, min(5, len(sentences))))
        # Lettered clauses, as many real licences have: numbered ones ("4.2") would fill the
        # text with digits, which the victim's tokenizer splits one per token.
        parts += [
            f"({chr(ord('a') + i)}) {_fill(rng, sentence, fixed)}"
            for i, sentence in enumerate(picked)
        ]
    parts.append(_fill(rng, rng.choice(_SIGNATURES), fixed))
    return "\n\n".join(parts)
