"""Events a durable job waits for (jobq.wait_for) and that anyone emits (Queue.emit): one
row a key in jobq_events, the first emit's payload kept; and the mark on a waiting job's
row (event_key) that an emit clears, waking the job.

Nothing is lost between a waiter and an emit of its key, whichever comes first and however
long the emitter's transaction stays open:
- the waiter, in one transaction, takes the key's row (a placeholder if there is none,
  written or locked), reads it, and marks its job's row with the key if nothing was emitted;
- an emit writes the key's row (waiting for that lock, or holding it) and, in its
  transaction, clears the mark of every job waiting for the key, waking those already
  suspended;
- the waiter's attempt then suspends its job; once it has, it wakes the job itself if the
  mark is gone (an emit that came while its attempt was ending).
"""

from __future__ import annotations

from abc import abstractmethod
from contextlib import AbstractContextManager
from typing import Any, ClassVar, TypeVar

from .step_records import text
from .steps import Steps, count

T = TypeVar("T")
EventState = tuple[bool, str | None]  # emitted, its payload (JSON)


class Events:
    # Writes the key's row as a placeholder (not emitted) if it has none, or locks it.
    sql_event_hold: ClassVar[str]
    # The key's row: (emitted, payload).
    sql_event_read: ClassVar[str]
    # Marks job (id) as the attempt (token)'s, waiting for (key); 0 rows once it lost the job.
    sql_event_mark: ClassVar[str]
    # Emits (key, payload) unless it was emitted already: the first emit wins.
    sql_emit: ClassVar[str]
    # Clears the mark of every job waiting for (key), and makes the suspended ones due.
    sql_emit_wake: ClassVar[str]
    # Makes job (id) due if it is suspended and its mark was cleared.
    sql_event_rewake: ClassVar[str]
    # Deletes up to (batch) events: those emitted longer than (older_than) ago, and
    # placeholders no job waits for.
    sql_prune_events: ClassVar[str]
    # Makes job (id) due now if it is pending and due later.
    sql_wake_now: ClassVar[str]
    # The key job (id) waits for: (event_key,).
    sql_awaited: ClassVar[str]

    @abstractmethod
    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...

    @abstractmethod
    def fetchone(self, sql: str, params: Any = None) -> Any: ...

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]: ...

    def hold_event(self, job_id: int, token: str, key: str) -> EventState | None:
        """For the attempt (job_id, token) about to wait for `key`: the key's state, its job
        marked as waiting when nothing was emitted; None when the attempt lost the job."""
        with self.transaction():
            self.execute(self.sql_event_hold, {"key": key})
            emitted, payload = self.fetchone(self.sql_event_read, {"key": key})
            if emitted:
                return True, payload  # nothing marked: the wait takes the payload now
            params = {"id": job_id, "token": token, "key": key}
            if self.execute(self.sql_event_mark, params) != 1:
                return None
        return False, None

    def event_state(self, key: str) -> EventState:
        """The key's state, read without waiting or marking anything."""
        row = self.fetchone(self.sql_event_read, {"key": key})
        return (False, None) if row is None else (bool(row[0]), row[1])

    def unmark_event(self, job_id: int, token: str) -> None:
        """The attempt (job_id, token) waits for no event any more (its wait timed out)."""
        self.execute(self.sql_event_mark, {"id": job_id, "token": token, "key": None})

    @abstractmethod
    def seconds(self, value: float) -> Any: ...

    def prune_events(self, older_than: float, batch: int) -> int:
        """Delete up to `batch` events emitted longer than `older_than` seconds ago, and
        placeholders of waits that no job waits in any more; how many."""
        params = {"older_than": self.seconds(older_than), "batch": batch}
        return self.execute(self.sql_prune_events, params)

    def wake(self, job_id: int) -> bool:
        """Make a pending job due now; False when it is not pending, or due already."""
        return self.execute(self.sql_wake_now, {"id": job_id}) == 1

    @abstractmethod
    def run(self, steps: Steps[T], connection: Any = None) -> T: ...

    def emit_now(self, key: str, payload: str) -> bool:
        """emit_steps() in a transaction of this backend's own."""
        with self.transaction():
            return self.run(self.emit_steps(key, payload))

    def emit_steps(self, key: str, payload: str) -> Steps[bool]:
        """Emit `key` and wake its waiters; whether any job was waiting for it."""
        params = {"key": key, "payload": payload}
        yield from count(self.sql_emit, params)
        woken = yield from count(self.sql_emit_wake, {"key": key})
        return woken > 0

    def awaited(self, job_id: int) -> str | None:
        """The event key the job waits for, if any."""
        row = self.fetchone(self.sql_awaited, {"id": job_id})
        return None if row is None or row[0] is None else text(row[0])

    def rewake(self, job_id: int) -> None:
        self.execute(self.sql_event_rewake, {"id": job_id})
