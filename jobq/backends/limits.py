"""Concurrency limits as every backend provides them: the limits in force, an operator's
override, and what a job waits on. The counting itself is the database's, in the triggers
each backend's limits.py installs (see jobq/limits.py for why a slot is not a counter)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, NamedTuple, TypeVar

from ..limits import CONCURRENCY, MAX_COUNT, RATE
from .rows import Refused
from .steps import Steps, count

T = TypeVar("T")

# How many rows refused by a concurrency limit one claim() looks past before it reports
# nothing ready: each refusal blocks its row, so the next probe starts beyond it.
REFUSALS = 8

# How many claims that each met REFUSALS refused rows past_refusals() makes back to back
# before it reports nothing ready. Jobs enqueued together by key put long runs of one running key's
# jobs at the head of the ready index; each claim blocks REFUSALS of them, and without a
# second try its worker would wait for work every few jobs. Bounded, because a key another
# claim holds leaves its rows ready, and a claim could meet them again and again.
REFUSED_ROUNDS = 8


def past_refusals(claim: Callable[[], T | Refused], nothing: T) -> T:
    """claim() again at once while a limit refused every row it met, REFUSED_ROUNDS times at
    most: the claim (or claims), or `nothing` when the rounds ran out."""
    for _ in range(REFUSED_ROUNDS):
        claimed = claim()
        if not isinstance(claimed, Refused):
            return claimed
    return nothing


# Keys one wake_lapsed() looks at: a few, so that an idle claim stays short.
LAPSED_KEYS = 8

# Keys whose slots an ended lease freed (an attempt still in progress, its lease over: its
# worker or master is gone, and maintenance has not settled it yet) with jobs blocked on
# them, in a backend's style: {now} its current time, {mark} its placeholders.
LAPSED_TEMPLATE = """
    SELECT DISTINCT r.type, r.limit_key FROM jobq_jobs r
    WHERE r.status = 'in_progress' AND r.lease_until <= {now} AND r.limit_key IS NOT NULL
      AND EXISTS (SELECT 1 FROM jobq_jobs b WHERE b.type = r.type
                  AND b.limit_key = r.limit_key AND b.status = 'pending'
                  AND b.blocked_on IS NOT NULL)
    LIMIT {limit}
"""

# Keys with jobs blocked on them and no attempt holding one of their slots, so that no ending
# of theirs will wake those jobs. Claims and endings wake a key's jobs as they go; this is
# the net maintenance spreads under a wake-up missed between them. A key with a job due and
# unblocked is not stranded: that job was woken and waits for its claim, whose ending wakes
# the next (counted as stranded, such keys made the warning fire in drains that missed no
# wake-up).
STRANDED_TEMPLATE = """
    SELECT DISTINCT b.type, b.limit_key FROM jobq_jobs b
    WHERE b.status = 'pending' AND b.blocked_on IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM jobq_jobs r WHERE r.type = b.type
                      AND r.limit_key = b.limit_key AND r.status = 'in_progress'
                      AND r.lease_until > {now})
      AND NOT EXISTS (SELECT 1 FROM jobq_jobs w WHERE w.type = b.type
                      AND w.limit_key = b.limit_key AND w.status = 'pending'
                      AND w.blocked_on IS NULL AND w.scheduled_at <= {now})
"""

# A key's free slots: the limit in force (none: unlimited) less its attempts holding one.
FREE_TEMPLATE = f"""
    SELECT coalesce((SELECT coalesce(l.override, l.declared) FROM jobq_limits l
                     WHERE l.type = {{type}} AND l.name = '{CONCURRENCY}'), {MAX_COUNT})
        - (SELECT count(*) FROM jobq_jobs r WHERE r.type = {{type}} AND r.limit_key = {{key}}
           AND r.status = 'in_progress' AND r.lease_until > {{now}})
"""


# A rate limit's window in force, in seconds, in a statement over jobq_limits l.
PER_IN_FORCE = "CASE WHEN l.override IS NULL THEN l.declared_per ELSE l.override_per END"

# Each limit and how it stands, with the database's current time in place of {now}, and
# {since} the start of a rate limit's window (PER_IN_FORCE seconds before now). A rate
# limit's "slots in use" are its starts within the window, all keys together.
LIMITS_TEMPLATE = f"""
    SELECT l.type, l.name, l.declared, l.override,
        (SELECT count(*) FROM jobq_jobs r WHERE r.type = l.type
           AND r.status = 'in_progress' AND r.limit_key IS NOT NULL AND r.lease_until > {{now}}),
        (SELECT count(*) FROM jobq_jobs b WHERE b.type = l.type
           AND b.status = 'pending' AND b.blocked_on IS NOT NULL),
        NULL
    FROM jobq_limits l WHERE l.name = '{CONCURRENCY}'
    UNION ALL
    SELECT l.type, l.name, l.declared, l.override,
        (SELECT count(*) FROM jobq_rate_starts s WHERE s.type = l.type
           AND s.started_at > {{since}}),
        0, {PER_IN_FORCE}
    FROM jobq_limits l WHERE l.name = '{RATE}'
    ORDER BY 1, 2
"""


# A job's concurrency key and the limit it waits on, {id} its id: a blocked job's limit, or
# the rate when the job, due later, belongs to a key whose window is full now. The row keeps
# no mark of a rate's refusal, but it needs none: the refusal moved the job to when the
# window's oldest start leaves it, and until then the window stays full.
LIMIT_OF_TEMPLATE = f"""
    SELECT j.limit_key, coalesce(j.blocked_on, (
        SELECT '{RATE}' FROM jobq_limits l WHERE l.type = j.type AND l.name = '{RATE}'
          AND j.status = 'pending' AND j.rate_key IS NOT NULL AND j.scheduled_at > {{now}}
          AND (SELECT count(*) FROM jobq_rate_starts s WHERE s.type = j.type
               AND s.rate_key = j.rate_key AND s.started_at > {{since}})
              >= coalesce(l.override, l.declared)))
    FROM jobq_jobs j WHERE j.id = {{id}}
"""


# The limited work there is now: limited jobs ready to be claimed and limited attempts in
# progress, each counted up to {most} (a placeholder), in a backend's style ({now}: its
# current time). Blocked jobs are not counted: they wait behind attempts counted already.
LIMITED_WORK_TEMPLATE = """
    SELECT (SELECT count(*) FROM (SELECT 1 AS one FROM jobq_jobs WHERE status = 'pending'
                AND blocked_on IS NULL AND limit_key IS NOT NULL AND scheduled_at <= {now}
                LIMIT {most}) AS ready)
         + (SELECT count(*) FROM (SELECT 1 AS one FROM jobq_jobs WHERE status = 'in_progress'
                AND limit_key IS NOT NULL LIMIT {most}) AS running)
"""


def limited_work_statement(now: str, most: str) -> str:
    """sql_limited_work in a backend's style: its current time and its placeholder."""
    return LIMITED_WORK_TEMPLATE.format(now=now, most=most)


# A job class's declared limit: (type, limit name, count, a rate's window or None).
Declared = tuple[str, str, int, float | None]


def shared_statements(
    now: str, since: str, type_: str, key: str, id_: str
) -> tuple[str, str, str, str, str]:
    """sql_limits, sql_lapsed_keys, sql_stranded_keys, sql_free_slots and sql_limit_of in a
    backend's style: its current time, the start of a rate's window (`since`, over
    PER_IN_FORCE), and its placeholders for the type, key and job id."""
    return (
        LIMITS_TEMPLATE.format(now=now, since=since),
        LAPSED_TEMPLATE.format(now=now, limit=LAPSED_KEYS),
        STRANDED_TEMPLATE.format(now=now),
        FREE_TEMPLATE.format(type=type_, key=key, now=now),
        LIMIT_OF_TEMPLATE.format(now=now, since=since, id=id_),
    )


class LimitRow(NamedTuple):
    """A limit of one job type, and how it stands."""

    type: str
    name: str
    declared: int | None  # as the job class says, from its last enqueue
    override: int | None  # an operator's, which wins while set
    in_use: int  # slots held: attempts in progress with a live lease, over all keys
    blocked: int  # jobs waiting for a slot
    per: float | None = None  # a rate limit's window in force, in seconds

    @property
    def in_force(self) -> int | None:
        return self.override if self.override is not None else self.declared


class Limits(ABC):
    # Each backend sets these from its limits.py; they take named parameters in its style.
    sql_declare_limit: ClassVar[str]
    sql_override_limit: ClassVar[str]
    sql_unblock_type: ClassVar[str]
    sql_limits: ClassVar[str]
    sql_limit_of: ClassVar[str]
    # A key's wake-up: the keys an ended lease freed; a row when this transaction holds the
    # key (so that no claim blocks a job of it unseen meanwhile); its free slots; and the
    # statement that unblocks its best %(free)s jobs.
    sql_lapsed_keys: ClassVar[str]
    sql_stranded_keys: ClassVar[str]
    sql_hold_key: ClassVar[str]
    sql_free_slots: ClassVar[str]
    sql_wake_key: ClassVar[str]
    sql_limited_work: ClassVar[str]
    wake_params: ClassVar[Mapping[str, str]]
    placeholder: ClassVar[str]

    @abstractmethod
    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...

    @abstractmethod
    def fetchone(self, sql: str, params: Any = None) -> Any: ...

    @abstractmethod
    def fetchall(self, sql: str, params: Any = None) -> list[Any]: ...

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]: ...

    @abstractmethod
    def run(self, steps: Steps[T], connection: Any = None) -> T: ...

    def declare_limits_steps(self, declared: Sequence[Declared]) -> Steps[None]:
        """Record job classes' declared limits (a no-op write for one unchanged): the Queue
        runs it, and the AsyncQueue awaits it on its driver."""
        for job_type, name, limit, per in declared:
            params = {"type": job_type, "name": name, "count": limit, "per": per}
            yield from count(self.sql_declare_limit, params)

    def override_limit(
        self, job_type: str, count: int | None, name: str = CONCURRENCY, per: float | None = None
    ) -> None:
        """Set (or with None, drop) an operator's limit (a rate's with its window `per`), and
        let the type's blocked jobs be claimed again, so that a raised limit takes effect at
        once."""
        params = {"type": job_type, "name": name, "count": count, "per": per}
        with self.transaction():
            self.execute(self.sql_override_limit, params)
            self.execute(self.sql_unblock_type, {"type": job_type, **self.wake_params})

    def mark_idle(self) -> bool:
        """Before a worker waits for wake-ups (after listen()): mark it idle, and have it
        woken from now on, where an ending that frees a slot wakes workers only while some
        are marked. True when it was not marked yet: it must then claim once more before
        it waits, since an ending or enqueue that committed just before the mark sent it no
        wake-up."""
        return False

    def unmark_idle(self) -> None:
        """The worker has work again: drop its idle mark, if any, and its wake-ups."""
        return None

    def wake_lapsed(self) -> int:
        """Wake jobs blocked on a key whose slot an ended lease freed, before maintenance
        settles that attempt (its master killed, say): an idle claim runs this, so a freed
        slot is taken by the first claim that finds nothing else. Returns how many woke."""
        return self._wake_keys(self.sql_lapsed_keys)

    def wake_stranded(self) -> int:
        """Wake jobs blocked on a key none of whose attempts holds a slot (maintenance runs
        it): with no attempt of the key left to end, nothing else would. Returns how many."""
        return self._wake_keys(self.sql_stranded_keys)

    def _wake_keys(self, keys_sql: str) -> int:
        woken = 0
        for job_type, key in self.fetchall(keys_sql):
            with self.transaction():
                woken += self.wake_key({"type": job_type, "key": key})
        return woken

    def wake_key(self, params: Mapping[str, Any]) -> int:
        """Within a transaction: unblock as many of the key's blocked jobs as it has free
        slots, best first, holding the key as it counts. A key another transaction holds is
        skipped: its claim or ending wakes its jobs."""
        params = {**params, **self.wake_params}
        if self.fetchone(self.sql_hold_key, params) is None:
            return 0
        (free,) = self.fetchone(self.sql_free_slots, params)
        if int(free) <= 0:
            return 0
        return self.execute(self.sql_wake_key, params | {"free": int(free)})

    def limits(self) -> list[LimitRow]:
        return [
            LimitRow(
                row[0],
                row[1],
                opt_int(row[2]),
                opt_int(row[3]),
                int(row[4]),
                int(row[5]),
                None if row[6] is None else float(row[6]),
            )
            for row in self.fetchall(self.sql_limits)
        ]

    def limited_work(self, most: int) -> int:
        """Limited jobs ready and limited attempts in progress, of every type, each counted
        up to `most`."""
        return int(self.fetchone(self.sql_limited_work, {"most": int(most)})[0])

    def blocked_ids(self, job_type: str | None, limit: int) -> list[int]:
        """The newest jobs waiting on a limit, of one type or of all."""
        which = "" if job_type is None else f" AND type = {self.placeholder.format('type')}"
        rows = self.fetchall(
            "SELECT id FROM jobq_jobs WHERE status = 'pending' AND blocked_on IS NOT NULL"
            f"{which} ORDER BY id DESC LIMIT {int(limit)}",
            {"type": job_type},
        )
        return [int(row[0]) for row in rows]

    def limit_of(self, job_id: int) -> tuple[str | None, str | None]:
        """A job's concurrency key, and the limit it waits on (None when it waits on none):
        its concurrency limit's while it is blocked, its rate's while a full window keeps it
        scheduled later."""
        row = self.fetchone(self.sql_limit_of, {"id": job_id})
        return (None, None) if row is None else (row[0], row[1])


def opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
