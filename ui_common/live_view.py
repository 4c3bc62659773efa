"""What a running job's models are writing now: every row of the batch growing, with its running
scores, and a white-box search's loss per step.

Drawn by the job's status fragment (``ui_common.jobs``), which reruns alone a few times a second
while a batch is being written: the page around it (tables, charts) is not redrawn for this.
The rows come from :class:`~memprobe_core.models.live.LiveBatch` (published by the decode loop,
never changed afterwards); nothing here touches the job. Text is shown in dataframe cells and
escaped captions, never as HTML.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from memprobe_core.models.live import LiveBatch
from ui_common.page import md

# The end of each row's text is what changes: a cell shows this many characters of it.
TAIL_CHARS = 160
LABEL_CHARS = 60

_WHO = {
    "victim": ("Victim", "answers"),
    "base": ("Base model", "answers"),
    "attacker": ("Attacker", "prompts"),
}


def streaming(batch: LiveBatch | None) -> bool:
    """Whether ``batch`` is being written now (a poll then stays fast)."""
    return batch is not None and not batch.closed


def headline(batch: LiveBatch) -> str:
    """One line: who writes how many rows, how far they are ("Victim writing 24 answers …")."""
    who, what = _WHO.get(batch.role, (batch.role.capitalize() or "Model", "texts"))
    rows = len(batch.rows)
    longest = max((row.tokens for row in batch.rows), default=0)
    ended = batch.rows_done
    parts = [
        f"{who} writing {rows} {what if rows != 1 else what[:-1]}",
        f"{longest} of {batch.max_new_tokens} tokens",
    ]
    if ended:
        parts.append(f"{ended} of {rows} ended")
    seconds = max(0.0, batch.updated - batch.started)
    parts.append(f"{seconds:.0f} s into this batch")
    return " · ".join(parts)


def rows_frame(batch: LiveBatch) -> pd.DataFrame:
    """The batch as a table: #, what the row answers, the text so far (its end), tokens, scores."""
    records: list[dict[str, Any]] = []
    for index, row in enumerate(batch.rows):
        record: dict[str, Any] = {"#": index}
        if row.label:
            record["prompt"] = _clip_start(row.label, LABEL_CHARS)
        record["written so far"] = _clip_end(row.text, TAIL_CHARS)
        record["tokens"] = row.tokens
        for name, value in batch.scores(index).items():
            record[f"{name} so far" if name == "Mem" else name] = round(value, 3)
        record["ended"] = "yes" if row.done else ""
        records.append(record)
    return pd.DataFrame.from_records(records)


def render_live(batch: LiveBatch | None, search_losses: Sequence[Sequence[float]] | None) -> None:
    """The live panel: the batch being written, and a search's loss per step (if any)."""
    if search_losses:
        steps = pd.DataFrame(
            [(int(s), float(best), float(step)) for s, best, step in search_losses],
            columns=["step", "best loss", "step loss"],
        ).set_index("step")
        st.caption(
            md(f"Search: step {int(search_losses[-1][0])}, best loss {search_losses[-1][1]:.3f}")
        )
        st.line_chart(steps, height=160)
    if not streaming(batch):
        return
    assert batch is not None
    st.caption(md(headline(batch)))
    frame = rows_frame(batch)
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            "written so far": st.column_config.TextColumn(width="large"),
            "prompt": st.column_config.TextColumn(width="medium"),
            "Mem so far": st.column_config.NumberColumn(format="%.3f"),
            "LCS_P": st.column_config.NumberColumn(format="%.3f"),
        },
    )
    if "Mem so far" in frame:
        st.caption(
            "Mem so far: the text written until now against the true suffix, before the output "
            "window is applied; each candidate's own Mem and objective come when the batch ends."
        )


def _clip_end(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else "…" + flat[-(width - 1) :]


def _clip_start(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
