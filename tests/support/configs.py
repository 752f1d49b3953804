"""The supervisor configuration a given environment makes, as jobq-supervise builds it."""

from __future__ import annotations

import dataclasses
import os

import pytest

from jobq import options
from jobq.cli.commands import supervise_parser
from jobq.supervisor.config import SupervisorConfig


def supervisor_config(data: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> SupervisorConfig:
    """The configuration jobq-supervise builds from exactly these environment variables."""
    for variable in list(os.environ):
        if variable.startswith("JOBQ_"):
            monkeypatch.delenv(variable)
    for variable, value in data.items():
        monkeypatch.setenv(variable, value)
    # The parser reads the environment when it is built, as it does at start.
    parser = supervise_parser()
    args = parser.parse_args([])
    options.resolve(parser, args, options.SUPERVISOR)
    given = {
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(SupervisorConfig)
        if field.name not in ("dsn", "types") and hasattr(args, field.name)
    }
    return SupervisorConfig(dsn="postgresql://jobq@db/jobq", **given)
