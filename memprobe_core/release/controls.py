"""Which of a run's membership figures its validity controls void, for the diff and the gate.

A labelled audit's report judges each row of its membership table with the validity controls
(docs/method.md §10, "Verdicts"): a blind baseline that tells the sets apart without the model,
fewer than ``SMALL_N`` texts a side, a flagged random-split control. A row they void is
*inconclusive*, not evidence either way. ``memprobe diff`` and ``memprobe gate`` show and check
the same AUROCs, so they must carry the same mark: :func:`voided_figures` asks the report itself
(:func:`~memprobe_core.report.build.report_for_run` and
:func:`~memprobe_core.membership.verdict.with_voided_by`) instead of restating its rules.
"""

from __future__ import annotations

from memprobe_core.membership.verdict import VOIDED_BY, with_voided_by
from memprobe_core.report.build import report_for_run
from memprobe_core.store import Store

# (signal, length) -> what voids that AUROC, as the report's table shows it.
Voided = dict[tuple[str, int], str]


def voided_figures(store: Store, run: int, *, resamples: int, seed: int) -> Voided:
    """The membership signals' AUROCs of ``run`` that its report voids, by (signal, length),
    with the control that voids each (``"blind baseline separates the sets"``); empty for an
    unlabelled run or one whose controls void nothing. The report is built with the same
    bootstrap settings, so ``memprobe report RUN --resamples N --ci-seed S`` shows the same."""
    report = report_for_run(store, run, resamples=resamples, seed=seed)
    if report.membership is None or report.membership.empty:
        return {}
    table = with_voided_by(report.membership, report.blind_baseline, report.random_split)
    signals = table[table["kind"] == "signal"]
    return {
        (str(score), int(length)): str(badge)
        for score, length, badge in zip(signals["score"], signals["length"], signals[VOIDED_BY])
        if badge
    }


def voided_text(voided: str, run: int) -> str:
    """``voided by run 3's validity control: blind baseline separates the sets``."""
    return f"voided by run {run}'s validity control: {voided}"
