"""A concurrent worker's attempts in flight, keyed by token, and the work they hand to threads,
in process: no worker is forked, no database is opened."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import replace

from jobq.worker.concurrent.handoff import HandOff
from jobq.worker.concurrent.inflight import CURRENT, Attempt, InFlight
from jobq.worker.fence import FenceTable
from tests.support.claims import claim

# Bounds every wait of these tests.
WAIT = 10.0


def attempt_of(job_id: int, attempt: int = 1) -> Attempt:
    row = FenceTable(1).allocate()
    assert row is not None
    return Attempt(replace(claim(job_id), token=f"token-{job_id}-{attempt}", attempt=attempt), row)


def test_a_stop_names_its_attempt_by_token_and_is_dropped_once_it_has_ended() -> None:
    async def scenario() -> None:
        inflight = InFlight()
        first = attempt_of(7)
        inflight.add(first)
        first.outcome = asyncio.get_running_loop().create_future()  # its code has ended
        inflight.remove(first)
        retry = attempt_of(7, attempt=2)
        inflight.add(retry)
        retry.task = asyncio.current_task()
        # The first attempt's stop, late: it finds the job's retry, by job id only.
        assert inflight.stop(first.token, "Job timed out") is None
        assert retry.stop is None
        assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]
        # An attempt whose code is done, waiting for its outcome: nothing left to stop.
        retry.outcome = asyncio.get_running_loop().create_future()
        assert inflight.stop(retry.token, "Job timed out") is None
        assert retry.stop is None

    asyncio.run(scenario())


def test_a_stopped_coroutine_is_cancelled_and_its_unstarted_thread_work_never_starts() -> None:
    async def scenario() -> None:
        inflight = InFlight()
        running = attempt_of(8)
        inflight.add(running)
        gate = threading.Event()
        ran: list[str] = []
        pool = HandOff(inflight, 1, "test-handoff")
        loop = asyncio.get_running_loop()
        loop.set_default_executor(pool)

        async def code() -> None:
            CURRENT.set(running)
            first = loop.run_in_executor(None, gate.wait, WAIT)
            await asyncio.gather(first, asyncio.to_thread(ran.append, "queued"))

        running.task = asyncio.create_task(code())
        # It hands both pieces over; the one thread takes the first.
        deadline = loop.time() + WAIT
        while len(running.handed) < 2:
            assert loop.time() < deadline, "the attempt handed its work over"
            await asyncio.sleep(0.01)
        assert inflight.stop(running.token, "Cancelled while it ran") is running
        assert running.stop == "Cancelled while it ran"
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(running.task, WAIT)
        # The thread work that had started is still the attempt's until it returns.
        assert len([work for work in running.handed if not work.done()]) == 1
        gate.set()
        await asyncio.wait_for(running.handed_work_ended(), WAIT)
        assert ran == [], "the work queued behind it was cancelled before it started"
        pool.shutdown()

    asyncio.run(scenario())


def test_work_handed_off_outside_any_attempt_belongs_to_none() -> None:
    inflight = InFlight()
    pool = HandOff(inflight, 1, "test-handoff")
    try:
        assert pool.submit(CURRENT.get).result(WAIT) is None
        running = attempt_of(9)
        token = CURRENT.set(running)
        try:
            work = pool.submit(CURRENT.get)
        finally:
            CURRENT.reset(token)
        assert work.result(WAIT) is running
    finally:
        pool.shutdown()
