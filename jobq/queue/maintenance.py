"""Maintenance: attempts whose lease ended are settled by their job's retry policy, pending
jobs past their deadline expire, and finished jobs are pruned in bounded batches."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import NamedTuple

from ..backends.base import Backend
from ..backends.rows import ExpiredLease
from ..outcomes import CANCELLED_WHILE_RUNNING, LEASE_EXPIRED, next_step
from ..records import Status

log = logging.getLogger("jobq")

# Maintenance recovers expired leases in batches of this many rows.
MAINTENANCE_BATCH = 500

# prune deletes this many rows per statement.
PRUNE_BATCH = 1000

FINISHED = (Status.COMPLETED, Status.FAILED, Status.EXPIRED, Status.CANCELLED)


def finished_statuses(statuses: Iterable[Status | str] | None) -> tuple[Status, ...]:
    """The statuses prune may delete, checked: finished ones only, at least one."""
    if statuses is None:
        return FINISHED
    chosen = tuple(dict.fromkeys(statuses if not isinstance(statuses, str) else [statuses]))
    names = ", ".join(str(status) for status in FINISHED)
    for status in chosen:
        if status not in FINISHED:
            raise ValueError(f"prune deletes only finished jobs ({names}), not {status!r}")
    if not chosen:
        raise ValueError(f"prune needs at least one status of {names}")
    return tuple(Status(status) for status in chosen)


def recover_and_expire(backend: Backend) -> dict[str, int]:
    """Recover attempts whose lease ended, with each job's own retry policy, expire pending
    jobs past their deadline, and wake jobs stranded behind a free key. Returns how many
    jobs went where."""
    counts = {"requeued": 0, "failed": 0, "expired": 0}
    while True:
        leases = backend.retrying("maintenance", lambda: backend.expired_leases(MAINTENANCE_BATCH))
        for lease in leases:
            status = recover(backend, lease)
            if status is not None:
                counts["requeued" if status is Status.PENDING else str(status)] += 1
        if len(leases) < MAINTENANCE_BATCH:
            break
    counts["expired"] += backend.retrying("maintenance", backend.expire_overdue)
    stranded = backend.retrying("maintenance", backend.wake_stranded)
    if stranded:
        # Said loudly: every such job is a wake-up a claim or an ending should have made.
        log.warning(
            "Maintenance woke %d job(s) blocked on a key with no attempt holding a slot",
            stranded,
            extra={"event": "stranded_woken"},
        )
    if any(counts.values()):
        log.info(
            "Maintenance: %d requeued, %d failed, %d expired",
            counts["requeued"],
            counts["failed"],
            counts["expired"],
            extra={"event": "maintenance"},
        )
    return counts


def recover(backend: Backend, lease: ExpiredLease) -> Status | None:
    """Settle one abandoned attempt by its job's policy; None if another process did."""
    status, delay = next_step(lease.retry, lease.attempts)
    if lease.cancelled:
        error = CANCELLED_WHILE_RUNNING.format(LEASE_EXPIRED)
        ended = backend.retrying(
            "maintenance", lambda: backend.end_cancelled(lease.id, lease.token, error)
        )
        return Status.CANCELLED if ended else None
    settled = backend.retrying(
        "maintenance",
        lambda: backend.settle(lease.id, lease.token, status, LEASE_EXPIRED, delay, True),
    )
    if settled is not None:
        log.warning(
            "Recovered a job whose lease ended without an acknowledgement: now %s",
            settled,
            extra={
                "event": "recovered",
                "job_id": lease.id,
                "job_type": lease.type,
                "attempt": lease.attempts,
            },
        )
    return settled


class Pruned(NamedTuple):
    deleted: int
    # Whether another process was pruning at a batch: this run stopped there, leaving the
    # rest to that one.
    left_to_another: bool = False
    events: int = 0  # events deleted (jobq_events), after the jobs


def prune(backend: Backend, seconds: float, statuses: tuple[Status, ...]) -> Pruned:
    """Delete finished jobs of `statuses` older than `seconds`, PRUNE_BATCH rows per
    statement, each its own short transaction, until none is left or another process is
    found pruning (Backend.prune). One status at a time, oldest first: each batch is then one
    ordered range of the pruning index (backends/pruning.py), where several statuses
    together would be several ranges merged and sorted."""
    deleted = 0
    for status in statuses:
        while True:
            batch = backend.retrying(
                "prune",
                lambda: backend.prune(seconds, (status,), PRUNE_BATCH),  # noqa: B023
            )
            if batch is None:
                return Pruned(deleted, left_to_another=True)
            deleted += batch
            if batch < PRUNE_BATCH:
                break
    return Pruned(deleted, events=prune_events(backend, seconds))


def prune_events(backend: Backend, seconds: float) -> int:
    """Delete the events emitted longer than `seconds` ago (a wait still to come misses
    them: the retention window is how long an event waits for its waiters) and the
    placeholders no job waits on, in batches as for jobs."""
    deleted = 0
    while True:
        batch = backend.retrying("prune", lambda: backend.prune_events(seconds, PRUNE_BATCH))
        deleted += batch
        if batch < PRUNE_BATCH:
            return deleted
