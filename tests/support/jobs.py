"""Small job classes that the tests run in their own process."""

from __future__ import annotations

import jobq


class Noop(jobq.Job):
    type = "noop"

    def handle(self) -> None:
        pass


class Record(jobq.Job):
    """Remembers, in this process, every value it ran with."""

    type = "record"
    seen: list[object] = []  # noqa: RUF012 - shared on purpose, reset by the tests

    def __init__(self, value: object) -> None:
        self.value = value

    def handle(self) -> None:
        Record.seen.append(self.value)


class Boom(jobq.Job):
    type = "boom"

    def __init__(self, message: str = "boom") -> None:
        self.message = message

    def handle(self) -> None:
        raise RuntimeError(self.message)


class Limited(jobq.Job):
    """At most two at once per account (the concurrency guide's example)."""

    type = "limited"
    concurrency = jobq.Concurrency(2, key=lambda job: job.account)

    def __init__(self, account: str, value: int = 0) -> None:
        self.account = account
        self.value = value

    def handle(self) -> None:
        pass


class Rated(jobq.Job):
    """At most three starts a second per vendor (the rate limits guide's example, faster)."""

    type = "rated"
    rate = jobq.Rate(3, per=1, key=lambda job: job.vendor)

    def __init__(self, vendor: str, value: int = 0) -> None:
        self.vendor = vendor
        self.value = value

    def handle(self) -> None:
        pass
