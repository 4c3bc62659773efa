"""The NER page's views: the audit's widgets read into a ``NerAuditConfig``, the job, the results.

The audit itself (pairs, prompts, M-MEM, token importance, attention, Kendall τ) is the core's
(:func:`memprobe_core.ner.audit.run_ner_audit`); these helpers read widgets into its config and
draw what it returns.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import streamlit as st

from memprobe_core.ner.audit import NerAuditConfig, NerAuditResult, run_ner_audit
from memprobe_core.ner.names import NameFile
from memprobe_core.ner.prompts import PROMPT_TYPES
from memprobe_core.ner.registry import EMBEDDED, ner_models
from memprobe_core.ner.scoring import Metric
from memprobe_core.option_fields import option_named
from ui_common import charts, tables
from ui_common.job_runner import JobFunction, Progress, ProgressSnapshot
from ui_common.option_widgets import option_widget, tooltip, widget_key
from ui_common.page import keep, md
from ui_common.presets import run_size_radio
from ui_common.render import csv_download

# Summary columns in percent (one decimal, as the metric above them).
_PERCENT_COLUMNS = ("mean M-MEM %", "best %", "worst %", "spread (points)")
# One more than the library's default: the page draws the steps as a chart worth reading.
PAGE_IMPORTANCE_STEPS = 4
OWN_PROMPTS = (
    "I met {name} yesterday.\nHave you seen {name}?\nWhat a game by {name}!\nCall {name} tomorrow."
)


@dataclass(frozen=True)
class NerSize:
    """A run size of the NER page: name pairs, template prompts and token-importance steps."""

    name: str
    label: str
    pairs: int
    templates: int
    importance_steps: int

    def widget_values(self) -> dict[str, int]:
        return {
            "ner_pairs": self.pairs,
            "ner_templates": self.templates,
            "ner_importance_steps": self.importance_steps,
        }


NER_QUICK = NerSize("quick", "Quick (CPU)", pairs=30, templates=10, importance_steps=1)
NER_FULL = NerSize(
    "full",
    "Full",
    pairs=NerAuditConfig.max_pairs,
    templates=NerAuditConfig.templates,
    importance_steps=PAGE_IMPORTANCE_STEPS,
)
NER_SIZES = {s.name: s for s in (NER_QUICK, NER_FULL)}


def ner_size() -> NerSize:
    """The chosen run size (Quick before any choice: the page is used on CPUs first)."""
    return NER_SIZES.get(st.session_state.get("ner_size", ""), NER_QUICK)


def size_widget() -> NerSize:
    """The "Run size" radio; a choice sets pairs, template prompts and token-importance steps."""

    q, f = NER_QUICK, NER_FULL
    name = run_size_radio(
        keep("ner_size", NER_QUICK.name, list(NER_SIZES)),
        {n: size.label for n, size in NER_SIZES.items()},
        lambda chosen: st.session_state.update(NER_SIZES[chosen].widget_values()),
        help_text=(
            f"Quick: {q.pairs} pairs × {q.templates} template prompts, {q.importance_steps} "
            f"token-importance step. Full: {f.pairs} pairs × {f.templates} prompts, "
            f"{f.importance_steps} steps. Each value can still be changed below."
        ),
    )
    return NER_SIZES[name]


# The NER audits this dashboard process has run: (seconds, filled prompts scored), newest last.
_TIMINGS: list[tuple[float, int]] = []


def scored_prompts(config: NerAuditConfig) -> int:
    """The filled prompts an audit scores: models × prompts × pairs × 2 (each pair's two names)."""
    own = config.prompts
    prompts = len(own) if isinstance(own, list | tuple) else config.templates
    return len(config.models) * prompts * config.max_pairs * 2


def estimate_text(config: NerAuditConfig) -> str:
    """Before Run: the time this audit should take, from the last audit run here (seconds per
    filled prompt scored, times this one's), or what is known before any."""
    if not _TIMINGS:
        return (
            "No NER audit has run in this dashboard yet, so no time is measured: the first one "
            "measures it (its time includes training the embedded model, on first use only)."
        )
    seconds, scored = _TIMINGS[-1]
    estimate = seconds / max(1, scored) * scored_prompts(config)
    return (
        f"Estimated time: about {_duration(estimate)} (the last NER audit here took "
        f"{_duration(seconds)} for {scored:,} filled prompts; this one scores "
        f"{scored_prompts(config):,}; token importance and attention scaled with them)."
    )


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def read_config() -> NerAuditConfig:
    """The audit config from the widgets (raises with a message saying what to fix)."""
    models = _models_widgets()
    names, max_pairs, seed, dev, missing = _names_widgets()
    prompts, n_templates, types = _prompts_widgets()
    metric, steps, attention = _analysis_widgets()
    if missing:  # after every widget is drawn, so the page stays whole while uploads are due
        raise ValueError(f"upload the {' and '.join(missing)} lists first")
    return NerAuditConfig(
        models=models,
        in_names=names["in_names"],
        out_names=names["out_names"],
        max_pairs=max_pairs,
        seed=seed,
        dev_fraction=dev,
        prompts=prompts,
        templates=n_templates,
        prompt_types=tuple(types),
        metric=metric,
        importance_steps=steps,
        attention_pairs=NerAuditConfig.attention_pairs if attention else 0,
    )


def _models_widgets() -> tuple[str, ...]:
    """The NER models picked in the sidebar plus any typed ones."""
    choices = ner_models()
    with st.sidebar:
        st.subheader("NER models")
        picked = st.multiselect(
            "Models",
            list(choices),
            default=[EMBEDDED],
            key="ner_models",
            format_func=lambda n: f"{n}: {choices.get(n, '')}",
            help="Two or more models give a Kendall τ matrix of prompt rankings.",
        )
        extra = st.text_area(
            "More models (hub ids or local folders, one per line)",
            key="ner_extra",
            help="Any token classifier with PER labels, e.g. dslim/bert-base-NER "
            "(needs a network) or a local folder.",
        )
    return tuple(picked + [line.strip() for line in extra.splitlines() if line.strip()])


def _names_widgets() -> tuple[dict[str, NameFile | None], int, int, float, list[str]]:
    """Name lists (the model's own, or two uploads), pairs, seed, dev share, missing uploads."""
    st.subheader("Names")
    own_names = (
        st.radio(
            "Name lists",
            ["The model's own lists", "Upload two lists"],
            horizontal=True,
            key="ner_names_source",
        )
        == "The model's own lists"
    )
    names: dict[str, NameFile | None] = {"in_names": None, "out_names": None}
    max_pairs, seed, dev = (
        _option(column, name)
        for column, name in zip(st.columns(3), ("max_pairs", "seed", "dev_fraction"))
    )
    missing = []
    if not own_names:
        for col, field, what in zip(st.columns(2), names, ("In-train names", "Out-of-train names")):
            upload = col.file_uploader(
                f"{what} (.txt one per line, or .csv)",
                type=["txt", "csv"],
                key=f"upload_ner_{field[:-6]}",
            )
            if upload is None:
                missing.append(what.lower())
            else:
                names[field] = NameFile(upload.name, upload.getvalue())
    return names, max_pairs, seed, dev, missing


def _prompts_widgets() -> tuple[list[str] | None, int, tuple[str, ...]]:
    """Template prompts (how many, which types) or the user's own prompts."""
    st.subheader("Prompts")
    prompts, n_templates, types = None, NerAuditConfig.templates, tuple(PROMPT_TYPES)
    if (
        st.radio("Prompts", ["Templates", "My prompts"], horizontal=True, key="ner_psource")
        == "Templates"
    ):
        p1, p2 = st.columns([1, 3])
        n_templates = _option(p1, "templates")
        types = tuple(
            p2.multiselect("Types", list(PROMPT_TYPES), default=list(PROMPT_TYPES), key="ner_types")
        )
    else:
        text = st.text_area(
            "One prompt per line, each with {name} exactly once", key="ner_own", value=OWN_PROMPTS
        )
        prompts = [line for line in text.splitlines() if line.strip()]
    return prompts, n_templates, types


def _analysis_widgets() -> tuple[Metric, int, bool]:
    """M-MEM variant, token-importance steps and whether to draw attention heatmaps."""
    o1, o2, o3 = st.columns(3)
    metric = _option(o1, "metric")
    # Not the generated widget: on those an optional number's 0 stands for its default, here 0
    # skips token importance (and None, until only the slot is left, is for the library).
    steps_option = option_named(NerAuditConfig, "importance_steps")
    steps = int(
        o2.number_input(
            steps_option.info.page or "",
            0,
            30,
            key=keep("ner_importance_steps", ner_size().importance_steps),
            help=tooltip(steps_option),
        )
    )
    attention = o3.checkbox("Attention heatmaps", value=True, key="ner_attention")
    return metric, steps, attention


def _option(container: Any, name: str) -> Any:
    """The generated widget of ``NerAuditConfig``'s option ``name`` (key ``ner_<flag name>``);
    pairs and templates start from the run size."""
    opt = option_named(NerAuditConfig, name)
    key = widget_key("ner", opt)
    return option_widget(container, opt, key, start=ner_size().widget_values().get(key))


def job(config: NerAuditConfig) -> JobFunction:
    """The worker: the audit, its progress fed to the page's bar."""

    def run(progress: Progress, cancel: threading.Event) -> NerAuditResult:
        # One rate over loading (minutes of training on first use), scoring and the analyses
        # swung the ETA between 26 and 50 minutes: none is shown, the message counts the steps.
        progress.show_eta = False
        result = run_ner_audit(
            config,
            cancel=cancel,
            on_progress=lambda done, total, message: progress.set(
                done=done, total=total, message=message
            ),
        )
        if not result.cancelled and result.seconds > 0:
            _TIMINGS.append((result.seconds, scored_prompts(config)))
        return result

    return run


def render(snap: ProgressSnapshot) -> None:
    """Final results (the live view shows only the progress bar above)."""
    result: NerAuditResult | None = snap.result
    if not snap.is_final or result is None or not result.reports:
        return
    st.subheader("Summary")
    if result.cancelled:
        st.caption(f"Cancelled: the {len(result.reports)} model(s) finished are shown.")
    tables.show(result.summary_table(), digits=dict.fromkeys(_PERCENT_COLUMNS, 1))
    labels = list(result.reports)
    shown = (
        st.selectbox("Model for the charts", labels, key="ner_show")
        if len(labels) > 1
        else labels[0]
    )
    report = result.reports[shown]
    st.metric(
        f"Mean M-MEM of the model for the charts ({len(report.scores.pairs)} pairs)",
        f"{100 * report.scores.m_mem.mean():.1f} %",
    )
    for note in report.notes:
        st.caption(md(note))
    left, right = st.columns(2)
    left.plotly_chart(charts.ner_ranking_figure(report.ranked), width="stretch")
    right.plotly_chart(charts.ner_box_by(result.type_groups()), width="stretch")
    st.caption("Prompts, best first (rank 1 = highest M-MEM):")
    ranked = report.ranked[["rank", "prompt", "type", "m_mem", "mean_conf_in", "mean_conf_out"]]
    tables.show(
        ranked.assign(m_mem=100 * ranked["m_mem"], gap=report.ranked["gap"]),
        height=260,
        labels={"m_mem": "M-MEM %"},
        digits={"m_mem": 1},
        tips={
            "m_mem": "Share of name pairs where the in-train name gets the higher confidence "
            "(50 % = no memorization).",
            "gap": "Mean confidence of the in-train names minus the out-of-train names.",
        },
    )
    if report.importance is not None:
        st.subheader(f"Token importance ({md(shown)})")
        st.caption(
            "Each row removes one token: the best prompt loses its least important token, "
            "the worst its most important (paper Figure 4). Blue helps M-MEM, red hurts."
        )
        for col, trace, title in zip(
            st.columns(2), report.importance, ("Best prompt", "Worst prompt")
        ):
            col.plotly_chart(
                charts.importance_heatmap(trace.heatmap(), title=title), width="stretch"
            )
    if report.attention:
        st.subheader(f"Attention of the name position ({md(shown)})")
        for col, comp, title in zip(
            st.columns(2), report.attention, ("Best prompt", "Worst prompt")
        ):
            col.plotly_chart(charts.attention_heatmap(comp.heatmap(), title=title), width="stretch")
    if len(labels) > 1:
        st.subheader("Agreement between models")
        st.plotly_chart(charts.tau_heatmap(result.tau_across_models()), width="stretch")
    if result.dev_pairs is not None:
        st.caption(
            "Kendall τ of each model's prompt ranking on dev vs test pairs: "
            + ", ".join(f"{md(k)}: {r.dev_test_tau:.2f}" for k, r in result.reports.items())
        )
    st.subheader("Export")
    e1, e2 = st.columns(2)
    with e1:
        csv_download(
            "Prompt scores CSV",
            result.prompt_scores(),
            "memprobe-ner-prompts.csv",
            key="ner_dl_prompts",
        )
    with e2:
        csv_download(
            "Per-name confidences CSV",
            result.name_confidences(),
            "memprobe-ner-names.csv",
            key="ner_dl_names",
        )
