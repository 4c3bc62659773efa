"""The run store: one SQLite file that remembers every run, sample, scored candidate and result.

Layout (schema version in ``PRAGMA user_version``, upgraded by the ordered ``MIGRATIONS`` of
:mod:`memprobe_core.store.migrations`; result frames built by :mod:`memprobe_core.store.frames`):

- ``runs``: one row per probe, audit or comparison (kind, status, config and manifest as JSON).
- ``samples``: the snippets of a run (kept in full so a run resumes without its source file).
- ``units``: one row per (snippet, method, length) with its status, error, attempts, timings and
  the final ``AttackResult`` as JSON.
- ``candidates``: every scored candidate, written when it is scored, so a crash or a kill loses
  at most the candidate in flight.

Concurrency: SQLite in WAL mode, so readers never block the writer. Each thread gets its own
connection (sqlite3 connections must not be shared across threads). Writes take a process-wide
``threading.Lock`` and ``BEGIN IMMEDIATE`` (with a busy timeout for other processes), so there is
one writer at a time and a write transaction never has to be retried half-way.

One file, one ``-wal``: a store file with a second name (hard link) is refused, and once the file
gains one or its ``-wal`` / ``-shm`` are deleted while it is open, writes stop with a
``StoreError`` after saving what was committed (:mod:`memprobe_core.store.files`). Rows of an old
schema that an upgrade cannot read are quarantined, not lost (``Store.notices`` names them).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from typing import Any

import pandas as pd

from memprobe_core.attacks.events import (
    AttackEvent,
    CandidateScored,
    EventCallback,
    RoundFinished,
)
from memprobe_core.attacks.result import CLIPPED, AttackResult, Candidate
from memprobe_core.errors import UnknownRunError, UsageError
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import frames as store_frames
from memprobe_core.store.columns import RESULT_COLUMNS_SQL
from memprobe_core.store.connections import StoreFile
from memprobe_core.store.owner import blocking_owner, owner_is_dead
from memprobe_core.store.records import (
    RUN_KINDS,
    RUN_STATUSES,
    UNIT_STATUSES,
    CandidateRecord,
    RunRecord,
    UnitKey,
    UnitRecord,
)
from memprobe_core.store.rows import (
    RUN_LIST_SQL,
    candidate_dict,
    candidate_from_row,
    dumps,
    key_params,
    loads,
    result_columns,
    result_from_row,
    run_dict,
    unit_dict,
)

# Runs whose results frame a Store keeps (see Store.results_frame).
_RESULTS_MEMO_RUNS = 8
# A restarted unit forgets the result columns of an earlier attempt.
_CLEAR_RESULT = ", ".join(f"{column} = NULL" for column in RESULT_COLUMNS_SQL)

# The longest prompt, output or error text stored (characters). An endpoint that answers with a
# 200 MB completion must not grow the store by 200 MB a candidate (nor hit SQLite's size limit
# and leave the unit half-recorded): the text is cut here and the cut is recorded, as the
# candidate flag ``"clipped"`` and as ``manifest["clipped"]`` (the cut columns) of a unit.
# Scores are computed before storing, on the whole text.
MAX_STORED_TEXT = 64 * 1024
_CUT_MARK = " […truncated by memprobe]"


def clip_text(text: str | None, limit: int = MAX_STORED_TEXT) -> tuple[str | None, bool]:
    """``(text cut to at most `limit` characters, whether it was cut)``; a cut text ends in a mark."""
    if text is None or len(text) <= limit:
        return text, False
    return text[: limit - len(_CUT_MARK)] + _CUT_MARK, True


class Store(StoreFile):
    """A run store on one SQLite file (created and migrated on open).

    Args:
        path: the SQLite file (``memprobe_core.paths.default_store_path()`` by default); its folder
            is created.

    Raises:
        StoreError: the file is not a memprobe store, cannot be created, has more than one
            name (hard links), or was made by a newer memprobe (schema version above
            ``SCHEMA_VERSION``); from a write: its file gained a second name, was replaced, or
            had its ``-wal`` / ``-shm`` deleted while open (the message says what was saved).
    """

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- runs -------------------------------------------------------------------------------------
    def create_run(
        self,
        kind: str,
        *,
        config: dict[str, Any] | None = None,
        manifest: dict[str, Any] | None = None,
        title: str = "",
        status: str = "running",
        snippets: Iterable[Snippet] = (),
        units: Iterable[UnitKey] = (),
    ) -> int:
        """Add a run with its snippets and pending units, in one transaction, and return its id.

        One transaction: a process killed while a large audit is being created leaves no run
        at all, never a run with some or none of its units.

        Args:
            kind: ``probe``, ``audit``, ``compare`` or ``document`` (a document's extraction
                map or continuation: :mod:`memprobe_core.documents.map_run`).
            config: everything needed to redo or resume the run (methods, lengths, options,
                model names); stored as JSON.
            manifest: what identifies the run's setting (model ids, versions, scoring variant).
            title: free label shown in run lists.
            status: initial status (``running`` by default).
            snippets / units: the run's samples and pending units (see ``add_samples`` and
                ``add_units``).

        Raises:
            ValueError: an unknown kind or status, or two snippets with one id.
        """
        if kind not in RUN_KINDS:
            raise ValueError(f"run kind {kind!r} is unknown; use one of {RUN_KINDS}")
        self._check_status(status, RUN_STATUSES, "run")
        now = time.time()
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO runs (kind, title, status, created, updated, config, manifest) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (kind, title, status, now, now, dumps(config or {}), dumps(manifest or {})),
            )
            run_id = int(cursor.lastrowid or 0)  # always set after an INSERT
            self._insert_samples(conn, run_id, snippets)
            self._insert_units(conn, run_id, units)
            return run_id

    def set_run_status(self, run_id: int, status: str) -> None:
        """Set a run's status (``running``, ``finished``, ``interrupted``, ``failed``)."""
        self._check_status(status, RUN_STATUSES, "run")
        with self._write() as conn:
            self._touch(conn, run_id, status=status)

    def update_run(
        self,
        run_id: int,
        *,
        config: dict[str, Any] | None = None,
        manifest: dict[str, Any] | None = None,
        title: str | None = None,
    ) -> None:
        """Replace a run's config, manifest or title (only the ones given)."""
        with self._write() as conn:
            self._require_run(conn, run_id)
            if config is not None:
                conn.execute("UPDATE runs SET config = ? WHERE id = ?", (dumps(config), run_id))
            if manifest is not None:
                conn.execute("UPDATE runs SET manifest = ? WHERE id = ?", (dumps(manifest), run_id))
            if title is not None:
                conn.execute("UPDATE runs SET title = ? WHERE id = ?", (title, run_id))
            self._touch(conn, run_id)

    def claim_run(self, run_id: int, owner: dict[str, Any]) -> dict[str, Any] | None:
        """Make ``owner`` the run's owner and its status ``running``, unless another may hold it.

        One write transaction (SQLite's write lock, ``BEGIN IMMEDIATE``): the stored owner is
        read, checked and replaced with no other process able to claim in between, so of two
        processes resuming one run at the same moment exactly one gets it.

        A ``running`` run is held by its recorded owner while that owner may still be working
        (:func:`memprobe_core.store.owner.blocking_owner`: a live process of this host, or a
        process of another host that wrote to the run recently). A run in any other status, or
        whose owner is dead, is taken over.

        Returns:
            ``None`` when the run is now claimed by ``owner``; else the holder's owner record
            (nothing written).

        Raises:
            UnknownRunError: no run with that id.
        """
        with self._write() as conn:
            row = conn.execute(
                "SELECT status, manifest, updated FROM runs WHERE id = ?", (int(run_id),)
            ).fetchone()
            if row is None:
                raise UnknownRunError(
                    f"run {run_id} is not in store {self.path}; `memprobe runs` lists them"
                )
            manifest = loads(row["manifest"], {}) or {}
            if not isinstance(manifest, dict):
                manifest = {}
            current = manifest.get("owner")
            if row["status"] == "running" and isinstance(current, dict):
                holder = blocking_owner(current, last_active=row["updated"])
                if holder is not None:
                    return dict(holder)
            manifest["owner"] = dict(owner)
            conn.execute("UPDATE runs SET manifest = ? WHERE id = ?", (dumps(manifest), run_id))
            self._touch(conn, run_id, status="running")
            return None

    def get_run(self, run_id: int) -> RunRecord:
        """One run with its config, manifest and unit counts.

        Raises:
            KeyError: no run with that id (the message lists how to see the runs).
        """
        rows = self._read(RUN_LIST_SQL + " WHERE r.id = ? GROUP BY r.id", (int(run_id),))
        if not rows:
            raise UnknownRunError(
                f"run {run_id} is not in store {self.path}; `memprobe runs` lists them"
            )
        return _live_status(run_dict(rows[0]))

    def list_runs(self, *, kind: str | None = None, limit: int | None = None) -> list[RunRecord]:
        """Runs, newest first, each with unit counts (``units_total``, ``units_done``, ...)."""
        sql = RUN_LIST_SQL
        params: list[Any] = []
        if kind is not None:
            sql += " WHERE r.kind = ?"
            params.append(kind)
        sql += " GROUP BY r.id ORDER BY r.id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_live_status(run_dict(row)) for row in self._read(sql, params)]

    def resumable_audits(self, *, exclude: Iterable[int] = ()) -> list[RunRecord]:
        """Audits that stopped with units left to run (``interrupted``, or ``running`` with no
        live owner), newest first; ``exclude``: ids this process is running itself."""
        skip = set(exclude)
        return [
            r
            for r in self.list_runs(kind="audit")
            if r["status"] in ("interrupted", "running")
            and r["id"] not in skip
            and r.get("units_pending", 0) + r.get("units_running", 0) > 0
        ]

    def delete_run(self, run_id: int) -> None:
        """Remove a run and everything recorded for it."""
        with self._write() as conn:
            for table in ("candidates", "units", "samples"):
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    # --- samples and units ------------------------------------------------------------------------
    def add_samples(self, run_id: int, snippets: Iterable[Snippet]) -> int:
        """Record the snippets of a run (in order); returns how many were added.

        Raises:
            ValueError: two snippets share an id (ids must be unique within a run).
        """
        with self._write() as conn:
            self._require_run(conn, run_id)
            count = self._insert_samples(conn, run_id, snippets)
            self._touch(conn, run_id)
            return count

    def samples(self, run_id: int) -> list[Snippet]:
        """The snippets of a run, in the order they were added."""
        rows = self._read(
            "SELECT snippet_id, domain, text, source, label FROM samples WHERE run_id = ? "
            "ORDER BY position",
            (run_id,),
        )
        return [Snippet(id=r[0], domain=r[1], text=r[2], source=r[3], label=r[4]) for r in rows]

    def labels(self, run_id: int) -> dict[str, str | None]:
        """Each snippet's member / non-member label (``None``: unlabelled), without the texts."""
        rows = self._read("SELECT snippet_id, label FROM samples WHERE run_id = ?", (run_id,))
        return {r[0]: r[1] for r in rows}

    def add_units(self, run_id: int, units: Iterable[UnitKey]) -> int:
        """Add pending units (their order is the order the audit runs them); returns the count.

        A unit already present is left as it is, so adding twice is harmless.
        """
        with self._write() as conn:
            self._require_run(conn, run_id)
            added = self._insert_units(conn, run_id, units)
            self._touch(conn, run_id)
            return added

    def units(self, run_id: int, *, status: str | None = None) -> list[UnitRecord]:
        """Units of a run in run order: key fields, status, error, attempts, timings, result."""
        sql = "SELECT * FROM units WHERE run_id = ?"
        params: list[Any] = [run_id]
        if status is not None:
            self._check_status(status, UNIT_STATUSES, "unit")
            sql += " AND status = ?"
            params.append(status)
        rows = self._read(sql + " ORDER BY position", params)
        return [unit_dict(row) for row in rows]

    def unit_counts(self, run_id: int) -> dict[str, int]:
        """``{status: count}`` over the run's units (every status present, zero if none)."""
        counts = dict.fromkeys(UNIT_STATUSES, 0)
        for status, count in self._read(
            "SELECT status, COUNT(*) FROM units WHERE run_id = ? GROUP BY status", (run_id,)
        ):
            counts[status] = count
        return counts

    def mark_unit_running(self, run_id: int, unit: UnitKey) -> None:
        """Start (or restart) a unit: status ``running``, attempts + 1, partial candidates dropped.

        Dropping the candidates of an earlier, unfinished attempt means a resumed unit never
        counts a candidate twice.
        """
        with self._write() as conn:
            self._require_unit(conn, run_id, unit)
            conn.execute(
                "DELETE FROM candidates WHERE run_id = ? AND snippet_id = ? AND method = ? "
                "AND length = ?",
                (run_id, *key_params(unit)),
            )
            conn.execute(
                "UPDATE units SET status = 'running', attempts = attempts + 1, started = ?, "
                f"finished = NULL, seconds = NULL, error = NULL, {_CLEAR_RESULT} "
                "WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
                (time.time(), run_id, *key_params(unit)),
            )
            self._touch(conn, run_id)

    def reset_unit(self, run_id: int, unit: UnitKey, *, if_status: str | None = None) -> None:
        """Put a unit back to ``pending`` and drop its candidates (an attempt that did not end).

        Args:
            if_status: only when the unit has this status (checked in the same transaction, so
                an interrupt that lands just after a unit was committed cannot undo it).
        """
        with self._write() as conn:
            if if_status is not None:
                row = conn.execute(
                    "SELECT status FROM units WHERE run_id = ? AND snippet_id = ? AND method = ? "
                    "AND length = ?",
                    (run_id, *key_params(unit)),
                ).fetchone()
                if row is None or row[0] != if_status:
                    return
            conn.execute(
                "DELETE FROM candidates WHERE run_id = ? AND snippet_id = ? AND method = ? "
                "AND length = ?",
                (run_id, *key_params(unit)),
            )
            conn.execute(
                "UPDATE units SET status = 'pending', started = NULL, error = NULL "
                "WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
                (run_id, *key_params(unit)),
            )
            self._touch(conn, run_id)

    def record_candidate(self, run_id: int, unit: UnitKey, candidate: Candidate) -> None:
        """Write one scored candidate now (called as each one is scored)."""
        with self._write() as conn:
            self._insert_candidates(conn, run_id, unit, [candidate])
            self._touch(conn, run_id)  # `updated` doubles as a liveness sign in run lists

    def record_candidates(
        self, run_id: int, unit: UnitKey, candidates: Iterable[Candidate]
    ) -> None:
        """Write a unit's scored candidates in one transaction (a Ray worker's, at its end)."""
        with self._write() as conn:
            self._insert_candidates(conn, run_id, unit, candidates)
            self._touch(conn, run_id)

    def mark_round_best(self, run_id: int, unit: UnitKey, round_: int, index: int) -> None:
        """Flag the best candidate of a round (known only when the round ends)."""
        with self._write() as conn:
            conn.execute(
                "UPDATE candidates SET is_round_best = (idx = ?) WHERE run_id = ? AND "
                "snippet_id = ? AND method = ? AND length = ? AND round = ?",
                (index, run_id, *key_params(unit), round_),
            )

    def finish_unit(self, run_id: int, unit: UnitKey, result: AttackResult) -> None:
        """Store a unit's final result as ``done``.

        The result's scalars go into the unit's columns; its trace is already in ``candidates``
        (recorded as each candidate was scored), so it is not written a second time.
        """
        self._end_unit(run_id, unit, result, "done")

    def cancel_unit(self, run_id: int, unit: UnitKey, result: AttackResult) -> None:
        """Store the partial best of a unit the user cancelled, as ``cancelled``.

        It stays visible (Runs page, ``memprobe report``'s unit list) but is never counted as a
        finished unit in Table 1.
        """
        self._end_unit(run_id, unit, result, "cancelled")

    def _end_unit(self, run_id: int, unit: UnitKey, result: AttackResult, status: str) -> None:
        now = time.time()
        values = _clipped_result_columns(result)
        sets = ", ".join(f"{column} = ?" for column in values)
        with self._write() as conn:
            self._require_unit(conn, run_id, unit)
            conn.execute(
                f"UPDATE units SET status = ?, {sets}, error = NULL, finished = ?, "
                "seconds = ? - COALESCE(started, ?) "
                "WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
                (status, *values.values(), now, now, now, run_id, *key_params(unit)),
            )
            self._touch(conn, run_id)

    def append_finished_unit(
        self, run_id: int, snippet: Snippet, unit: UnitKey, result: AttackResult
    ) -> None:
        """Add a sample, its unit and the unit's result to a run, in ONE transaction.

        For runs whose units are not known in advance (a continuation's turns arrive one by one):
        a process killed at any moment leaves the turn wholly stored or not at all.

        Raises:
            ValueError: ``snippet.id`` is already a sample of the run.
        """
        now = time.time()
        values = _clipped_result_columns(result)
        sets = ", ".join(f"{column} = ?" for column in values)
        with self._write() as conn:
            self._require_run(conn, run_id)
            self._insert_samples(conn, run_id, [snippet])
            self._insert_units(conn, run_id, [unit])
            conn.execute(
                f"UPDATE units SET status = 'done', {sets}, error = NULL, attempts = 1, "
                "started = ?, finished = ?, seconds = ? "
                "WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
                (
                    *values.values(),
                    now - result.costs.wall_seconds,
                    now,
                    result.costs.wall_seconds,
                    run_id,
                    *key_params(unit),
                ),
            )
            self._touch(conn, run_id)

    def fail_unit(self, run_id: int, unit: UnitKey, error: str) -> None:
        """Record that a unit failed, with an error text a user can act on (cut past
        ``MAX_STORED_TEXT``)."""
        now = time.time()
        error = clip_text(error)[0] or ""
        with self._write() as conn:
            self._require_unit(conn, run_id, unit)
            conn.execute(
                "UPDATE units SET status = 'error', error = ?, finished = ?, "
                "seconds = ? - COALESCE(started, ?) "
                "WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
                (error, now, now, now, run_id, *key_params(unit)),
            )
            self._touch(conn, run_id)

    def result(self, run_id: int, unit: UnitKey) -> AttackResult | None:
        """The stored result of a finished (or cancelled) unit, trace included, or ``None``."""
        rows = self._read(
            "SELECT * FROM units WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
            (run_id, *key_params(unit)),
        )
        if not rows or rows[0]["status"] not in ("done", "cancelled"):
            return None
        trace = [candidate_from_row(c) for c in self.candidates(run_id, unit)]
        return result_from_row(unit_dict(rows[0]), trace)

    def candidates(
        self, run_id: int, unit: UnitKey | None = None, *, since_id: int = 0
    ) -> list[CandidateRecord]:
        """Candidates of a run (or of one unit), in scoring order.

        Args:
            since_id: only candidates with a row id above this (a live view polls with the last
                id it has seen).
        """
        sql = "SELECT * FROM candidates WHERE run_id = ? AND id > ?"
        params: list[Any] = [run_id, since_id]
        if unit is not None:
            sql += " AND snippet_id = ? AND method = ? AND length = ?"
            params.extend(key_params(unit))
        return [candidate_dict(r) for r in self._read(sql + " ORDER BY id", params)]

    def recorder(self, run_id: int, unit: UnitKey) -> EventCallback:
        """An event callback that writes each ``candidate_scored`` event into the store.

        ``round_finished`` events flag the round's best candidate. Other events are ignored, so
        the callback can be chained with a UI's own.
        """

        def on_event(event: AttackEvent) -> None:
            if isinstance(event, CandidateScored):
                self.record_candidate(run_id, unit, event.candidate)
            elif isinstance(event, RoundFinished):
                self.mark_round_best(run_id, unit, event.best.round, event.best.index)

        return on_event

    # --- frames (built by memprobe_core.store.frames) -----------------------------------------
    def results_frame(self, run_id: int, *, cancelled: bool = False) -> pd.DataFrame:
        """One row per finished unit; see :func:`memprobe_core.store.frames.results_frame`.

        ``cancelled``: the partial bests of units the user cancelled too (status ``cancelled``;
        the Compare page shows them, a report never counts them).

        Kept per run until the run changes (its ``updated`` time): the chance level of Mem scores
        every output against its group's other suffixes (about 5 s for 1,000 units of one domain
        and length), and a dashboard page asks for the same frame on every redraw.
        """
        run = self.get_run(run_id)
        memo: dict[tuple[int, bool], tuple[float, pd.DataFrame]] = self.__dict__.setdefault(
            "_results_memo", {}
        )
        kept = memo.get((run_id, cancelled))
        if kept is not None and kept[0] == run["updated"]:
            return kept[1].copy()
        units = self.units(run_id, status="done")
        if cancelled:
            units += self.units(run_id, status="cancelled")
        frame = store_frames.results_frame(
            units, run["config"], self.labels(run_id), self._scored_outputs(run_id, units)
        )
        if len(memo) >= _RESULTS_MEMO_RUNS:
            memo.pop(next(iter(memo)))
        memo[(run_id, cancelled)] = (run["updated"], frame)
        return frame.copy()

    def unit_timings(self, methods: Iterable[str], *, limit: int = 200) -> list[dict[str, Any]]:
        """The newest finished units of ``methods`` with their cost: ``method``, ``length``,
        ``seconds``, ``candidates`` (scored) and the run's ``victim`` name — what a cost
        estimate before a run reads (``memprobe_core.runs.eta.prior_estimate``)."""
        names = sorted(set(methods))
        if not names:
            return []
        marks = ", ".join("?" for _ in names)
        rows = self._read(
            "SELECT u.method, u.length, u.seconds, r.config, (SELECT COUNT(*) FROM candidates c "
            "WHERE c.run_id = u.run_id AND c.snippet_id = u.snippet_id AND c.method = u.method "
            "AND c.length = u.length) AS candidates FROM units u JOIN runs r ON r.id = u.run_id "
            f"WHERE u.status = 'done' AND u.seconds > 0 AND u.method IN ({marks}) "
            "ORDER BY u.finished DESC LIMIT ?",
            (*names, int(limit)),
        )
        out = []
        for row in rows:
            config = loads(row["config"], {})
            out.append(
                {
                    "method": row["method"],
                    "length": int(row["length"]),
                    "seconds": float(row["seconds"]),
                    "candidates": int(row["candidates"]),
                    "victim": (config.get("models") or {}).get("victim"),
                }
            )
        return out

    def _scored_outputs(
        self, run_id: int, units: list[UnitRecord]
    ) -> dict[tuple[str, str, int], str]:
        """The scored part of each unit's output where the output window cut it (its chosen
        candidate's ``extra["scored_output"]``), which the chance level scores again."""
        rows = self._read(
            "SELECT snippet_id, method, length, prompt, output, mem, extra FROM candidates "
            "WHERE run_id = ? AND extra LIKE ? ORDER BY id",
            (run_id, '%"scored_output"%'),
        )
        if not rows:  # the `first` window (the default) never cuts: no such candidate
            return {}
        by_key = {(u["snippet_id"], u["method"], int(u["length"])): u for u in units}
        out: dict[tuple[str, str, int], str] = {}
        for row in rows:
            key = (row["snippet_id"], row["method"], int(row["length"]))
            unit = by_key.get(key)
            # The chosen candidate: the unit's prompt, output and Mem are its (a duplicate
            # prompt's candidate reuses the same answer, so any match has the same window).
            if unit is None or key in out:
                continue
            chosen = (unit["prompt"], unit["output"], unit["mem"])
            if (row["prompt"], row["output"], row["mem"]) != chosen:
                continue
            scored = loads(row["extra"], {}).get("scored_output")
            if isinstance(scored, str):
                out[key] = scored
        return out

    def errors_frame(self, run_id: int) -> pd.DataFrame:
        """One row per failed unit: snippet_id, method, length, attempts, error."""
        return store_frames.errors_frame(self.units(run_id, status="error"))

    def candidates_frame(self, run_id: int, unit: UnitKey | None = None) -> pd.DataFrame:
        """Every stored candidate of a run (or one unit) as a DataFrame, in scoring order."""
        return store_frames.candidates_frame(self.candidates(run_id, unit))

    # --- helpers ----------------------------------------------------------------------------------
    @staticmethod
    def _insert_samples(conn: sqlite3.Connection, run_id: int, snippets: Iterable[Snippet]) -> int:
        start = conn.execute(
            "SELECT COALESCE(MAX(position) + 1, 0) FROM samples WHERE run_id = ?", (run_id,)
        ).fetchone()[0]
        count = 0
        for offset, snippet in enumerate(snippets):
            try:
                conn.execute(
                    "INSERT INTO samples (run_id, snippet_id, position, domain, text, source, "
                    "label) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        run_id,
                        snippet.id,
                        start + offset,
                        snippet.domain,
                        snippet.text,
                        snippet.source,
                        snippet.label,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise ValueError(
                    f"snippet id {snippet.id!r} appears twice in run {run_id}; give every "
                    "snippet a unique id"
                ) from exc
            count += 1
        return count

    @staticmethod
    def _insert_units(conn: sqlite3.Connection, run_id: int, units: Iterable[UnitKey]) -> int:
        start = conn.execute(
            "SELECT COALESCE(MAX(position) + 1, 0) FROM units WHERE run_id = ?", (run_id,)
        ).fetchone()[0]
        added = 0
        for unit in units:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO units (run_id, snippet_id, method, length, position) "
                "VALUES (?, ?, ?, ?, ?)",
                (run_id, unit.snippet_id, unit.method, int(unit.length), start + added),
            )
            added += cursor.rowcount
        return added

    def _insert_candidates(
        self, conn: sqlite3.Connection, run_id: int, unit: UnitKey, candidates: Iterable[Candidate]
    ) -> None:
        now = time.time()
        rows = []
        for c in candidates:
            (prompt, cut_prompt), (output, cut_output) = clip_text(c.prompt), clip_text(c.output)
            flags = list(c.flags)
            if (cut_prompt or cut_output) and CLIPPED not in flags:
                flags.append(CLIPPED)
            rows.append(
                (
                    run_id,
                    *key_params(unit),
                    c.round,
                    c.index,
                    prompt,
                    output,
                    c.mem,
                    c.lcs_p,
                    c.objective,
                    dumps(flags),
                    int(c.is_round_best),
                    dumps(c.extra),
                    now,
                )
            )
        conn.executemany(
            "INSERT INTO candidates (run_id, snippet_id, method, length, round, idx, prompt, "
            "output, mem, lcs_p, objective, flags, is_round_best, extra, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def _touch(self, conn: sqlite3.Connection, run_id: int, status: str | None = None) -> None:
        if status is None:
            conn.execute("UPDATE runs SET updated = ? WHERE id = ?", (time.time(), run_id))
        else:
            cursor = conn.execute(
                "UPDATE runs SET updated = ?, status = ? WHERE id = ?",
                (time.time(), status, run_id),
            )
            if cursor.rowcount == 0:
                raise UnknownRunError(
                    f"run {run_id} is not in store {self.path}; `memprobe runs` lists them"
                )

    def _require_run(self, conn: sqlite3.Connection, run_id: int) -> None:
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise UnknownRunError(
                f"run {run_id} is not in store {self.path}; `memprobe runs` lists them"
            )

    def _require_unit(self, conn: sqlite3.Connection, run_id: int, unit: UnitKey) -> None:
        row = conn.execute(
            "SELECT 1 FROM units WHERE run_id = ? AND snippet_id = ? AND method = ? AND length = ?",
            (run_id, *key_params(unit)),
        ).fetchone()
        if row is None:
            raise UsageError(
                f"unit {unit} is not part of run {run_id}; add it with add_units first"
            )

    @staticmethod
    def _check_status(status: str, allowed: tuple[str, ...], what: str) -> None:
        if status not in allowed:
            raise ValueError(f"{what} status {status!r} is unknown; use one of {allowed}")


def _live_status(run: RunRecord) -> RunRecord:
    """A ``running`` run whose owner process died on this host reads as ``interrupted``.

    Computed on read (nothing is written): a SIGKILLed probe or audit cannot mark its own run,
    and a read-only store must show the truth too. ``resume`` still redoes its unit in flight.
    """
    if run.get("status") == "running" and owner_is_dead((run.get("manifest") or {}).get("owner")):
        run["status"] = "interrupted"
    return run


def _clipped_result_columns(result: AttackResult) -> dict[str, Any]:
    """A unit's result columns with its prompt and output cut to ``MAX_STORED_TEXT``.

    The cut columns are listed under ``clipped`` in the unit's manifest column, so a report
    can tell a cut output from a short one.
    """
    values = result_columns(result)
    cut = []
    for column in ("prompt", "output"):
        values[column], was_cut = clip_text(values[column])
        if was_cut:
            cut.append(column)
    if cut:
        values["manifest"] = dumps({**(result.manifest or {}), CLIPPED: cut})
    return values
