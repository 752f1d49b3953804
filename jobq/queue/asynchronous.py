"""AsyncQueue: the producer's and operator's side of the Queue for asyncio apps (FastAPI,
aiohttp), on an async driver's connection.

Nothing here is the sync Queue written again. enqueue() and enqueue_many() are Producing's,
shared with Queue; every other operation is made of the statements the backends and
controls.py yield (backends/steps.py), the same ones Queue runs, here awaited on the driver.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from .. import backends, tracing
from ..backends.asynchronous import AsyncDriver
from ..backends.limits import Declared
from ..backends.rows import NewJob
from ..backends.steps import Steps, listed
from ..codec import Codec, JsonCodec
from ..dsn import default_dsn
from ..job import Job
from ..records import Horizon, JobRecord, Status
from . import async_waiting, controls
from .events import checked_key, encoded_payload
from .limits import undeclared
from .new_jobs import traced
from .nodes import SILENT_AFTER, NodeRecord, check_silent_after, node_record
from .operating import by_type, check_minutes, decoded, per_minute, totals
from .producing import OWN_CONNECTION, Producing, application_connection

T = TypeVar("T")


class AsyncQueue(Producing[Awaitable[int], Awaitable[list[int]]]):
    """A job queue in one database, for coroutines: enqueue, read and control jobs.

    Its methods take the arguments Queue's take, check them alike and raise the same errors
    (enqueue and enqueue_many as soon as they are called, before any await). Tasks may
    share one AsyncQueue: its operations on its own connection run one at a time. Workers
    are jobq-supervise's, as for Queue.
    """

    def __init__(self, driver: AsyncDriver, *, codec: Codec | None = None) -> None:
        self.driver = driver
        self.backend = driver.backend
        self.codec: Codec = codec or JsonCodec()
        # The limits this queue has declared, and those its next write declares first.
        self._declared: set[Declared] = set()
        self._declaring: list[Declared] = []

    @classmethod
    async def connect(cls, dsn: str | None = None, codec: Codec | None = None) -> AsyncQueue:
        """Open a queue on a connection of its own; dsn defaults to JOBQ_DSN, then
        ./jobq.sqlite3. Needs the database's async driver (see the async-* extras)."""
        return cls(await backends.connect_async(dsn or default_dsn()), codec=codec)

    async def close(self) -> None:
        await self.driver.close()

    async def __aenter__(self) -> AsyncQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- producing (enqueue and enqueue_many are Producing's) ----------------------------

    def _declare_limits(self, jobs: Sequence[Job], rows: Sequence[NewJob]) -> None:
        # Called just before _add or _add_many, with no await between: they take these.
        self._declaring = undeclared(jobs, rows, self._declared)

    def _add(self, row: NewJob, connection: Any, parents: tuple[int, ...]) -> Awaitable[int]:
        return self._add_declared(row, connection, parents, self._take_declaring())

    def _add_many(
        self, rows: list[NewJob], connection: Any, parents: tuple[int, ...]
    ) -> Awaitable[list[int]]:
        return self._add_many_declared(rows, connection, parents, self._take_declaring())

    def _take_declaring(self) -> list[Declared]:
        declaring, self._declaring = self._declaring, []
        return declaring

    async def _declare(self, declaring: list[Declared]) -> None:
        """Record the limits before the rows, on the queue's own connection, as Queue does:
        a limited job is never claimable before its limit is known."""
        if declaring:
            await self._run("declare_limits", lambda: self.backend.declare_limits_steps(declaring))
            self._declared.update(declaring)

    async def _add_declared(
        self, row: NewJob, connection: Any, parents: tuple[int, ...], declaring: list[Declared]
    ) -> int:
        if parents:
            (job_id,) = await self._add_many_declared([row], connection, parents, declaring)
            return job_id
        await self._declare(declaring)
        add = self.backend.add_steps
        (job_id,) = await self._publish(
            "enqueue", connection, [row], lambda job: listed(add(job[0])), False
        )
        return job_id

    async def _add_many_declared(
        self,
        rows: list[NewJob],
        connection: Any,
        parents: tuple[int, ...],
        declaring: list[Declared],
    ) -> list[int]:
        await self._declare(declaring)
        if not rows:
            return []
        if parents:
            after = self.backend.add_after_steps
            return await self._publish(
                "enqueue", connection, rows, lambda jobs: after(jobs, parents)
            )
        return await self._publish("enqueue_many", connection, rows, self.backend.add_many_steps)

    async def _publish(
        self,
        what: str,
        connection: Any,
        rows: list[NewJob],
        add: Callable[[list[NewJob]], Steps[list[int]]],
        together: bool = True,
    ) -> list[int]:
        """Queue._publish(), awaited: the span is current in the awaiting task until the rows
        are stored."""
        with tracing.publishing(rows) as publication:
            stored = traced(rows, publication.context)
            ids = await self._write(what, connection, lambda: add(stored), together)
            publication.stored(ids)
            return ids

    async def _write(
        self, what: str, connection: Any, steps: Callable[[], Steps[T]], together: bool
    ) -> T:
        """Queue._write's rules: on the application's connection, in its transaction and
        never retried (its error reaches the caller as the driver raised it); else on the
        queue's own, `together` in one transaction, rerun on a transient error."""
        target = application_connection(connection)
        if target is None:
            return await self.driver.own(what, steps, together)
        if together:
            return await self.driver.run_together(steps(), target)
        return await self.driver.run(steps(), target)

    async def emit(self, key: str, payload: Any = None, connection: Any = OWN_CONNECTION) -> bool:
        """As Queue.emit(), awaited: the first emit of a key wins; with `connection`, in the
        application's transaction."""
        text = encoded_payload(payload)
        checked_key(key)
        return await self._write(
            "emit", connection, lambda: self.backend.emit_steps(key, text), together=True
        )

    # -- reading and operating: as Queue's (operating.py), each awaited ------------------

    async def _run(self, what: str, steps: Callable[[], Steps[T]]) -> T:
        return await self.driver.own(what, steps)

    async def get(self, job_id: int) -> JobRecord | None:
        record = await self._run("get", lambda: self.backend.get_steps(job_id))
        return None if record is None else decoded(self.codec, record)

    async def jobs(
        self,
        status: Status | str | None = None,
        type: str | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[JobRecord]:
        """As Queue.jobs()."""
        records = await self._run(
            "jobs", lambda: controls.jobs_steps(self.backend, status, type, limit, before_id)
        )
        return [decoded(self.codec, record) for record in records]

    async def cancel(self, job_id: int) -> bool:
        """As Queue.cancel()."""
        return await self._run("cancel", lambda: controls.cancel_steps(self.backend, job_id))

    async def retry(self, job_id: int) -> bool:
        """As Queue.retry()."""
        return await self.driver.own(
            "retry", lambda: controls.retry_steps(self.backend, job_id), together=True
        )

    async def unique_holder(self, key: str) -> int | None:
        return await self._run("unique_holder", lambda: self.backend.unique_holder_steps(key))

    async def pause(self, type: str) -> bool:
        """As Queue.pause()."""
        return await self._run("pause", lambda: controls.pause_steps(self.backend, type))

    async def resume(self, type: str) -> bool:
        """As Queue.resume()."""
        return await self._run("resume", lambda: controls.resume_steps(self.backend, type))

    async def knows_type(self, type: str) -> bool:
        """As Queue.knows_type()."""
        return await self._run("knows_type", lambda: controls.knows_type_steps(self.backend, type))

    async def paused(self) -> set[str]:
        return await self._run("paused", self.backend.paused_steps)

    async def nodes(self, silent_after: float = SILENT_AFTER) -> list[NodeRecord]:
        """As Queue.nodes()."""
        threshold = check_silent_after(silent_after)
        rows = await self._run("nodes", self.backend.nodes_steps)
        return [node_record(row, threshold) for row in rows]

    async def counts(self, type: str | None = None) -> dict[str, int]:
        """As Queue.counts()."""
        return totals(await self._run("counts", lambda: self.backend.counts_steps(type)))

    async def counts_by_type(self) -> dict[str, dict[str, int]]:
        return by_type(await self._run("counts", lambda: self.backend.counts_steps(None)))

    async def oldest_ready(self) -> dict[str, float]:
        return await self._run("oldest_ready", self.backend.oldest_ready_steps)

    async def horizon(self) -> Horizon:
        """As Queue.horizon()."""
        return await self._run("horizon", self.backend.horizon_steps)

    async def completions_per_minute(self, minutes: int = 60) -> list[int]:
        """As Queue.completions_per_minute()."""
        check_minutes(minutes)
        by_age = await self._run("completions", lambda: self.backend.completions_steps(minutes))
        return per_minute(by_age, minutes)

    async def recent_counts_by_type(self, minutes: int = 60) -> dict[str, dict[str, int]]:
        """As Queue.recent_counts_by_type()."""
        check_minutes(minutes)
        counts = await self._run("counts", lambda: self.backend.recent_counts_steps(minutes))
        return by_type(counts)

    async def wait(self, job_id: int, timeout: float | None = None) -> JobRecord:
        """Until the job has finished (completed, failed, expired or cancelled): its record.
        TimeoutError after `timeout` seconds (None: no limit); LookupError for an unknown id.
        Woken by PostgreSQL's NOTIFY where it tells; elsewhere it polls, backing off."""
        return await async_waiting.wait(self.get, self.driver, job_id, timeout)
