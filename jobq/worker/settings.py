"""What a worker child is told by its master when it is forked."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerSettings:
    dsn: str
    lease: float
    types: tuple[str, ...]  # empty: every type but `others` (see claim_types.py)
    poll_interval: float
    safety_margin: float
    max_jobs: int | None
    max_memory_mib: float | None
    # The application module each worker imports after its fork (the master never does).
    app: str | None = None
    listen_dsn: str | None = None
    # The database has worked for this supervisor before: a worker that cannot reach it is
    # in an outage, and waits for it rather than exit as unable to start.
    patient: bool = False
    # --prefetch: how many jobs a claim takes (None: adaptive; see prefetch.py).
    prefetch: int | None = None
    # The id every row this worker claims is marked with, chosen by its master.
    worker_id: str | None = None
    # --concurrency: how many attempts it runs at once (1: the process worker, one by one).
    concurrency: int = 1
    # How many workers its pool has: it claims its share of the limited work (key_share.py).
    workers: int = 1
    # Its pool's name when --pool made it (see pool_specs.py), for its process title; and
    # the types other pools name, which a pool of every other type (*) leaves alone.
    pool: str | None = None
    others: tuple[str, ...] = ()
