"""The refusals Troubleshooting quotes, as the commands print them today: each command below
is run against SQLite in an empty directory, and what it printed must be on the page word for
word, so a reworded message cannot leave the page quoting one nobody will see."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

PAGE = (REPO / "docs" / "troubleshooting.md").read_text()
BIN = Path(sys.executable).parent
TIMING = [
    "--lease", "5", "--renew-interval", "1", "--renew-timeout", "1",
    "--kill-grace", "0", "--safety-margin", "1",
]  # fmt: skip

# The command, and the exit status Troubleshooting says it gives.
REFUSALS = {
    "no database file": (["jobq-supervise", "--app", "json"], 2),
    "no schema": (["jobq", "stats", "--dsn", "sqlite:///empty.sqlite3"], 1),
    "the timing rule": (["jobq-supervise", "--app", "json", *TIMING], 2),
    "the termination grace": (
        ["jobq-supervise", "--app", "json", "--termination-grace-period", "30"],
        2,
    ),
}


@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_refusal_is_quoted_on_the_page_as_printed(refusal: str, tmp_path: Path) -> None:
    (program, *args), status = REFUSALS[refusal]
    if refusal == "no schema":
        (tmp_path / "empty.sqlite3").touch()
    done = subprocess.run(
        [str(BIN / program), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == status, done.stderr
    assert done.stderr.strip() in PAGE
