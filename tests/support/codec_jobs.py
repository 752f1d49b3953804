"""Job classes for the codec tests, which record in this process what they ran with."""

from __future__ import annotations

from typing import Any

import jobq

# The jobs below record what they ran with in this list (the test process runs them).
RAN: list[dict[str, Any]] = []


class Keep(jobq.Job):
    type = "codec"

    def __init__(self, **state: Any) -> None:
        self.__dict__.update(state)

    def handle(self) -> None:
        RAN.append(dict(vars(self)))


class Strict(jobq.Job):
    """A class whose from_state insists on exactly the fields its __init__ takes."""

    type = "codec"

    def __init__(self, name: str) -> None:
        self.name = name

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> jobq.Job:
        return cls(**state)

    def handle(self) -> None:
        RAN.append({"name": self.name})


class Named(jobq.Job):
    job_name = "codec-tests/named"

    def handle(self) -> None:
        pass
