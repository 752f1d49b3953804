"""Getting started, run as a newcomer would: its files written as the page shows them, its
commands run in a fresh directory on the SQLite default, and what each printed compared with
the output the page shows. Times, dates and process ids are masked; everything else must match,
so a changed message or a changed default fails here before it misleads a reader."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.supervising import Supervisor, supervisor

PAGE = (REPO / "docs" / "getting-started.md").read_text()
BIN = Path(sys.executable).parent
BLOCK = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```$', re.MULTILINE | re.DOTALL)
VOLATILE = [
    (re.compile(r"\d{4}-\d\d-\d\d[T ][\d:.,]+(\+00:00)?"), "<time>"),
    (re.compile(r"jobq\[\d+\]"), "jobq[<pid>]"),
    (re.compile(r"on worker [0-9a-f]+"), "on worker <id>"),
    (re.compile(r"([Ww]orker|TERM) \d+"), r"\1 <pid>"),
    (re.compile(r"ended \d+[smhd] ago"), "ended <age> ago"),
]


# A log record, or what the page's job prints. A worker's print() and a log record share the
# terminal and may interleave mid-line (print writes its newline apart), so the supervisor's
# output is compared as these pieces, in any order, rather than as lines.
PIECE = re.compile(
    r"\d{4}-\d\d-\d\d [\d:,]+ [A-Z]+ jobq\[\d+\]: .*|sending the welcome mail to \S+@example\.com"
)


def pieces(text: str) -> list[str]:
    return sorted(mask(piece) for piece in PIECE.findall(text))


def mask(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def shown() -> list[tuple[str, str]]:
    """Each command on the page ("$ ..." in a console block) and the output shown under it,
    in the page's order: `jobq stats` is shown twice, before the workers run and after."""
    found: list[tuple[str, str]] = []
    for language, _, body in BLOCK.findall(PAGE):
        if language != "console":
            continue
        for command in re.split(r"^\$ ", body, flags=re.MULTILINE)[1:]:
            line, _, output = command.partition("\n")
            found.append((line, output.rstrip("\n")))
    return found


SHOWN = shown()


def command_shown(start: str) -> str:
    return next(command for command, _ in SHOWN if command.startswith(start))


def output_shown(command: str, which: int = 0) -> str:
    """What the page shows under `command`, the first time (or `which` time) it runs it."""
    return [output for shown, output in SHOWN if shown == command][which]


def run(command: str, cwd: Path) -> str:
    """One of the page's commands, with this venv's jobq and Python."""
    argv = command.split()
    program = {"python": sys.executable}.get(argv[0], str(BIN / argv[0]))
    done = subprocess.run([program, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=60)
    return (done.stdout + done.stderr).rstrip("\n")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new project directory holding the files the page tells the reader to write."""
    root = tmp_path_factory.mktemp("project")
    (root / "myapp").mkdir()
    (root / "myapp" / "__init__.py").touch()
    for _, title, body in BLOCK.findall(PAGE):
        if title:
            (root / title).write_text(body)
    return root


@pytest.fixture(scope="module")
def supervised(project: Path) -> Iterator[Supervisor]:
    """The page's first steps, then its jobq-supervise, left running for the rest."""
    for command in ["jobq migrate", "python enqueue.py", "jobq stats"]:
        assert run(command, project) == output_shown(command)
    command = command_shown("jobq-supervise --app")
    argv = command.split()
    with supervisor("unused", *argv[1:], command=[str(BIN / argv[0])], cwd=project) as running:
        yield running


def test_the_supervisor_runs_the_enqueued_jobs_as_shown(supervised: Supervisor) -> None:
    supervised.wait_for_log("completed", count=3)
    shown = output_shown(command_shown("jobq-supervise --app"))
    expected = pieces(shown)
    assert len(expected) == len(shown.splitlines())  # every line shown is compared
    assert pieces(supervised.log) == expected


@pytest.mark.parametrize("command", ["jobq stats", "jobq jobs", "jobq show 1"])
def test_watching_shows_what_the_page_shows(
    supervised: Supervisor, project: Path, command: str
) -> None:
    supervised.wait_for_log("completed", count=3)
    expected = output_shown(command, -1)
    assert mask(run(command, project)) == mask(expected)


def test_sigterm_drains_and_stops_as_shown(supervised: Supervisor) -> None:
    supervised.wait_for_log("completed", count=3)
    before = len(supervised.lines)
    supervised.signal(signal.SIGTERM)
    assert supervised.wait() == 0
    drain = output_shown(command_shown("kill -TERM"))
    expected = pieces(drain)
    assert len(expected) == len(drain.splitlines())
    assert pieces("\n".join(supervised.lines[before:])) == expected


def test_an_app_out_of_reach_is_refused_as_shown() -> None:
    command = command_shown("cd /tmp && ")
    assert run(command.removeprefix("cd /tmp && "), Path("/tmp")) == output_shown(command)
