"""NER memorization: are names seen in training recognised more confidently (M-MEM)?

Choose NER models, name lists and prompts; the run scores every prompt on every (in-train,
out-of-train) name pair, ranks the prompts, and explains the best and worst with token-importance
and attention heatmaps. Several models give a Kendall τ matrix of their prompt rankings.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

import ui_common as ui
from ui_common import charts
from ui_common.job_runner import Progress, ProgressSnapshot

JOB = "ner_job"
EMBEDDED = "embedded: MiniLM NER trained here (names known)"
TINY = "tiny random BERT (demo/test, seed {seed})"

ui.page_setup("NER")
st.title("NER memorization")
st.caption(
    "A prompt with a name slot is filled with a name the model was trained on and with one it "
    "never saw; M-MEM is the share of pairs where the trained name gets the higher PER "
    "confidence. 50 % means no memorization signal."
)


@st.cache_resource(show_spinner=False)
def _registry() -> dict[str, Any]:
    """Process-wide cache of loaded NER models (filled by the worker; models never mutated)."""
    return {"lock": threading.Lock(), "models": {}}


def _tiny(seed: int) -> Any:
    """A 2-layer random BERT token classifier on the MiniLM tokenizer: instant, ~50 % M-MEM."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForTokenClassification

    from memprobe_core.ner.embedded import base_encoder_dir
    from memprobe_core.ner.model import NerModel

    tokenizer = AutoTokenizer.from_pretrained(str(base_encoder_dir()))
    labels = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                        id2label=labels, label2id={v: k for k, v in labels.items()})
    with torch.random.fork_rng(devices=[]):  # seed locally; never touch the global RNG state
        torch.manual_seed(seed)
        model = BertForTokenClassification._from_config(config, attn_implementation="eager")
    return NerModel(model, tokenizer, model_id=f"tiny-random-bert:{seed}")


def load_ner(name: str, progress: Progress) -> Any:
    """Load (or train, for the embedded model) one NER model, cached per process."""
    from memprobe_core.ner.embedded import load_embedded_ner
    from memprobe_core.ner.model import NerModel

    registry = _REGISTRY
    with registry["lock"]:
        if name in registry["models"]:
            return registry["models"][name]
        if name == EMBEDDED:
            def on_train(step: int, total: int, message: str) -> None:
                progress.set(message=f"training the embedded NER model (first use only): {message}")
                progress.update_data(train=(step, total))

            model = load_embedded_ner(on_train, attentions=True)
        elif name.startswith("tiny random BERT"):
            model = _tiny(int(name.rsplit("seed ", 1)[1].rstrip(")")))
        else:
            model = NerModel.load(name, attentions=True)
        registry["models"][name] = model
        return model


_REGISTRY = _registry()

# --- inputs ---------------------------------------------------------------------------------------
with st.sidebar:
    st.subheader("NER models")
    defaults = [TINY.format(seed=0), TINY.format(seed=1)] if ui.fake_default() else [EMBEDDED]
    picked = st.multiselect("Models", [EMBEDDED, TINY.format(seed=0), TINY.format(seed=1)],
                            default=defaults, key="ner_models",
                            help="Two or more models give a Kendall τ matrix of prompt rankings.")
    extra = st.text_area("More models (hub ids or local folders, one per line)", key="ner_extra",
                         help="Any token classifier with PER labels, e.g. dslim/bert-base-NER "
                              "(needs a network) or a local folder.")
    model_names = picked + [line.strip() for line in extra.splitlines() if line.strip()]

st.subheader("Names")
names_source = st.radio("Name lists", ["The embedded model's lists", "Upload two lists"],
                        horizontal=True, key="ner_names_source")
n1, n2, n3 = st.columns(3)
max_pairs = int(n1.number_input("Pairs (at most)", 2, 100_000, 100, key="ner_pairs"))
seed = int(n2.number_input("Seed", 0, 2**31 - 1, 0, key="ner_seed"))
dev_fraction = float(n3.number_input("Dev share (0: no dev/test split)", 0.0, 0.9, 0.0, 0.1,
                                     key="ner_dev", help="e.g. 0.5 reports dev-vs-test Kendall τ"))
uploads: dict[str, Any] = {}
if names_source == "Upload two lists":
    u1, u2 = st.columns(2)
    uploads["in"] = u1.file_uploader("In-train names (.txt one per line, or .csv)",
                                     type=["txt", "csv"], key="upload_ner_in")
    uploads["out"] = u2.file_uploader("Out-of-train names", type=["txt", "csv"], key="upload_ner_out")

st.subheader("Prompts")
from memprobe_core.ner.prompts import PROMPT_TYPES  # noqa: E402 - after the page header on purpose

prompt_source = st.radio("Prompts", ["Templates", "My prompts"], horizontal=True, key="ner_psource")
if prompt_source == "Templates":
    p1, p2 = st.columns([1, 3])
    n_templates = int(p1.number_input("How many", 1, 3000, 40, key="ner_ntemplates"))
    types = p2.multiselect("Types", list(PROMPT_TYPES), default=list(PROMPT_TYPES), key="ner_types")
    own_prompts = ""
else:
    own_prompts = st.text_area("One prompt per line, each with {name} exactly once", key="ner_own",
                               value="I met {name} yesterday.\nHave you seen {name}?\n"
                                     "What a game by {name}!\nCall {name} tomorrow.")
    n_templates, types = 0, []
o1, o2, o3 = st.columns(3)
metric = o1.selectbox("M-MEM", ["pairwise", "all_pairs"], key="ner_metric",
                      help="pairwise: % of pairs with C(in) > C(out) (paper); all_pairs: every "
                           "in × out combination, ties ½ (reference code)")
importance_steps = int(o2.number_input("Token-importance steps", 0, 30, 4, key="ner_steps",
                                       help="leave-one-token-out removals for the best and the "
                                            "worst prompt (0: skip)"))
attention = o3.checkbox("Attention heatmaps", value=True, key="ner_attention")


def _upload_names(upload: Any, what: str) -> list[str]:
    from memprobe_core.ner.names import read_name_list

    if upload is None:
        raise ValueError(f"upload the {what} name list first")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(upload.name).name
        path.write_bytes(upload.getvalue())
        return read_name_list(path)


def prepare() -> dict[str, Any] | None:
    """Validate the inputs in the page (so mistakes show at once); ``None`` on an error shown."""
    from memprobe_core.ner.embedded import embedded_name_lists
    from memprobe_core.ner.names import build_pairs, split_pairs
    from memprobe_core.ner.prompts import check_prompts, template_prompts

    if not model_names:
        st.error("Pick at least one NER model in the sidebar.")
        return None
    try:
        if names_source == "Upload two lists":
            in_names, out_names = _upload_names(uploads.get("in"), "in-train"), _upload_names(
                uploads.get("out"), "out-of-train")
        else:
            in_names, out_names = embedded_name_lists()
        pairs = build_pairs(in_names, out_names, seed=seed, max_pairs=max_pairs)
        dev = test = None
        if dev_fraction > 0:
            dev, test = split_pairs(pairs, dev_fraction=dev_fraction, seed=seed)
        if prompt_source == "Templates":
            if not types:
                raise ValueError("pick at least one prompt type")
            prompts = template_prompts(n_templates, seed=seed, types=types)
        else:
            prompts = check_prompts([line for line in own_prompts.splitlines() if line.strip()])
    except Exception as exc:  # NameListError, PromptError, ValueError: all say what to fix
        st.error(ui.md(str(exc)))
        return None
    if len(prompts) < 2:
        st.warning("With one prompt there is no ranking; add prompts for the charts.")
    return {"pairs": pairs, "dev": dev, "test": test, "prompts": prompts, "models": list(model_names),
            "metric": metric, "steps": importance_steps, "attention": attention}


def ner_job(plan: dict[str, Any]):
    from memprobe_core.ner import analyses
    from memprobe_core.ner.attention import compare_attention
    from memprobe_core.ner.importance import best_worst_importance
    from memprobe_core.ner.scoring import score_prompts

    names, metric_, steps, want_attention = plan["models"], plan["metric"], plan["steps"], plan["attention"]

    def job(progress: Progress, cancel: threading.Event) -> dict[str, Any]:
        out: dict[str, Any] = {"scores": {}, "importance": None, "attention": [], "notes": []}
        for i, name in enumerate(names):
            if cancel.is_set():
                break
            progress.set(message=f"loading {name}…", done=0, total=None)
            model = load_ner(name, progress)

            def on_score(done: int, total: int, message: str, i: int = i) -> None:
                progress.set(done=done, total=total,
                             message=f"model {i + 1}/{len(names)}: {message}")

            out["scores"][name] = score_prompts(model, plan["prompts"], plan["pairs"],
                                                metric=metric_, on_progress=on_score)
            if i == 0:
                first = out["scores"][name]
                spread = analyses.spread(first)
                if steps > 0 and not cancel.is_set():
                    eval_pairs = plan["dev"] or plan["pairs"]
                    progress.set(message="token importance of the best and worst prompts…",
                                 done=0, total=None)
                    out["importance"] = best_worst_importance(
                        model, spread["best_prompt"], spread["worst_prompt"], eval_pairs,
                        steps=steps, metric=metric_,
                        on_progress=lambda d, t, m: progress.set(done=d, total=t, message=m))
                if want_attention and not cancel.is_set():
                    if not model.supports_attentions:
                        out["notes"].append(f"{name} was loaded without eager attention.")
                    else:
                        progress.set(message="attention heatmaps…", done=0, total=None)
                        sample = plan["pairs"][:50]
                        for which in ("best_prompt", "worst_prompt"):
                            try:
                                out["attention"].append(
                                    (which, compare_attention(model, spread[which], sample)))
                            except ValueError as exc:
                                out["notes"].append(str(exc))
        if plan["dev"] is not None:
            out["dev_test"] = {n: analyses.dev_test_tau(s.subset(_idx(s, plan["dev"])),
                                                        s.subset(_idx(s, plan["test"])))
                               for n, s in out["scores"].items()}
        return out

    return job


def _idx(scores: Any, subset: list) -> list[int]:
    where = {id(p): i for i, p in enumerate(scores.pairs)}
    return [where[id(p)] for p in subset]


def render(snap: ProgressSnapshot) -> None:
    """Final results (the live view shows only the progress bar above)."""
    result = snap.result
    if not snap.is_final or not result or not result.get("scores"):
        return
    from memprobe_core.ner import analyses

    scores: dict[str, Any] = result["scores"]
    for note in result.get("notes", []):
        st.caption(ui.md(note))
    rows = []
    for name, s in scores.items():
        summary = s.summary()
        rows.append({"model": name, "prompts": summary["prompts"], "pairs": summary["pairs"],
                     "mean M-MEM %": 100 * summary["m_mem_mean"], "best %": 100 * summary["m_mem_best"],
                     "worst %": 100 * summary["m_mem_worst"], "spread (points)": 100 * summary["spread"]})
    st.subheader("Summary")
    st.dataframe(pd.DataFrame(rows).round(1), hide_index=True, width="stretch")

    first_name = next(iter(scores))
    shown = st.selectbox("Model for the charts", list(scores), key="ner_show") if len(scores) > 1 else first_name
    s = scores[shown]
    ranked = analyses.rank_prompts(s)
    left, right = st.columns(2)
    with left:
        st.plotly_chart(charts.ner_ranking_figure(ranked), width="stretch")
    with right:
        groups = pd.concat([analyses.property_groups(v, "type").assign(model=k)
                            for k, v in scores.items()], ignore_index=True)
        st.plotly_chart(charts.ner_box_by(groups), width="stretch")
    st.caption("Prompts, best first (rank 1 = highest M-MEM):")
    st.dataframe(ranked[["rank", "prompt", "type", "m_mem", "mean_conf_in", "mean_conf_out", "gap"]],
                 hide_index=True, width="stretch", height=260)

    trace = result.get("importance")
    if trace is not None:
        st.subheader(f"Token importance ({first_name})")
        st.caption("Each row removes one token: the best prompt loses its least important token, "
                   "the worst its most important (paper Figure 4). Blue helps M-MEM, red hurts.")
        best, worst = trace
        c1, c2 = st.columns(2)
        with c1:
            st.plotly_chart(charts.importance_heatmap(best.heatmap(), title="Best prompt"),
                            width="stretch")
        with c2:
            st.plotly_chart(charts.importance_heatmap(worst.heatmap(), title="Worst prompt"),
                            width="stretch")
    if result.get("attention"):
        st.subheader(f"Attention of the name position ({first_name})")
        cols = st.columns(len(result["attention"]))
        for col, (which, comp) in zip(cols, result["attention"]):
            with col:
                label = "Best prompt" if which == "best_prompt" else "Worst prompt"
                st.plotly_chart(charts.attention_heatmap(comp.heatmap(), title=label), width="stretch")
    if len(scores) > 1:
        st.subheader("Agreement between models")
        tau = analyses.tau_matrix({k: v.m_mem for k, v in scores.items()})
        st.plotly_chart(charts.tau_heatmap(tau), width="stretch")
    if result.get("dev_test"):
        st.caption("Kendall τ of each model's prompt ranking on dev vs test pairs: " + ", ".join(
            f"{ui.md(k)}: {v:.2f}" for k, v in result["dev_test"].items()))

    st.subheader("Export")
    e1, e2 = st.columns(2)
    prompts_all = pd.concat([v.prompt_table().assign(model=k) for k, v in scores.items()],
                            ignore_index=True)
    names_all = pd.concat([v.name_table().assign(model=k) for k, v in scores.items()],
                          ignore_index=True)
    with e1:
        ui.csv_download("Prompt scores CSV", prompts_all, "memprobe-ner-prompts.csv", key="ner_dl_prompts")
    with e2:
        ui.csv_download("Per-name confidences CSV", names_all, "memprobe-ner-names.csv",
                        key="ner_dl_names")


running = ui.job_running(JOB)
if st.button("Run NER audit", type="primary", disabled=running, key="ner_run"):
    plan = prepare()
    if plan is not None:
        ui.start_job(JOB, ner_job(plan), "NER audit")
snap = ui.show_job(JOB, render)
if snap is None:
    st.info("Pick models, names and prompts, then press Run NER audit. The embedded model trains "
            "once (about a minute on a CPU) and is cached.")
