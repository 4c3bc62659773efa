"""Greedy P-S-Base answers with and without the true suffix as a draft, against ``model.generate``.

The victim (embedded Gemma-3-270M base) answers each text's prefix greedily with as many new
tokens as its suffix has, one text per call as an audit's P-S-Base units do (``--batch 24``: an
attacker round's shape), three ways side by side in one run, on the same loaded model:

- ``drafted``: memprobe's loop drafting from the true suffix (``hf_speculative``, the default);
- ``plain``: memprobe's loop one token per step (``--no-speculative``);
- ``generate``: ``model.generate`` (transformers' own greedy loop).

Four sets of texts, by how much of the suffix the model gives back:

- ``memorised``: public-domain passages the model continues (at least 80 % of the suffix; the
  embedded 270M model reproduces few texts, so this set is small);
- ``reproduced``: demo-corpus prefixes whose suffix is the model's own greedy answer, the limit an
  audit reaches when a victim gives its training data back word for word;
- ``partial``: demo-corpus snippets with their true suffix (the model gets a few tokens right);
- ``unknown``: generated non-members it has never seen.

Every answer of every mode must be token for token the same (the run stops otherwise); each row
gives seconds per mode (the median of ``--repeats`` interleaved runs) and the ratios.

    python bench/speculative.py                   # length 100, 6 texts per set
    python bench/speculative.py --length 200 --per-set 4
    python bench/speculative.py --batch 24 --sets reproduced,unknown
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from memprobe_core.membership.verbatim import leading_match
from memprobe_core.models import load
from memprobe_core.models.embedded import DEFAULT_VICTIM
from memprobe_core.models.hf_speculative import DraftStats, greedy_agreement
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import DataError, split

# Public-domain passages (US founding documents); the set keeps those the model continues.
PASSAGES = (
    "We the People of the United States, in Order to form a more perfect Union, establish "
    "Justice, insure domestic Tranquility, provide for the common defence, promote the general "
    "Welfare, and secure the Blessings of Liberty to ourselves and our Posterity, do ordain and "
    "establish this Constitution for the United States of America.",
    "Congress shall make no law respecting an establishment of religion, or prohibiting the free "
    "exercise thereof; or abridging the freedom of speech, or of the press; or the right of the "
    "people peaceably to assemble, and to petition the Government for a redress of grievances.",
    "We hold these truths to be self-evident, that all men are created equal, that they are "
    "endowed by their Creator with certain unalienable Rights, that among these are Life, "
    "Liberty and the pursuit of Happiness.",
    "A well regulated Militia, being necessary to the security of a free State, the right of the "
    "people to keep and bear Arms, shall not be infringed.",
)
PASSAGE_PREFIX_TOKENS = 10
MEMORISED = 0.8


@dataclass(frozen=True)
class Text:
    """One prefix to answer and the suffix expected."""

    name: str
    prefix: str
    suffix: str
    suffix_ids: tuple[int, ...]


def from_split(piece: Any) -> Text:
    return Text(piece.snippet.id, piece.prefix, piece.suffix, tuple(piece.suffix_ids))


def demo_texts(victim: Any, length: int, nonmembers: bool) -> list[Text]:
    """Every demo member (or generated non-member) with ``length`` victim tokens, cut."""
    out = []
    for snippet in demo_corpus(nonmembers=nonmembers):
        if nonmembers and snippet.label != "nonmember":
            continue
        try:
            out.append(from_split(split(snippet, victim.tokenizer, length)))
        except DataError:
            continue
    return out


def agreement(victim: Any, text: Text) -> float:
    """Share of the suffix greedy decoding reproduces (one teacher-forced pass)."""
    import torch

    with torch.inference_mode():
        n = greedy_agreement(
            victim.torch_model,
            [victim.prompt_ids(text.prefix)],
            [text.suffix_ids],
            victim.tokenizer.pad_token_id,
        )[0]
    return n / max(1, len(text.suffix_ids))


def passages(victim: Any) -> list[Text]:
    tok = victim.tokenizer
    out = []
    for i, passage in enumerate(PASSAGES):
        ids = tok.encode(passage, add_special_tokens=False)
        cut = PASSAGE_PREFIX_TOKENS
        text = Text(f"passage-{i}", tok.decode(ids[:cut]), tok.decode(ids[cut:]), tuple(ids[cut:]))
        if agreement(victim, text) >= MEMORISED:
            out.append(text)
    return out


def reproduced(victim: Any, texts: list[Text]) -> list[Text]:
    """The texts with their suffix replaced by the model's own greedy answer."""
    out = []
    for text in texts:
        answer = victim.generate([text.prefix], max_new_tokens=len(text.suffix_ids))[0][0]
        ids = tuple(answer.token_ids or ())
        out.append(Text(f"{text.name}:own", text.prefix, answer.text, ids))
    return out


def answer(gen: Any, texts: list[Text], batch: int, drafted: bool) -> tuple[list[Any], float]:
    """Greedy answers to each text's prefix, ``batch`` prefixes per call; (ids, seconds)."""
    out: list[Any] = []
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        group = texts[i : i + batch]
        rows = gen.generate(
            [t.prefix for t in group],
            max_new_tokens=max(len(t.suffix_ids) for t in group),
            references=[t.suffix for t in group] if drafted else None,
        )
        out.extend(tuple(row[0].token_ids) for row in rows)
    return out, time.perf_counter() - started


def matched(ids: tuple[int, ...], text: Text) -> float:
    """Share of the suffix's tokens the answer reproduces from its start."""
    return leading_match(ids, text.suffix_ids) / max(1, len(text.suffix_ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=100, help="tokens of prefix + suffix")
    parser.add_argument("--per-set", type=int, default=6, help="texts per set")
    parser.add_argument("--batch", type=int, default=1, help="prefixes per generate call")
    parser.add_argument(
        "--sets", default="memorised,reproduced,partial,unknown", help="comma-separated sets"
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs of each mode, interleaved (median kept)"
    )
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()

    victim = load(DEFAULT_VICTIM)
    generate = victim.variant(generation_loop="transformers")
    wanted = args.sets.split(",")
    members = demo_texts(victim, args.length, nonmembers=False)
    sets: dict[str, list[Text]] = {}
    if "memorised" in wanted:
        sets["memorised"] = passages(victim)[: args.per_set]
    if "reproduced" in wanted:
        # Every second member, so that these prefixes are not the partial set's.
        sets["reproduced"] = reproduced(victim, members[1::2][: args.per_set])
    if "partial" in wanted:
        sets["partial"] = members[::2][: args.per_set]
    if "unknown" in wanted:
        sets["unknown"] = demo_texts(victim, args.length, nonmembers=True)[: args.per_set]
    rows = []
    for name, pieces in sets.items():
        if not pieces:
            print(f"{name}: no text")
            continue
        times: dict[str, list[float]] = {"drafted": [], "plain": [], "generate": []}
        outputs: dict[str, list[Any]] = {}
        modes = {
            "drafted": (victim, True),
            "plain": (victim, False),
            "generate": (generate, False),
        }
        for rep in range(args.repeats):
            # The order rotates between repeats: no mode always runs first on a warm machine.
            names = list(modes)[rep % 3 :] + list(modes)[: rep % 3]
            for mode in names:
                gen, with_draft = modes[mode]
                if mode == "drafted":
                    victim.draft_stats = DraftStats()
                outputs[mode], seconds = answer(gen, pieces, args.batch, drafted=with_draft)
                times[mode].append(seconds)
                if mode == "drafted":
                    stats = victim.draft_stats
        t_drafted, t_plain, t_generate = (statistics.median(times[m]) for m in modes)
        drafted, plain, reference = (outputs[m] for m in modes)
        if not drafted == plain == reference:
            bad = [
                t.name for t, a, b, c in zip(pieces, drafted, plain, reference) if not a == b == c
            ]
            raise SystemExit(f"{name}: answers differ between modes for {bad}")
        tokens = sum(len(a) for a in drafted)
        row = dict(
            set=name,
            texts=len(pieces),
            batch=args.batch,
            repeats=args.repeats,
            tokens=tokens,
            matched=round(sum(matched(a, p) for a, p in zip(drafted, pieces)) / len(pieces), 3),
            drafted_s=round(t_drafted, 2),
            plain_s=round(t_plain, 2),
            generate_s=round(t_generate, 2),
            drafted_vs_plain=round(t_plain / t_drafted, 2),
            drafted_vs_generate=round(t_generate / t_drafted, 2),
            passes=stats.passes,
            accepted=f"{stats.accepted}/{stats.drafted}",
            identical=True,
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
    total = {k: sum(r[k] for r in rows) for k in ("drafted_s", "plain_s", "generate_s")}
    print(
        f"all sets: drafted {total['drafted_s']:.1f} s, plain {total['plain_s']:.1f} s "
        f"({total['plain_s'] / total['drafted_s']:.2f}x), model.generate {total['generate_s']:.1f} s "
        f"({total['generate_s'] / total['drafted_s']:.2f}x); answers identical in every mode"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
