"""Batched claims: up to N ready jobs in one claim, each its own attempt with its own token
and lease; their acknowledgement together with the next batch; and the release of claimed
jobs that never started, which puts them back without counting an attempt.

The defaults here run the per-job statements in one transaction; a backend whose database
takes a whole batch in one statement overrides them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar

from ..attempt_log import loaded
from ..records import ClaimedJob, Claims
from .controls import policy_of
from .leases import expiry
from .rows import Acknowledgement, Refused, Runner


class Batching(ABC):
    """Batched claims, as every backend provides them."""

    # Puts one attempt back to pending, uncounted, guarded by id, token and status.
    sql_release: ClassVar[str]
    wake_params: ClassVar[Mapping[str, str]]
    # Locks the concurrency keys of the attempts %(ids)s, in one order, before a release ends
    # several of them in one transaction; None where endings never wait for a key.
    sql_hold_keys_of: ClassVar[str | None] = None
    # The (id, token, type) of every attempt a worker incarnation holds: the in-progress rows
    # its claims named it in.
    sql_held_by: ClassVar[str]

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]: ...

    @abstractmethod
    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...

    @abstractmethod
    def fetchall(self, sql: str, params: Any = None) -> list[Any]: ...

    @abstractmethod
    def complete(self, *done: Any) -> bool:
        """Backend.complete: complete(*an Acknowledgement)."""

    @abstractmethod
    def to_datetime(self, value: Any) -> datetime: ...

    @abstractmethod
    def optional_datetime(self, value: Any) -> datetime | None: ...

    def claimed(self, row: Sequence[Any], token: str, expires_monotonic: float) -> ClaimedJob:
        """A claim from the row its claim statement returned, its columns in CLAIM_COLUMNS'
        order (shapes.py)."""
        return next(self.claims_of([(token, *row)], expires_monotonic))[1]

    def claims_of(
        self, rows: Iterable[Sequence[Any]], expires_monotonic: float
    ) -> Iterator[tuple[str, ClaimedJob]]:
        """(token, claim) from rows of (token, CLAIM_COLUMNS..., anything after), the rows
        of one claim. They share their lease's end (one reading of the statement's clock)
        and mostly their retry policy, so each is converted once per run of equal values,
        not per row; the claims then share one datetime and one policy object, which the
        claim's report to the master also writes once (protocol.attempts)."""
        raw_end: Any = None
        raw_policy: Sequence[Any] = ()
        for row in rows:
            if row[6] != raw_end:
                raw_end, lease_until = row[6], self.to_datetime(row[6])
            if row[7:11] != raw_policy:
                raw_policy = row[7:11]
                retry = policy_of(raw_policy)
            token = row[0]
            claim = ClaimedJob(
                id=int(row[1]),
                type=row[2],
                class_name=row[3],
                payload=row[4],
                attempt=int(row[5]),
                token=token,
                lease_until=lease_until,
                retry=retry,
                deadline=self.optional_datetime(row[11]),
                expires_monotonic=expires_monotonic,
                traceparent=row[12],
                tracestate=row[13],
                checkpoint=loaded(row[14]),
            )
            yield token, claim

    @abstractmethod
    def seconds(self, value: float) -> Any: ...

    @abstractmethod
    def claim_many(
        self,
        types: Sequence[str],
        tokens: Sequence[str],
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> Claims | Refused:
        """Take up to len(tokens) ready jobs of `types` as claim() picks one, in one
        statement: each is its own attempt with its own token, in the order they were
        picked (highest priority first, then schedule order), with the count of rows a limit
        refused. REFUSED when a limit refused every row picked, as claim() answers."""

    def claim_many_within(
        self,
        types: Sequence[str],
        tokens: Sequence[str],
        lease: float,
        expires_monotonic: float,
        runner: Runner,
    ) -> Claims | Refused:
        """claim_many(), inside a transaction the caller opened."""
        return self.claim_many(types, tokens, lease, expires_monotonic, runner)

    def complete_many_and_claim(
        self,
        done: Sequence[Acknowledgement],
        types: Sequence[str],
        tokens: Sequence[str],
        lease: float,
        runner: Runner,
    ) -> tuple[set[int], Claims]:
        """Complete every attempt of `done` still owned, each with its own start and end,
        and claim the next batch, in one commit. Returns the ids whose completion applied,
        and the new claims."""
        expires = expiry(lease)
        with self.transaction():
            completed = {each[0] for each in done if self.complete(*each)}
            claims = self.claim_many_within(types, tokens, lease, expires, runner)
            # Fused with acknowledgements, as complete_and_claim: no second try (claimed_only),
            # but the batch was refused whole, which the adaptive prefetch counts as full.
            return completed, Claims(refused=len(tokens)) if isinstance(claims, Refused) else claims

    def release(self, claims: Sequence[tuple[int, str]]) -> set[int]:
        """Put every (id, token) attempt still owned back to pending, ready at once, its
        attempt uncounted; returns the ids released. For claims that never started."""
        released = set()
        with self.transaction():
            if self.sql_hold_keys_of is not None and len(claims) > 1:
                self.execute(self.sql_hold_keys_of, {"ids": [job_id for job_id, _ in claims]})
            for job_id, token in claims:
                params = {"id": job_id, "token": token, **self.wake_params}
                if self.execute(self.sql_release, params) == 1:
                    released.add(job_id)
        return released

    def held_by(self, worker: str) -> list[tuple[int, str, str]]:
        """(id, token, type) of each attempt `worker` claimed and still holds."""
        rows = self.fetchall(self.sql_held_by, {"worker": worker})
        return [(int(row[0]), row[1], row[2]) for row in rows]


def in_picked_order(
    claimed: Iterable[tuple[str, ClaimedJob]], tokens: Sequence[str], refused: int = 0
) -> Claims:
    """Claims returned in any order, put in the order of their tokens: a batched claim hands
    the i-th token to the i-th job picked. `refused`: the rows picked that a limit refused."""
    rank = {token: i for i, token in enumerate(tokens)}
    return Claims((claim for _, claim in sorted(claimed, key=lambda pair: rank[pair[0]])), refused)
