"""What a running attempt writes besides its outcome, progress and checkpoints, each guarded
by the attempt's token and lease; and the wake-ups of a session waiting for a job to end,
where the database sends them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar


class Reporting(ABC):
    # Sets {column} to %(value)s / :value while the attempt (id, token) holds its job and an
    # unexpired lease: a fenced or superseded attempt writes nothing.
    sql_attempt_write: ClassVar[str]
    # Raises the job's max_attempts by one while the attempt (id, token) holds it, as the
    # settle that follows checks: an attempt that suspends its job uses up no retry.
    sql_uncount: ClassVar[str]

    @abstractmethod
    def execute(self, sql: str, params: Any = None, connection: Any = None) -> int: ...

    def attempt_write(self, column: str, job_id: int, token: str, value: str) -> bool:
        """Write the attempt's progress or checkpoint; False when it no longer holds the job."""
        assert column in ("progress", "checkpoint")
        params = {"id": job_id, "token": token, "value": value}
        return self.execute(self.sql_attempt_write.format(column=column), params) == 1

    def uncount(self, job_id: int, token: str) -> bool:
        """Leave the attempt (job_id, token) out of its retry policy's count; False when it
        no longer holds the job."""
        return self.execute(self.sql_uncount, {"id": job_id, "token": token}) == 1

    def watch(self, job_id: int) -> bool:
        """Start receiving a wake-up when this job ends; False where the database sends
        none, and a waiter must poll."""
        return False

    def wait_for_end(self, job_id: int, timeout: float) -> None:
        """After watch() returned True: block up to `timeout` seconds, or until a wake-up
        that may be this job's."""
        raise NotImplementedError

    def unwatch(self) -> None:
        """After watch() returned True: stop the wake-ups it started."""
        raise NotImplementedError
