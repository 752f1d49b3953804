"""Hooks as declared: only functions are taken, and a worker without job hooks never looks
for them."""

from __future__ import annotations

import pytest

import jobq
from jobq import hooks


def test_a_worker_without_job_hooks_never_looks_for_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hooks, "REGISTERED", hooks.JobHooks(worker_start=[lambda: None]))
    assert hooks.for_jobs() is None
    before = hooks.JobHooks(before=[lambda claim: None])
    monkeypatch.setattr(hooks, "REGISTERED", before)
    assert hooks.for_jobs() is before


def test_hooks_decorate_functions_only() -> None:
    with pytest.raises(TypeError, match=r"@jobq.before_job decorates a function"):
        jobq.before_job("not a function")  # type: ignore[type-var]
