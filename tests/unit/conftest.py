"""Unit tests run inside the pytest process alone: no database, not even SQLite, no other
process, no network. Anything that reaches for one fails at once, naming where the test
belongs, so that `make test-fast` stays fast and needs no servers."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
from collections.abc import Callable
from typing import Any, NoReturn

import pytest

ELSEWHERE = (
    "a unit test may not use {what}: a test that needs a database belongs in "
    "tests/integration, one that starts processes or serves a port in tests/system"
)


def refusal(what: str) -> Callable[..., NoReturn]:
    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(ELSEWHERE.format(what=what))

    return refuse


@pytest.fixture(autouse=True)
def stay_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess.Popen, "__init__", refusal("a subprocess"))
    monkeypatch.setattr(os, "fork", refusal("os.fork"))
    monkeypatch.setattr(sqlite3, "connect", refusal("SQLite"))
    monkeypatch.setattr(socket.socket, "connect", refusal("the network"))
    monkeypatch.setattr(socket.socket, "bind", refusal("the network"))


@pytest.fixture
def db_kind() -> NoReturn:
    raise pytest.UsageError(ELSEWHERE.format(what="the dsn or db_kind fixtures"))
