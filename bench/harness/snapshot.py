"""Freeze the code a run measures.

A run takes half an hour, and the work tree it runs in may change meanwhile (others commit to
jobq/ while it runs). Without a snapshot, each supervisor would import whatever jobq/ held when
it started, and the bench process itself could mix modules imported before and after a change.
So before anything imports jobq, jobq/ and bench/ are copied to a temp dir, which goes first on
this process's sys.path and becomes every child's working directory and PYTHONPATH (children
run `python -m`, which puts the working directory first).

`--jobq-at COMMIT` freezes jobq/ as it was at that commit instead (bench/ still from the work
tree): the same measurements of older code, for a before and after.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

TREE = Path(__file__).resolve().parents[2]


def jobq_at(argv: list[str]) -> str | None:
    """The --jobq-at option, read before the rest of the command line is parsed."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--jobq-at")
    commit: str | None = parser.parse_known_args(argv)[0].jobq_at
    return commit


def freeze(commit: str | None = None) -> Path | None:
    """Copy bench/, and jobq/ from the work tree or else as of `commit`; None when jobq is
    not run from source."""
    if not (TREE / "jobq" / "__init__.py").exists():
        if commit is not None:
            raise SystemExit("--jobq-at needs jobq run from its git work tree")
        return None
    code = Path(tempfile.mkdtemp(prefix="jobq-bench-code-"))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "RESULTS.md", "*.png")
    shutil.copytree(TREE / "bench", code / "bench", ignore=ignore)
    if commit is None:
        shutil.copytree(TREE / "jobq", code / "jobq", ignore=ignore)
    else:
        archive = subprocess.run(
            ["git", "-C", str(TREE), "archive", commit, "jobq"], capture_output=True, check=False
        )
        if archive.returncode != 0:
            shutil.rmtree(code, ignore_errors=True)
            raise SystemExit(f"--jobq-at {commit}: {archive.stderr.decode().strip()}")
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(code, filter="data")
    sys.path.insert(0, str(code))
    os.environ["BENCH_CODE"] = str(code)
    return code


def release(code: Path | None) -> None:
    if code is not None:
        shutil.rmtree(code, ignore_errors=True)
