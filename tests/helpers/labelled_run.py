"""A small labelled audit written straight into a store (no model), for report and page tests.

Four snippets (two members, two non-members) in two domains × three methods × one length; the
prompts, outputs, ids and domains carry markup that must only ever show as text.
``build_report`` fills the membership table from the methods' Mem (no signal is measured here);
:func:`with_membership` replaces it by hand-made frames with known values and a signal whose
label carries markup.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.result import AttackResult
from memprobe_core.report.build import MEMBERSHIP_COLUMNS, ROC_COLUMNS, Report
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey

SCRIPT = "<script>alert(1)</script>"
PWN = "<script>window.__pwned=1</script>"
CLOSER = "</script><img src=x onerror=alert(2)>"
SUFFIX = "the licensee shall keep the notice " + PWN + " in every copy of the work"
MEM = {
    "ps_base": [0.1, 0.3, 0.0, 0.1],
    "ps_inst": [0.2, 0.2, 0.1, 0.0],
    "interactive": [0.6, 0.5, 0.2, 0.1],
}
LABELS = ["member", "member", "nonmember", "nonmember"]
DOMAINS = ["legal", "code<b>x</b>"]


def labelled_run(path: Path) -> tuple[Store, int]:
    """A finished labelled audit (12 units, one failed) in a store at ``path``."""
    store = Store(path)
    snippets = [
        Snippet(f"s{i}{SCRIPT if i == 0 else ''}", "x " * 60, DOMAINS[i % 2], label=LABELS[i])
        for i in range(4)
    ]
    units = [UnitKey(s.id, m, 40) for s in snippets for m in MEM]
    run_id = store.create_run(
        "audit",
        title=f"labelled {SCRIPT}",
        config={"methods": list(MEM), "lengths": [40], "options": {"seed": 7, "rounds": 1}},
        manifest={"memprobe": "0.1.0", "owner": {"pid": 4242, "host": "secret-host"}},
        snippets=snippets,
        units=units,
    )
    for i, snippet in enumerate(snippets):
        for method, mems in MEM.items():
            if i == 3 and method == "ps_base":
                store.fail_unit(run_id, UnitKey(snippet.id, method, 40), f"boom {CLOSER}")
                continue
            store.finish_unit(
                run_id, UnitKey(snippet.id, method, 40), _result(snippet, method, mems[i])
            )
    store.set_run_status(run_id, "finished")
    return store, run_id


def _result(snippet: Snippet, method: str, mem: float) -> AttackResult:
    manifest = {
        "scoring": {},
        "seed": 7,
        "versions": {"memprobe": "0.1.0", "torch": "2.13.0"},
        "split": {"suffix": SUFFIX, "suffix_tokens": 20, "prefix": "x " * 20},
    }
    return AttackResult(
        method,
        snippet.id,
        snippet.domain,
        40,
        prompt=f"continue {SCRIPT} the text",
        output=f"the licensee shall keep {CLOSER} the notice in every copy",
        mem=mem,
        lcs_p=0.05,
        objective=mem / 2,
        alpha=0.5,
        costs=Costs(victim_queries=1, generated_tokens=20, wall_seconds=1.5),
        manifest=manifest,
        pii={"truth": {"email": ["a@b.c"]}, "copied": {}, "invented": {}},
    )


def with_membership(report: Report) -> Report:
    """``report`` with hand-made membership and ROC frames (one signal, one method)."""
    # Known AUROCs (0.75, 1.0) and a label with markup, which no real signal has.
    rows = [
        ("min_k", f"Min-K% {SCRIPT}", "signal", 0.75, 0.5, 0.0),
        ("interactive", "Ours (interactive)", "method", 1.0, 1.0, 1.0),
    ]
    report.membership = pd.DataFrame(
        [
            dict(
                zip(
                    MEMBERSHIP_COLUMNS,
                    (
                        s,
                        lbl,
                        k,
                        40,
                        2,
                        2,
                        a,
                        a - 0.2,
                        min(1.0, a + 0.2),
                        t1,
                        0.0,
                        1.0,
                        t01,
                        0.0,
                        1.0,
                    ),
                )
            )
            for s, lbl, k, a, t1, t01 in rows
        ],
        columns=MEMBERSHIP_COLUMNS,
    )
    points = [(0.0, 0.0), (0.0, 0.5), (0.5, 1.0), (1.0, 1.0)]
    report.roc = pd.DataFrame(
        [
            dict(zip(ROC_COLUMNS, (s, lbl, k, 40, f, t)))
            for s, lbl, k, *_ in rows
            for f, t in points
        ],
        columns=ROC_COLUMNS,
    )
    return report
