"""What an operator and the supervisor's metrics read of the queue, and the controls over
its jobs (the rules are in controls.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from ..backends.base import Backend
from ..backends.search import Found
from ..codec import Codec
from ..records import Horizon, JobFilter, JobRecord, Status
from ..results import decode_result
from . import controls, search
from .nodes import SILENT_AFTER, NodeRecord, check_silent_after, node_record

MINUTES_A_DAY = 24 * 60
WEEK = 7 * MINUTES_A_DAY
# Ids in one statement of delete_ended, a bound like prune's batches (PRUNE_BATCH).
BULK_BATCH = 500


def check_minutes(minutes: object) -> int:
    """A window of the status page's figures: whole minutes, up to a day."""
    if (
        isinstance(minutes, bool)
        or not isinstance(minutes, int)
        or not 0 < minutes <= MINUTES_A_DAY
    ):
        raise ValueError(f"minutes must be a whole number from 1 to 1440, got {minutes!r}")
    return minutes


def totals(counts: dict[tuple[str, Status], int]) -> dict[str, int]:
    """{status: number of jobs} from the backend's counts by (type, status)."""
    found: dict[str, int] = {}
    for (_, status), n in counts.items():
        found[str(status)] = found.get(str(status), 0) + n
    return found


def per_minute(by_age: dict[int, int], minutes: int) -> list[int]:
    """The backend's completions by minutes ago as a list, oldest first."""
    return [by_age.get(ago, 0) for ago in reversed(range(minutes))]


def by_type(counts: dict[tuple[str, Status], int]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for (name, status), n in counts.items():
        table.setdefault(name, {})[str(status)] = n
    return table


def decoded(codec: Codec, record: JobRecord) -> JobRecord:
    """The record with its result decoded by the queue's codec (the backend reads it as
    stored), for Queue and AsyncQueue alike; a result the codec cannot decode stays the text
    it is."""
    if record.result is None:
        return record
    try:
        result = decode_result(codec, record.result)
    except Exception:
        return record
    return dataclasses.replace(record, result=result)


class Operating:
    """The Queue's inspecting and operating side: each call reads or changes jobs through
    the backend."""

    backend: Backend
    codec: Codec

    def _depth(self) -> dict[tuple[str, str], int]:
        """{(type, status): number of jobs}, for the supervisor's metrics, where a job a
        prefetching worker claimed and has not started counts as `claimed`, not in progress:
        it is not running yet."""
        depth = {(name, str(status)): n for (name, status), n in self.backend.counts(None).items()}
        for name, n in self.backend.claimed_unstarted().items():
            key = (name, str(Status.IN_PROGRESS))
            # Read a moment after the counts: some may have started or ended in between.
            n = min(n, depth.get(key, 0))
            depth[key] = depth.get(key, 0) - n
            depth[(name, "claimed")] = n
        return depth

    def get(self, job_id: int) -> JobRecord | None:
        record = self.backend.get(job_id)
        return None if record is None else decoded(self.codec, record)

    # -- operating (the rules are in controls.py) ---------------------------------------------

    def jobs(
        self,
        status: Status | str | None = None,
        type: str | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[JobRecord]:
        """Jobs newest first, of one status and type if given; the next page starts below
        the last id of this one (before_id)."""
        return [
            decoded(self.codec, record)
            for record in controls.jobs(self.backend, status, type, limit, before_id)
        ]

    def search(self, wanted: JobFilter, limit: int = 100, before_id: int | None = None) -> Found:
        """Jobs that match `wanted`, newest first, from one window of ids below before_id
        (backends/search.py): a page may hold fewer than `limit` and still have a next one,
        which starts below Found.following (None: no job is left below)."""
        found = self.backend.run(search.search_steps(self.backend, wanted, limit, before_id))
        return found._replace(records=[decoded(self.codec, each) for each in found.records])

    def retry_many(self, ids: Sequence[int]) -> set[int]:
        """retry() each of these jobs, in one transaction (give a bounded batch); the ids of
        those retried."""
        return controls.retry_many(self.backend, ids)

    def cancel_many(self, ids: Sequence[int]) -> set[int]:
        """cancel() each of these jobs, in one transaction (give a bounded batch); the ids
        of those cancelled."""
        return controls.cancel_many(self.backend, ids)

    def delete_ended(self, ids: Iterable[int]) -> int:
        """Delete the jobs of these ids that have ended (completed, failed, expired or
        cancelled), but none another job still needs, as prune() keeps them; how many it
        deleted. An id that is no job's is passed over. BULK_BATCH ids a statement."""
        wanted = [job_id for job_id in ids if controls.is_id(job_id)]
        return sum(
            self.backend.delete_ended(wanted[start : start + BULK_BATCH])
            for start in range(0, len(wanted), BULK_BATCH)
        )

    def cancel(self, job_id: int) -> bool:
        """Cancel a pending job at once; a job in progress has its attempt stopped and ends
        cancelled (see the README). False for an unknown id or a finished job."""
        return controls.cancel(self.backend, job_id)

    def retry(self, job_id: int) -> bool:
        """Make a failed, expired or cancelled job pending now, with one more attempt
        allowed; a job enqueued after others waits again for those not yet completed (a
        batch's `then` job, for the members not yet ended). False for an unknown id, another
        status, a deadline that has passed, a parent that ended badly (retry that one: it
        brings its dependents back), or a unique_key that another active job holds now
        (controls.why_not_retried says which)."""
        return controls.retry(self.backend, job_id)

    def unique_holder(self, key: str) -> int | None:
        """The id of the pending or in-progress job that holds this unique key, if any."""
        return self.backend.unique_holder(key, None)

    def pause(self, type: str) -> bool:
        """No worker claims jobs of this type until resume(); running ones finish. False if
        it was paused already. Any valid name is paused, one no job has yet too: knows_type()
        tells whether the name is known."""
        return controls.pause(self.backend, type)

    def resume(self, type: str) -> bool:
        """Let workers claim this type again, waking idle ones; False if it was not paused."""
        return controls.resume(self.backend, type)

    def knows_type(self, type: str) -> bool:
        """Whether a job of this type exists, in any status, a Job class imported in this
        process declares it, or it is paused; one index probe per status."""
        return controls.knows_type(self.backend, type)

    def paused(self) -> set[str]:
        return self.backend.paused()

    def nodes(self, silent_after: float = SILENT_AFTER) -> list[NodeRecord]:
        """The supervisors that wrote a heartbeat within the last hour, each silent once its
        last is older than `silent_after` seconds (by the database's clock)."""
        threshold = check_silent_after(silent_after)
        return [node_record(row, threshold) for row in self.backend.nodes()]

    def _beat(
        self, node: str, host: str, pid: int, version: str, facts: str, retention: float
    ) -> None:
        """A supervisor's heartbeat, written by its housekeeper (supervisor/heartbeat.py)."""
        self.backend.beat(node, host, pid, version, facts, retention)

    def counts(self, type: str | None = None) -> dict[str, int]:
        """{status: number of jobs}, of one type or of all."""
        return totals(self.backend.counts(type))

    def oldest_ready(self) -> dict[str, float]:
        """{type: seconds the oldest ready job of that type has been waiting}."""
        return self.backend.oldest_ready()

    def horizon(self) -> Horizon:
        """What holds back the database's cleanup of dead rows (see Horizon), which every
        claim pays for while it lasts."""
        return self.backend.horizon()

    def completions_per_minute(self, minutes: int = 60) -> list[int]:
        """Jobs completed in each of the last `minutes` minutes by the database's clock,
        oldest first: the last entry is the minute now ending."""
        return per_minute(self.backend.completions(check_minutes(minutes)), minutes)

    def endings_by_type(self, minutes: int, buckets: int) -> dict[str, dict[str, list[int]]]:
        """{type: {"completed": counts, "failed": counts}} over the last `minutes`, in
        `buckets` equal spans, oldest first (the last is the span now ending); failed
        counts the expired too. Reads the finished_at index's range, as the overview's other
        figures do."""
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 0 < minutes <= WEEK:
            raise ValueError(f"minutes must be a whole number from 1 to {WEEK}, got {minutes!r}")
        if not 0 < buckets <= minutes * 60:
            raise ValueError(f"buckets must be from 1 to {minutes * 60}, got {buckets!r}")
        size = minutes * 60 // buckets
        found: dict[str, dict[str, list[int]]] = {}
        for (name, status, ago), n in self.backend.endings(minutes, size).items():
            kind = {Status.COMPLETED: "completed", Status.FAILED: "failed"}.get(status)
            kind = "failed" if status is Status.EXPIRED else kind
            if kind is None or not 0 <= ago < buckets:
                continue
            row = found.setdefault(name, {"completed": [0] * buckets, "failed": [0] * buckets})
            row[kind][buckets - 1 - ago] += n
        return found

    def recent_counts_by_type(self, minutes: int = 60) -> dict[str, dict[str, int]]:
        """{type: {status: number of jobs}}: every pending and in_progress job, and of the
        finished ones those that finished in the last `minutes` minutes. Unlike
        counts_by_type(), it reads indexes only, so it stays quick on a table of millions."""
        return by_type(self.backend.recent_counts(check_minutes(minutes)))

    def counts_by_type(self) -> dict[str, dict[str, int]]:
        """{type: {status: number of jobs}}."""
        return by_type(self.backend.counts(None))
