"""The documentation site's references against the code: the option tables cover every option
of every command, the metrics table names every metric the supervisor registers, the API page
every public name of jobq, each generated part of a page is what the code renders today, and
every Python example on the site parses. The strict build
is tests/integration/test_docs_site.py; Getting started is run whole by
tests/system/test_getting_started.py."""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
from pathlib import Path

import pytest
from mkdocs.config import load_config

import jobq
from docs import generate, hooks
from jobq.cli.commands import build_parser
from jobq.cli.ctl import ctl_parser
from jobq.cli.supervise import supervise_parser
from jobq.supervisor.metrics import Metrics
from jobq.supervisor.states import WorkerState
from tests.support.paths import REPO

DOCS = REPO / "docs"
# Every page of the site, and the two READMEs it serves.
PAGES = sorted([REPO / "README.md", REPO / "deploy" / "README.md", *DOCS.rglob("*.md")])
# Prometheus names a counter's family without the _total its samples carry.
SUFFIXES = {"counter": "_total", "info": "_info"}


def test_the_options_page_covers_every_option_of_every_command() -> None:
    page = (DOCS / "reference" / "options.md").read_text()
    commands = {"supervise": generate.parser_for("supervise"), **generate.subcommands()}
    for name, parser in commands.items():
        for option in parser.get_default("options"):
            assert f"| `{option.flag}` | `{option.variable}` |" in page, (name, option.flag)


def test_the_command_line_page_shows_every_command_s_help() -> None:
    page = (DOCS / "reference" / "cli.md").read_text()
    assert "## `jobq-supervise`" in page
    for name in generate.subcommands():
        assert f"## `jobq {name}`\n\n```text\nusage: jobq {name}" in page


@pytest.mark.parametrize("page", generate.pages(), ids=lambda page: page.name)
def test_every_generated_part_is_what_the_code_renders_today(page: Path) -> None:
    # The schema's part needs a database: tests/integration/test_docs_site.py checks it.
    text = page.read_text()
    skip = generate.NEEDS_DATABASE | generate.differs_here()
    assert generate.regenerate(text, skip=skip) == text, (
        f"{page.name} is stale: run python -m docs.generate"
    )


def test_a_marker_the_generator_does_not_know_fails_it() -> None:
    with pytest.raises(ValueError, match="unknown marker"):
        generate.regenerate("<!-- generated: optoins supervise -->\n<!-- end generated -->")


def test_a_generated_part_without_its_end_fails() -> None:
    with pytest.raises(ValueError, match="without their"):
        generate.regenerate("<!-- generated: cli -->\n")


def registered_metrics() -> dict[str, tuple[str, frozenset[str]]]:
    """Each metric the supervisor exposes: its type and label names, read from a registry
    in which every labelled series has been touched once."""
    metrics = Metrics("sqlite", 600.0, 10.0)
    metrics.know_type("email")
    metrics.depth.update(
        [("email", "pending", 1)], {"email": 0.0}, 0.0, ["email"], [("email", "tenant", 1, 0)]
    )
    metrics.on_scheduled([("nightly", "enqueued")])
    metrics.know_pool("email")
    metrics.on_workers({"email": ({WorkerState.IDLE: 1}, (1, 0))}, [1024])
    found = {}
    for family in metrics.registry.collect():
        labels = frozenset(key for sample in family.samples for key in sample.labels) - {"le"}
        found[family.name + SUFFIXES.get(family.type, "")] = (family.type, labels)
    return found


def documented_metrics() -> dict[str, tuple[str, frozenset[str]]]:
    text = (DOCS / "reference" / "metrics.md").read_text()
    rows = re.findall(r"^\| `(jobq_\w+)` \| (\w+) \|([^|]*)\|", text, re.MULTILINE)
    return {name: (kind, frozenset(re.findall(r"`(\w+)`", labels))) for name, kind, labels in rows}


def test_the_metrics_table_is_what_the_supervisor_registers() -> None:
    assert documented_metrics() == registered_metrics()


PYTHON_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_python_example_parses(page: Path) -> None:
    for number, block in enumerate(PYTHON_BLOCK.findall(page.read_text()), 1):
        try:
            ast.parse(block)
        except SyntaxError as error:
            pytest.fail(f"{page.name}: Python example {number}: {error}")


def test_the_api_page_documents_every_public_name() -> None:
    page = (DOCS / "reference" / "api.md").read_text()
    public = [name for name in jobq.__all__ if not name.startswith("__")]
    assert [name for name in public if f"<!-- generated: api {name} -->\n" not in page] == []


def test_a_guide_left_out_of_the_nav_still_joins_its_guides_section() -> None:
    # A guide merged from another branch before its line in mkdocs.yml must not fail the
    # strict build as a page outside the nav.
    config = load_config(str(REPO / "mkdocs.yml"))
    guides = next(item["Guides"] for item in config.nav or () if "Guides" in item)
    left_out = next(iter(guides.pop(0).values()))
    hooks.on_config(config)
    assert guides[-1] == left_out


SHELL_BLOCK = re.compile(r"^```(console|sh)[^\n]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def shown_commands(page: Path) -> list[str]:
    """The jobq and jobq-supervise commands a page shows: every line of an sh block, the
    `$ ` lines of a console block (the rest is output), without comments or a leading cd."""
    found = []
    for language, body in SHELL_BLOCK.findall(page.read_text()):
        for line in body.replace("\\\n", " ").splitlines():
            if language == "console" and not line.startswith("$ "):
                continue
            command = line.removeprefix("$ ").split(" #")[0].split("&&")[-1].strip()
            if re.match(r"jobq(-supervise)? ", command):
                found.append(command)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_command_shown_is_one_the_parsers_accept(page: Path) -> None:
    for command in shown_commands(page):
        program, *args = shlex.split(command)
        parser = supervise_parser() if program == "jobq-supervise" else build_parser()
        if program == "jobq-supervise" and args[:1] == ["ctl"]:
            parser, args = ctl_parser(), args[1:]
        refusal = io.StringIO()
        try:
            with contextlib.redirect_stderr(refusal):
                parser.parse_args(args)
        except SystemExit:
            pytest.fail(f"{page.name}: {command!r}: {refusal.getvalue().strip()}")


INLINE_COMMAND = re.compile(r"`jobq ([a-z][a-z-]*)")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_jobq_command_named_in_the_text_exists(page: Path) -> None:
    # The prose's `jobq install` once named a command that never existed (it is migrate).
    (subparsers,) = [
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    ]
    commands = set(subparsers.choices)
    named = set(INLINE_COMMAND.findall(page.read_text()))
    assert named - commands == set(), f"{page.name}: no such command"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_name_a_python_example_imports_from_jobq_exists(page: Path) -> None:
    for block in PYTHON_BLOCK.findall(page.read_text()):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "jobq":
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    assert hasattr(module, alias.name) or importlib.util.find_spec(
                        f"{node.module}.{alias.name}"
                    ), f"{page.name}: from {node.module} import {alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "jobq":
                        importlib.import_module(alias.name)
