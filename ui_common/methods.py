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
from typing import Any, Literal

import streamlit as st

from memprobe_core.attacks import registry
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import BUILT_IN_SECTIONS, AttackOptions
from memprobe_core.chance import reference_suffixes
from memprobe_core.config import ScoringConfig
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.models import embedded
from memprobe_core.option_fields import OptionField
from memprobe_core.runs.probe import start_probe
from memprobe_core.runs.unit import SplitSpec
from memprobe_core.snippets.split import DataError, Snippet
from memprobe_core.store import Store
from ui_common import presets
from ui_common.job_runner import recorded_methods_job
from ui_common.jobs import start_job
from ui_common.models import ModelChoice, load_model
from ui_common.option_widgets import option_widget, page_options, widget_key
from ui_common.page import md

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

    The widgets are generated from the option classes' declarations
    (:mod:`ui_common.option_widgets`): a row with the page options of the chosen built-in
    methods (rounds and candidates for the interactive method, GCG steps for GCG; their starting
    values from the run-size preset) and the seed; a block per other chosen method with options;
    under "More options" (inline when ``expander`` is False: Streamlit nests no expanders) the
    scoring and, with ``advanced``, the advanced ones (attacker's access, conventions, prompt-token
    cap). Keys read like the CLI's flags: ``{prefix}_rounds``, ``{prefix}_n``,
    ``{prefix}_gcg_steps``, ``{prefix}_seed``, ``{prefix}_compat``, ``{prefix}_scoring_*``,
    ``{prefix}_{section}_{field}`` for other methods. Sections are dicts: AttackOptions reads
    them into their classes, so a refused value is shown by :func:`build_options`.
    """
    sections = _chosen_sections(methods)
    built_in = {key: cls for key, cls in sections.items() if key in BUILT_IN_SECTIONS}
    row = [(key, opt) for key, cls in built_in.items() for opt in page_options(cls, advanced=False)]
    row += [("", opt) for opt in page_options(AttackOptions, advanced=False)]
    # Beside any other method, an option's label says whose it is.
    shared = len({registry.get_method(m).options_key for m in methods}) > 1
    options: dict[str, Any] = {key: {} for key in built_in}
    cols = iter(st.columns(4) * (1 + len(row) // 4))
    for key, opt in row:
        label = _owned_label(key, opt) if shared and key else None
        value = option_widget(
            next(cols), opt, widget_key(prefix, opt), label=label, start=_preset(prefix, opt)
        )
        (options[key] if key else options)[opt.name] = value
    others = {
        key: _section_widgets(f"{prefix}_{key}", key, cls)
        for key, cls in sections.items()
        if key not in BUILT_IN_SECTIONS and page_options(cls, advanced=advanced)
    }
    if others:
        options["method_options"] = others
    with st.expander("More options") if expander else st.container():
        scoring = _widgets_of(f"{prefix}_scoring", ScoringConfig, advanced=False)
        options["scoring"] = {k: v for k, v in scoring.items() if v is not None}
        if advanced:
            # MeasureOptions' advanced ones (the prior-aware check) ride with every unit.
            options["measure"] = {}
            extra = [("", AttackOptions), *built_in.items(), ("measure", MeasureOptions)]
            shown = [(k, o) for k, c in extra for o in page_options(c, advanced=True)]
            shown = [(key, opt) for key, opt in shown if opt.info.advanced]
            cols = iter(st.columns(3) * (1 + len(shown) // 3))
            for key, opt in shown:
                value = option_widget(next(cols), opt, widget_key(prefix, opt))
                (options[key] if key else options)[opt.name] = value
    return {k: v for k, v in options.items() if v != {}}


def _chosen_sections(methods: list[str]) -> dict[str, type]:
    """{options section: class} of the chosen methods, in their order (two may share one)."""
    sections: dict[str, type] = {}
    for spec in (registry.get_method(m) for m in registry.method_order(methods)):
        if spec.options_key is not None and spec.options_class is not None:
            sections.setdefault(spec.options_key, spec.options_class)
    return sections


def _owned_label(section: str, opt: OptionField) -> str:
    """Beside other methods' options, a label that says whose it is ("Ours: rounds T"); GCG's
    already does ("GCG steps")."""
    label = opt.info.page or opt.name
    owner = _section_owner(section)
    if not owner or label.lower().startswith(owner.lower()):
        return label
    return f"{owner}: {label[0].lower()}{label[1:]}"


def _section_owner(section: str) -> str:
    """The short label of the (first registered) method owning options ``section``
    (``MethodSpec.short_label``, else its label); ``""`` for a section no method owns."""
    spec = next((s for s in registry.specs() if s.options_key == section), None)
    return "" if spec is None else spec.short_label or spec.label


def _preset(prefix: str, opt: OptionField) -> Any:
    """The run-size preset's starting value of an option it sizes (``None``: the option's own)."""
    return presets.preset_value(prefix, opt.dest or opt.name)


def _section_widgets(prefix: str, section: str, cls: type) -> dict[str, Any]:
    """A block of one registered method's options under a caption with its label."""
    st.caption(md(f"{registry.section_label(section)} options"))
    return _widgets_of(prefix, cls, advanced=False)


def _widgets_of(prefix: str, cls: type, *, advanced: bool) -> dict[str, Any]:
    """Widgets of the page options of ``cls``, four a row, as its keywords."""
    shown = page_options(cls, advanced=advanced)
    cols = iter(st.columns(4) * (1 + len(shown) // 4))
    return {opt.name: option_widget(next(cols), opt, widget_key(prefix, opt)) for opt in shown}


def measure_widgets(key: str, *, labelled: bool) -> dict[str, Any]:
    """The membership signals' page options (:class:`MeasureOptions` fields; 0 turns the opt-in
    ones off), for ``build_options`` under ``"measure"``. Options that need labelled texts
    (ReCaLL's shots) are offered for labelled datasets only."""
    st.caption(
        "Opt-in membership signals (each costs more per snippet; docs/method.md §8). 0 is off."
    )
    shown = [
        opt
        for opt in page_options(MeasureOptions, advanced=False)
        if labelled or not opt.info.needs_labels
    ]
    cols = iter(st.columns(3) * (1 + len(shown) // 3))
    return {
        "measure": {opt.name: option_widget(next(cols), opt, widget_key(key, opt)) for opt in shown}
    }


def build_options(alpha: float | None, widgets: dict[str, Any]) -> AttackOptions | None:
    """:class:`AttackOptions` from the widgets (``None`` with the error shown if refused)."""
    try:
        return AttackOptions(alpha=alpha, **widgets)
    except (TypeError, ValueError) as exc:
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
