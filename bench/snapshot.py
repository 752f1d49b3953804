"""Freeze the code a run measures.

A run takes half an hour, and the work tree it runs in may change meanwhile (others commit to
jobq/ while it runs). Without a snapshot, each supervisor would import whatever jobq/ held when
it started, and the bench process itself could mix modules imported before and after a change.
So before anything imports jobq, jobq/ and bench/ are copied to a temp dir, which goes first on
this process's sys.path and becomes every child's working directory and PYTHONPATH (children
run `python -m`, which puts the working directory first).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

TREE = Path(__file__).resolve().parent.parent


def freeze() -> Path | None:
    """Copy jobq/ and bench/ from the work tree; None when jobq is not run from source."""
    if not (TREE / "jobq" / "__init__.py").exists():
        return None
    code = Path(tempfile.mkdtemp(prefix="jobq-bench-code-"))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "RESULTS.md", "*.png")
    for package in ("jobq", "bench"):
        shutil.copytree(TREE / package, code / package, ignore=ignore)
    sys.path.insert(0, str(code))
    os.environ["BENCH_CODE"] = str(code)
    return code


def release(code: Path | None) -> None:
    if code is not None:
        shutil.rmtree(code, ignore_errors=True)
