"""The method widgets the Probe, Compare and Audit pages share.

Which methods a page offers for the models in its sidebar, their options (one widget set, the
dashboard's lighter CPU presets named once here), loading the models the chosen methods need, and
starting a recorded probe or comparison.
Everything about a method itself — its label, roles, white-box needs, defaults — comes from the
core's registry (:mod:`memprobe_core.attacks.registry`); the widgets here are those of the
built-in options sections (``interactive``, ``gcg``) of :class:`AttackOptions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Literal, get_args

import streamlit as st

from memprobe_core.attacks import registry
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import (
    BUILT_IN_SECTIONS,
    Access,
    AttackOptions,
    GCGOptions,
    InteractiveOptions,
)
from memprobe_core.chance import reference_suffixes
from memprobe_core.config import COMPAT_MODES
from memprobe_core.membership.options import (
    MAX_PAC_AUGMENTATIONS,
    MAX_RECALL_SHOTS,
    MAX_SAMIA_SAMPLES,
    MeasureOptions,
)
from memprobe_core.models import embedded
from memprobe_core.runs.probe import start_probe
from memprobe_core.runs.unit import SplitSpec
from memprobe_core.snippets.split import DataError, Snippet
from memprobe_core.store import Store
from ui_common import presets
from ui_common.job_runner import recorded_methods_job
from ui_common.jobs import start_job
from ui_common.models import ModelChoice, load_model
from ui_common.page import keep, md
from ui_common.snippets import scoring_widgets

# Where a method role's model comes from on a page: the sidebar slot of that name, unless mapped.
# The init model is the attacker, as in the paper; Compare's victim is its "instruct" slot.
DEFAULT_SLOTS: dict[str, str] = {"init": "attacker"}


def slot_of(role: str, slots: Mapping[str, str]) -> str:
    """The sidebar slot holding ``role``'s model."""
    return slots.get(role, DEFAULT_SLOTS.get(role, role))


def offered_methods(
    models: Mapping[str, ModelChoice], slots: Mapping[str, str], *, extracting_only: bool = False
) -> list[str]:
    """The registered methods whose roles all have a model in the sidebar, whose white-box
    roles have a local model (an endpoint exposes no weights or gradients) and whose chat roles
    have a model that may have a chat template; with ``extracting_only``, not the signals-only
    method (Compare compares extractions)."""
    roles = [r for r in registry.ROLES if slot_of(r, slots) in models]
    set_roles = [r for r in roles if models[slot_of(r, slots)].name]
    white_box = [r for r in set_roles if models[slot_of(r, slots)].white_box]
    chat = [r for r in set_roles if not _known_without_chat_template(models[slot_of(r, slots)])]
    return registry.offered_methods(
        set_roles, white_box, extracting_only=extracting_only, chat=chat
    )


def _known_without_chat_template(choice: ModelChoice) -> bool:
    """Whether the choice loads a model known to have no chat template before it is loaded: an
    embedded base model, or the fake backend (the sidebar never gives it one). A hub model or
    an endpoint may have one; a chat method refuses it at run time if it has not."""
    if choice.kind == "fake":
        return True
    known = embedded.EMBEDDED.get(choice.name)
    return choice.kind == "embedded" and known is not None and known.kind == "base"


def unoffered_note(offered: list[str]) -> str | None:
    """A caption naming the registered methods that the sidebar's models cannot run, and why."""
    missing = [s for s in registry.specs() if s.name not in offered and s.extracts]
    if not missing:
        return None
    parts = []
    for spec in missing:
        needs = ", ".join(spec.roles)
        box = f"; white box: {', '.join(spec.white_box_roles)}" if spec.white_box_roles else ""
        chat = f"; a chat model: {', '.join(spec.chat_roles)}" if spec.chat_roles else ""
        parts.append(f"{spec.label} (needs {needs}{box}{chat})")
    return "Not offered with these models: " + "; ".join(parts) + "."


def method_picker(key: str, offered: list[str], *, default: list[str]) -> list[str]:
    """The methods multiselect (labels from the registry), ``default`` kept to the offered ones."""
    return st.multiselect(
        "Methods",
        offered,
        default=[m for m in default if m in offered],
        format_func=registry.method_label,
        key=key,
    )


def method_option_widgets(
    prefix: str, methods: list[str], *, advanced: bool = False, expander: bool = True
) -> dict[str, Any]:
    """The options of the chosen methods as :class:`AttackOptions` keywords (all but α).

    Widgets: rounds and candidates when the interactive method is chosen, GCG steps when GCG is,
    the seed; under "More options" (inline when ``expander`` is False: Streamlit nests no
    expanders) the scoring, and with ``advanced`` the attacker's access, the conventions (compat
    mode) and the prompt-token cap. Keys are ``{prefix}_rounds``,
    ``{prefix}_n``, ``{prefix}_gcg_steps``, ``{prefix}_seed``, ``{prefix}_access``,
    ``{prefix}_compat``, ``{prefix}_mpt`` and ``{prefix}_scoring_*``.
    """
    # The options sections of the chosen methods (two methods may share one).
    chosen = {registry.get_method(m).options_key for m in methods}
    cols = iter(st.columns(4))
    interactive: dict[str, Any] = {}
    # Beside other methods the attacker loop's options say whose they are.
    alone = chosen == {"interactive"}
    if "interactive" in chosen:
        interactive["rounds"] = int(
            next(cols).number_input(
                "Rounds T" if alone else "Ours: rounds T",
                0,
                20,
                key=keep(f"{prefix}_rounds", presets.default_value(prefix, "rounds")),
                help=f"paper: {InteractiveOptions.rounds}",
            )
        )
        interactive["n_candidates"] = int(
            next(cols).number_input(
                "Candidates per round n" if alone else "Ours: candidates n",
                1,
                64,
                key=keep(f"{prefix}_n", presets.default_value(prefix, "n")),
                help=f"paper: {InteractiveOptions.n_candidates}; fewer run faster on a CPU",
            )
        )
    gcg: dict[str, Any] = {}
    if "gcg" in chosen:
        gcg["steps"] = int(
            next(cols).number_input(
                "GCG steps",
                1,
                500,
                key=keep(f"{prefix}_gcg_steps", presets.default_value(prefix, "gcg_steps")),
                help=f"paper: {GCGOptions.steps}; each step is a forward and backward pass of "
                "the base model, slow on a CPU",
            )
        )
    seed = int(next(cols).number_input("Seed", 0, 2**31 - 1, 0, key=f"{prefix}_seed"))
    compat = "paper"
    with st.expander("More options") if expander else st.container():
        scoring = scoring_widgets(f"{prefix}_scoring")
        if advanced:
            compat, extra = _advanced_widgets(prefix)
            interactive.update(extra)
    options: dict[str, Any] = {"scoring": scoring, "seed": seed, "compat": compat}
    if interactive:
        options["interactive"] = InteractiveOptions(**interactive)
    if gcg:
        options["gcg"] = GCGOptions(**gcg)
    others = _registered_method_widgets(prefix, methods)
    if others:
        options["method_options"] = others
    return options


def _registered_method_widgets(prefix: str, methods: list[str]) -> dict[str, Any]:
    """Widgets for the options of chosen methods registered beyond the built-in ones, one per
    field of their options class that has a plain default (bool, int, float or str); other
    fields keep their defaults. Keys: ``{prefix}_{options_key}_{field}``."""
    sections: dict[str, Any] = {}
    for spec in (registry.get_method(m) for m in methods):
        key, cls = spec.options_key, spec.options_class
        if key is None or cls is None or key in BUILT_IN_SECTIONS or key in sections:
            continue
        values: dict[str, Any] = {}
        st.caption(md(f"{spec.label} options"))
        cols = iter(st.columns(4) * (1 + len(fields(cls)) // 4))
        for f in fields(cls):
            widget_key = f"{prefix}_{key}_{f.name}"
            default = f.default
            col = next(cols)
            if isinstance(default, bool):
                values[f.name] = col.checkbox(f.name, value=default, key=widget_key)
            elif isinstance(default, int):
                values[f.name] = int(
                    col.number_input(f.name, value=default, step=1, key=widget_key)
                )
            elif isinstance(default, float):
                values[f.name] = float(col.number_input(f.name, value=default, key=widget_key))
            elif isinstance(default, str):
                values[f.name] = col.text_input(f.name, value=default, key=widget_key)
        # A dict: AttackOptions reads it into the class, so a refused value is shown, not raised.
        sections[key] = values
    return sections


def _advanced_widgets(prefix: str) -> tuple[str, dict[str, Any]]:
    """Access, conventions and the prompt-token cap (the Probe page's extra options)."""
    o1, o2, o3 = st.columns(3)
    access = o1.radio(
        "Attacker sees",
        list(get_args(Access)),
        horizontal=True,
        key=f"{prefix}_access",
        help="partial: the prefix only (paper §5.3); Mem is still against the suffix",
    )
    compat = o2.radio(
        "Conventions",
        list(COMPAT_MODES),
        horizontal=True,
        key=f"{prefix}_compat",
        help="reference: the paper's reference code (victim writes the whole length, the last "
        "len(suffix) tokens scored; its meta-prompts; best_rougeL; BOS in the prefix). "
        "See docs/method.md and --compat in docs/options.md.",
    )
    cap = int(
        o3.number_input(
            "Max prompt tokens",
            0,
            8192,
            0,
            key=f"{prefix}_mpt",
            help="tokens the attacker writes per prompt; 0: the conventions' default (256, "
            "reference 500)",
        )
    )
    return compat, {"access": access, "max_prompt_tokens": cap or None}


def measure_widgets(key: str, *, labelled: bool) -> dict[str, Any]:
    """The opt-in membership signals (:class:`MeasureOptions` fields; 0 turns each off), for
    ``build_options`` under ``"measure"``. ReCaLL's shots are offered for labelled datasets only
    (its prefixes are labelled texts)."""
    st.caption(
        "Opt-in membership signals (each costs more per snippet; docs/method.md §8). 0 is off."
    )
    c1, c2, c3 = st.columns(3)
    recall = (
        c1.number_input(
            "ReCaLL shots",
            0,
            MAX_RECALL_SHOTS,
            0,
            key=f"{key}_recall_shots",
            help="labelled texts of each class put in front of every text (ReCaLL, "
            "Con-ReCall); they are left out of the membership table",
        )
        if labelled
        else 0
    )
    pac = c2.number_input(
        "PAC copies",
        0,
        MAX_PAC_AUGMENTATIONS,
        0,
        key=f"{key}_pac",
        help="word-swapped copies of each text PAC compares it with (its paper: 5)",
    )
    samia = c3.number_input(
        "SaMIA samples",
        0,
        MAX_SAMIA_SAMPLES,
        0,
        key=f"{key}_samia",
        help="sampled continuations of each prefix scored by ROUGE-1 (its paper: 10); needs no "
        "log-probs",
    )
    d1, d2, d3 = st.columns(3)
    temperature = d1.number_input(
        "p_z temperature",
        0.0,
        10.0,
        MeasureOptions.pz_temperature,
        key=f"{key}_pz_temperature",
        help="the sampling scheme p_z (the chance one sample writes the true suffix) is measured "
        "under: temperature (0: greedy); docs/method.md §14",
    )
    top_k = d2.number_input(
        "p_z top-k",
        0,
        1_000_000,
        MeasureOptions.pz_top_k,
        key=f"{key}_pz_top_k",
        help="… its top-k (0: off; Hayes et al.: 40)",
    )
    discover_p = d3.number_input(
        "Extraction chance p",
        0.01,
        0.99,
        MeasureOptions.discover_p,
        key=f"{key}_discover_p",
        help="n at p: the fewest samples that write the suffix with this probability",
    )
    return {
        "measure": MeasureOptions(
            recall_shots=int(recall),
            pac_augmentations=int(pac),
            samia_samples=int(samia),
            pz_temperature=float(temperature),
            pz_top_k=int(top_k),
            discover_p=float(discover_p),
        )
    }


def build_options(alpha: float | None, widgets: dict[str, Any]) -> AttackOptions | None:
    """:class:`AttackOptions` from the widgets (``None`` with the error shown if refused)."""
    try:
        return AttackOptions(alpha=alpha, **widgets)
    except ValueError as exc:
        st.error(md(str(exc)))
        return None


def load_model_set(
    models: Mapping[str, ModelChoice], methods: list[str], slots: Mapping[str, str]
) -> ModelSet | None:
    """Load (cached) the models the methods need from the sidebar's choices (``None`` with the
    error shown when one fails)."""
    loaded = {}
    for role in registry.roles_needed(methods):
        slot = slot_of(role, slots)
        model = load_model(models[slot], slot)
        if model is None:
            return None
        loaded[role] = model
    return ModelSet.from_roles(loaded)


def start_recorded_run(
    job: str,
    store: Store,
    snippet: Snippet,
    methods: list[str],
    length: int,
    model_set: ModelSet,
    options: AttackOptions,
    *,
    kind: Literal["probe", "compare"],
    model_names: dict[str, Any],
    count: Literal["units", "candidates"] = "units",
) -> dict[str, Any] | None:
    """Cut the snippet, record a probe or comparison run and start its job (Probe, Compare).

    The snippet is cut here by the unit runner's own rule (``SplitSpec.cut`` with the options'
    BOS convention), so the suffix the page shows is the one scored; a snippet too short for
    ``length`` is shown as an error before anything is recorded. Returns what the live view needs
    (suffix, its tokens, the scoring, the tokenizer, the run id, the prefix), ``None`` on error.
    """
    spec = SplitSpec()
    try:
        piece = spec.cut(snippet, length, model_set, bos_in_prefix=bool(options.bos_in_prefix))
    except DataError as exc:
        st.error(md(str(exc)))
        return None
    ordered = registry.method_order(methods)
    run_id = start_probe(
        store,
        snippet,
        ordered,
        length,
        model_set,
        options,
        kind=kind,
        model_names=model_names,
        split_spec=spec,
        title=f"{kind} {snippet.id} · {length} tokens",
    )
    whitespace = piece.tokenizer_name == "whitespace"
    view = {
        "suffix": piece.suffix,
        "suffix_tokens": piece.suffix_tokens,
        "scoring": options.scoring,
        "tokenizer": None if whitespace else model_set.victim.tokenizer,
        "run_id": run_id,
        "prefix": piece.prefix,
        "prefix_tokens": len(piece.prefix_ids),
        "tokenizer_name": piece.tokenizer_name,
    }
    # Mem's chance level: the same outputs against other built-in snippets cut the same way.
    view["reference"], view["reference_source"] = reference_suffixes(
        snippet.id,
        snippet.domain,
        lambda other: spec.cut(other, length, model_set, bos_in_prefix=bool(options.bos_in_prefix)),
    )
    plan = {m: registry.expected_candidates(m, options) for m in ordered}
    started = start_job(
        job,
        recorded_methods_job(store, run_id, model_set, count=count, plan=plan),
        f"{kind.title()} run {run_id}",
        run_id=run_id,
        on_cancel_before_start=lambda: store.set_run_status(run_id, "cancelled"),
    )
    started.progress.set(total=sum(plan.values()) if count == "candidates" else len(ordered))
    return view
