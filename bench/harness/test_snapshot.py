"""--jobq-at freezes jobq/ as it was at a commit, and bench/ from the work tree."""

from __future__ import annotations

import subprocess
import sys

import pytest

from . import snapshot


def test_jobq_at_freezes_jobq_as_it_was_at_that_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("BENCH_CODE", raising=False)  # freeze() sets it; restored after
    commit = snapshot.jobq_at(["--quick", "--jobq-at", "HEAD~1", "--only", "scale"])
    assert commit == "HEAD~1"
    code = snapshot.freeze(commit)
    assert code is not None
    try:
        then = subprocess.run(
            ["git", "-C", str(snapshot.TREE), "show", f"{commit}:jobq/__init__.py"],
            capture_output=True,
            check=True,
        ).stdout
        assert (code / "jobq" / "__init__.py").read_bytes() == then
        assert (code / "bench" / "harness" / "snapshot.py").exists()
    finally:
        snapshot.release(code)
