"""jobq.gather(): a job's children, run by other workers while it waits holding none, and
their results in order once every one has ended.

Built on what is there, no dependency mechanism of its own: the children are a batch
(batches.py) whose `then` job, Gathered, runs once each child has ended, however it ended,
and emits the event the parent waits for (events.py). The children and the step that
records their ids commit together (backends/gathering.py): a run that replays the step
finds the same children, and a crash before it commits leaves none behind. What the
children ended with is a step too, recorded once every one has ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ChildFailure, GatherFailed, StepRefused
from ..job import Job
from ..limits import concurrency_of, rate_of
from ..records import JobRecord, Status
from ..results import decode_result, encode_step
from ..retry import MAX_DELAY
from .batches import NOW
from .durable import Journal, opened
from .new_jobs import Options, new_jobs
from .running import running_on
from .suspending import SUSPENDED, Suspend

# A suspended parent's last error lists its children's ids up to so many, else the range.
SHOWN_IDS = 5
# A failed child's last error, as the parent's record keeps it, is at most so long.
ERROR_KEPT = 2000


class Gathered(Job):
    """The `then` job of a gather's children: wakes the parent that waits for them."""

    job_name = "jobq.gathered"
    untyped = True  # enqueued with its parent's type: it names no type of its own

    def __init__(self, key: str) -> None:
        self.key = key

    def handle(self) -> None:
        backend = running_on.get()
        assert backend is not None  # set by the frame around every attempt
        backend.emit_now(self.key, "null")


def gather(*jobs: Job, name: str | None = None) -> list[Any]:
    """From inside a job's handle(): enqueue `jobs` as its children, once (a step), and
    return their results in the order given once all have ended. Until then the job is
    suspended, holding no worker, and runs again from the top when the last child ends.
    Raises jobq.GatherFailed, carrying the failures and the others' results, when any
    child did not complete (failed, expired or was cancelled)."""
    current = opened("jobq.gather()")
    current.gathers += 1
    label = name if name is not None else f"jobq.gather-{current.gathers}"
    outcome = gathered(current, label, list(jobs))
    failures = [ChildFailure(*each) for each in outcome["failed"]]
    if failures:
        raise GatherFailed(failures, outcome["results"])
    return list(outcome["results"])


async def agather(*jobs: Job, name: str | None = None) -> list[Any]:
    """jobq.gather() for an `async def handle`: its statements are short, as astep()'s
    record is, and a wait suspends the attempt rather than awaiting anything."""
    return gather(*jobs, name=name)


def gathered(current: Journal, label: str, jobs: list[Job]) -> dict[str, Any]:
    """The children's outcome, recorded; or the attempt suspends until they have ended."""
    done, ids = current.replayed(label)
    if not done:
        ids = enqueued(current, label, jobs)
    done, outcome = current.replayed(f"{label}.ended")
    if done:
        return dict(outcome)
    claim, backend = current.claim, current.backend
    state = backend.hold_event(claim.id, claim.token, wake_key(claim.id, label))
    if state is None:
        current.lost = True
        raise StepRefused(current.refusal(label))
    if not state[0]:
        shown = ids if len(ids) <= SHOWN_IDS else f"[{ids[0]}, ..., {ids[-1]}]"
        message = f"{SUSPENDED}: waiting for {len(ids)} children {shown} (step {label!r})"
        raise Suspend(MAX_DELAY, message, event=True)
    return dict(current.record(f"{label}.ended", ended(current, ids, backend.children(ids))))


def wake_key(job_id: int, label: str) -> str:
    """The event a gather's `then` job emits for its parent."""
    return f"jobq.gather:{job_id}:{label}"


def enqueued(current: Journal, label: str, jobs: Sequence[Job]) -> list[int]:
    """Store the children and their `then` job, and record their ids, in one transaction."""
    if not jobs:
        raise ValueError("jobq.gather() takes one job or more, got none")
    for job in jobs:
        if isinstance(job, Job) and (concurrency_of(job) or rate_of(job)):
            raise ValueError(
                f"jobq.gather(): {type(job).job_name} has a concurrency or rate limit, which "
                "a child cannot have yet; enqueue it from a job of its own instead"
            )
    claim, codec = current.claim, current.codec
    children = new_jobs(codec, list(jobs), [None] * len(jobs), Options.of(None, NOW, None, 0))
    wake = Gathered(wake_key(claim.id, label))
    (then,) = new_jobs(codec, [wake], [None], Options.of(claim.type, NOW, None, 0))
    ids = current.backend.add_children(
        claim.id,
        claim.token,
        label,
        then,
        children,
        lambda ids: encode_step(codec, ids, label),
    )
    if ids is None:
        current.lost = True
        raise StepRefused(current.refusal(label))
    return ids


def ended(
    current: Journal, ids: Sequence[int], records: Sequence[JobRecord | None]
) -> dict[str, Any]:
    """Each child's result (None for one that did not complete), and the failures as
    (job id, status, last error); a child deleted meanwhile (by an operator) is "deleted"."""
    results: list[Any] = []
    failed: list[list[Any]] = []
    for job_id, record in zip(ids, records, strict=True):
        if record is None:
            results.append(None)
            failed.append([job_id, "deleted", ""])
            continue
        if record.status is Status.COMPLETED:
            results.append(decode_result(current.codec, record.result))
            continue
        results.append(None)
        error = (record.last_error or "")[-ERROR_KEPT:]
        failed.append([record.id, str(record.status), error])
    return {"results": results, "failed": failed}
