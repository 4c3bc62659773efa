"""An extraction map's windows spread over Ray workers, a batch per task (docs/cluster.md).

Each worker actor loads the victim by the name the run records (with the load options given
here), tokenizes the stored document once, and scores the batches it is handed with the same
teacher-forced pass as the local map (:func:`memprobe_core.documents.extraction_map.score_windows`).
The driver keeps the store: it writes each batch's windows as the batch comes back, in whatever
order batches end, so a killed driver loses only the batches in flight and a resume redoes them
(:func:`memprobe_core.documents.map_run.run_map` with :func:`ray_scorer`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from memprobe_core.documents.extraction_map import WindowScore, front_ids, score_windows
from memprobe_core.documents.map_run import BatchScorer, PzSetting
from memprobe_core.documents.windows import Window
from memprobe_core.executors.ray import RayOptions, _connect, import_ray, worker_count


class MapWorker:
    """A Ray actor's state: the victim and the document's ids (loaded once per worker)."""

    def __init__(self, victim: str, load_options: dict[str, Any], text: str) -> None:
        from memprobe_core.models import load

        self.victim: Any = load(victim, **load_options)
        tok: Any = self.victim.tokenizer
        self.ids = list(tok.encode(text, add_special_tokens=False))
        self.front = front_ids(tok, text)

    def score(
        self, windows: list[dict[str, int]], pz: dict[str, Any]
    ) -> tuple[int, list[dict[str, Any]], float]:
        """The batch's first window index, its scores as stored records, and the seconds per
        window."""
        setting = PzSetting(**pz)
        began = time.perf_counter()
        scores = score_windows(
            self.victim.torch_model,
            self.ids,
            [Window(**w) for w in windows],
            front=self.front,
            scheme=setting.scheme,
            discover_p=setting.discover_p,
        )
        seconds = (time.perf_counter() - began) / len(windows)
        return windows[0]["index"], [dict(s.to_record()) for s in scores], seconds


def ray_scorer(
    options: RayOptions,
    *,
    victim: str,
    load_options: dict[str, Any],
    text: str,
    pz: PzSetting,
) -> BatchScorer:
    """A :data:`~memprobe_core.documents.map_run.BatchScorer` on Ray: one task per batch,
    as many workers as asked or as the cluster fits, batches handed to idle workers."""

    def score(
        batches: list[list[Window]],
    ) -> Iterator[tuple[list[Window], list[WindowScore], float]]:
        if not batches:
            return
        ray = import_ray()
        started_ray = _connect(ray, options)
        try:
            yield from _spread(ray, batches)
        finally:
            if started_ray:
                ray.shutdown()

    def _spread(
        ray: Any, batches: list[list[Window]]
    ) -> Iterator[tuple[list[Window], list[WindowScore], float]]:
        from ray.util import ActorPool

        count = worker_count(options, ray.cluster_resources(), len(batches))
        actor = ray.remote(num_cpus=options.cpus_per_worker, num_gpus=options.gpus_per_worker)(
            MapWorker
        )
        workers = [actor.remote(victim, load_options, text) for _ in range(count)]
        pool = ActorPool(workers)
        by_first = {batch[0].index: batch for batch in batches}
        pz_dict = asdict(pz)
        try:
            for first, records, seconds in pool.map_unordered(
                lambda worker, batch: worker.score.remote([_plain(w) for w in batch], pz_dict),
                batches,
            ):
                batch = by_first[first]
                scores = [
                    WindowScore.from_record(window.index, record)
                    for window, record in zip(batch, records)
                ]
                yield batch, scores, seconds
        finally:
            for worker in workers:
                ray.kill(worker)

    return score


def _plain(window: Window) -> dict[str, int]:
    return {
        "index": window.index,
        "start": window.start,
        "prefix_tokens": window.prefix_tokens,
        "suffix_tokens": window.suffix_tokens,
    }
