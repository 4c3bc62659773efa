"""Meta-prompts of the attacker loop (paper §3.2) and how they are sent to a model.

Two meta-prompts drive Algorithm 1:

- the **init** meta-prompt turns the snippet (full access) or its prefix (partial access) into a
  first question, with the paper's wording and its two regularizers;
- the **refine** meta-prompt asks for a paraphrase of the previous best question.

An instruct model (one with a chat template) gets them as a one-message chat and the backend
applies its template. A base model has no chat template, so it gets a few-shot text format that
it can continue with one line (a question); the examples are neutral (public-domain-style texts)
so they do not leak the probed snippet.

Three named wordings (``AttackOptions.meta_prompts``, recorded in every manifest):

- ``paper``: the sentences §3.2 of the paper quotes, nothing added;
- ``paper+reply-only``: the same plus "Reply with the ... only." (paper mode's default: small
  attackers otherwise wrap their question in chat);
- ``reference``: the refine text the paper's reference code builds
  (``utils.construct_meta_prompt``); that code has no init meta-prompt of its own (its initial
  questions come pre-written with GPT-4 from the paper's meta-prompt), so its init text is
  ``paper``'s.

Either text can be replaced (``InteractiveOptions.init_meta_prompt`` / ``refine_meta_prompt``; the
manifest then names the wording ``custom``). A custom text may place the material with
``{snippet}`` / ``{question}``; without the placeholder the material is appended after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memprobe_core.models.base import Request

# Paper §3.2, its quoted sentences verbatim, joined with full stops: the meta-prompt and the two
# regularizers it names ("such as ..."). The paper sends it "along with the pre-training sample".
PAPER_INIT = (
    "Given a paragraph snippet, please generate a question that asks for the generation of the "
    "paragraph. Make sure to keep the question abstract. Ensure the question is not overly "
    "lengthy."
)
# Paper §3.2, its quoted sentences verbatim ("alongside the preceding step's prompt").
PAPER_REFINE = "I have old questions. Write your new question by paraphrasing the old ones."

# Not in the paper: an instruction added so that small attackers reply with the question alone.
_REPLY_ONLY_INIT = " Reply with the question only."
_REPLY_ONLY_REFINE = " Reply with the new question only."

# The reference code's refine text, verbatim: utils.construct_meta_prompt with one old question,
#   f"""{task_info} \n
#         {blue_text}
#         {instruction_text}. """
# task_info = "I have a question" (dataset.optimization_task_info), blue_text =
# f"Old question:{p}", instruction_text = "Write your new question by paraphrasing the old ones";
# the indentation is the f-string's. The user turn then ends in "\n New question: " before the
# assistant marker. Whitespace kept as it is, so the attacker sees what the reference's saw.
REFERENCE_REFINE = (
    "I have a question \n\n        Old question:{question}\n        Write your new question by "
    "paraphrasing the old ones. \n New question: "
)


@dataclass(frozen=True)
class Wording:
    """One named pair of meta-prompts (init, refine)."""

    name: str
    init: str
    refine: str


WORDINGS: dict[str, Wording] = {
    "paper": Wording("paper", PAPER_INIT, PAPER_REFINE),
    "paper+reply-only": Wording(
        "paper+reply-only", PAPER_INIT + _REPLY_ONLY_INIT, PAPER_REFINE + _REPLY_ONLY_REFINE
    ),
    "reference": Wording("reference", PAPER_INIT, REFERENCE_REFINE),
}
# Kept for callers that read the default texts (the dashboard's editable fields).
INIT_META_PROMPT = WORDINGS["paper+reply-only"].init
REFINE_META_PROMPT = WORDINGS["paper+reply-only"].refine


def wording(name: str) -> Wording:
    """The wording called ``name``.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if name not in WORDINGS:
        raise ValueError(f"meta-prompt wording {name!r} is unknown; use one of {tuple(WORDINGS)}")
    return WORDINGS[name]


def wording_name(name: str, init_text: str | None, refine_text: str | None) -> str:
    """The wording a run used: ``name``, or ``custom`` when a text replaced either of its own."""
    return "custom" if (init_text or refine_text) else name


# Few-shot examples for base models (no chat template). Neutral material, one line per answer.
_INIT_SHOTS: tuple[tuple[str, str], ...] = (
    (
        "It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a wife.",
        "How does the famous opening line of a classic novel about marriage and fortune read?",
    ),
    (
        "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b",
        "Can you write two small Python functions for basic arithmetic?",
    ),
)
_REFINE_SHOTS: tuple[tuple[str, str], ...] = (
    (
        "What is the opening sentence of the novel about the Bennet family?",
        "Could you quote how the novel about the Bennet sisters begins?",
    ),
    (
        "Can you write a Python function that adds two numbers?",
        "Please show a short Python function returning the sum of its two arguments.",
    ),
)


def _fill(template: str, key: str, value: str, label: str) -> str:
    """Put ``value`` into ``template`` at ``{key}``, or append it after ``label``."""
    placeholder = "{" + key + "}"
    if placeholder in template:
        return template.replace(placeholder, value)
    return f"{template.rstrip()}\n\n{label}\n{value}"


def init_request(material: str, *, chat: bool, meta_prompt: str | None = None) -> Request:
    """The request that asks the init model for the first question.

    Args:
        material: the whole snippet (full access) or its prefix (partial access).
        chat: the init model has a chat template (send a chat) or not (send few-shot text).
        meta_prompt: the init meta-prompt text (``None``: ``paper+reply-only``'s).

    Returns:
        A one-message chat, or a few-shot text ending in ``"Question:"``.
    """
    meta = meta_prompt or INIT_META_PROMPT
    if chat:
        return [{"role": "user", "content": _fill(meta, "snippet", material, "Paragraph snippet:")}]
    # A few-shot text can only hold the material in one place: a custom {snippet} placeholder
    # is dropped from the instruction line and the material goes in the last shot.
    lines = [meta.replace("{snippet}", "the paragraph below").strip(), ""]
    for paragraph, question in _INIT_SHOTS:
        lines += [f"Paragraph: {paragraph}", f"Question: {question}", ""]
    lines += [f"Paragraph: {material}", "Question:"]
    return "\n".join(lines)


def refine_request(old_question: str, *, chat: bool, meta_prompt: str | None = None) -> Request:
    """The request that asks the attacker for a paraphrase of ``old_question``.

    Args:
        old_question: the previous round's best question (``p_best``).
        chat: the attacker has a chat template (send a chat) or not (send few-shot text).
        meta_prompt: the refine meta-prompt text (``None``: ``paper+reply-only``'s).
    """
    meta = meta_prompt or REFINE_META_PROMPT
    if chat:
        return [{"role": "user", "content": _fill(meta, "question", old_question, "Old question:")}]
    # One instruction line: a wording with line breaks inside (``reference``) is joined.
    lines = [" ".join(meta.replace("{question}", "the old question below").split()), ""]
    for old, new in _REFINE_SHOTS:
        lines += [f"Old question: {old}", f"New question: {new}", ""]
    lines += [f"Old question: {old_question}", "New question:"]
    return "\n".join(lines)


# Labels small models like to echo before their answer.
_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:new\s+question|question|old\s+question|paraphrased\s+question|"
    r"paraphrase|answer|q|prompt)\s*(?:\d+)?\s*[:：.-]\s*(?:\*\*)?\s*",
    re.IGNORECASE,
)
_QUOTES = "\"'“”‘’`«»"
# Chatty preambles of instruct models: "Here's a new question:", "Sure! Here is the paraphrase:".
_PREAMBLE = re.compile(
    r"^\s*(?:sure|certainly|of course|okay|ok)?[,!.]?\s*(?:here(?:'s| is| are)|below is)\b[^:]{0,80}:\s*",
    re.IGNORECASE,
)


def clean_prompt(text: str) -> str:
    """The question inside an attacker's reply.

    Takes the first line with content, strips chatty preambles ("Sure! Here's a new question:"),
    labels ("New question:", "Question 1:"), list markers, markdown emphasis and surrounding
    quotes; a label or introduction alone on its line moves on to the next line. Returns ``""`` when nothing usable is left (the
    caller keeps such candidates in the trace, flagged ``"empty"``).
    """
    lines = [ln.strip() for ln in text.replace("\r", "\n").split("\n")]
    lines = [ln for ln in lines if ln]
    for k, line in enumerate(lines):
        line = _PREAMBLE.sub("", line)
        if not line or (line.endswith(":") and k + 1 < len(lines) and not _LABEL.fullmatch(line)):
            continue  # an introduction line ("Here are some ideas:") before the question
        previous = None
        while previous != line:  # labels and quotes can nest: '**Question:** "..."'
            previous = line
            line = _LABEL.sub("", line)
            line = re.sub(r"^(?:[-*•]|\d+[.)])\s+", "", line)
            line = line.strip().strip("*_").strip()
            if len(line) >= 2 and line[0] in _QUOTES and line[-1] in _QUOTES:
                line = line[1:-1].strip()
            elif line and line[0] in _QUOTES and line.count(line[0]) == 1:
                line = line[1:].strip()
            elif line and line[-1] in _QUOTES and line.count(line[-1]) == 1:
                line = line[:-1].strip()
        if line:
            return line
    return ""
