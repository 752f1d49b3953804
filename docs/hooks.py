"""MkDocs hooks: the pages made from the code and from files kept outside docs/.

A reference written by hand drifts from the code; these are rendered at every build from the
declarations themselves, so `mkdocs build --strict` (run by ./scripts/test) is their check.
A page asks for one with a marker line such as `<!-- generated: options supervise -->`; a
marker this module does not know fails the build.

The README (the home page), the changelog, the architecture notes and the benchmark results
stay where their writers keep them and are served as pages of the site, not copied into docs/.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from jobq import backends, options
from jobq.cli.commands import build_parser
from jobq.cli.ctl import ctl_parser
from jobq.cli.supervise import supervise_parser

ROOT = Path(__file__).resolve().parents[1]
# Served as pages of the site, from where they live: site path -> repository path.
OUTSIDE = {
    "changelog.md": "CHANGELOG.md",
    "architecture.md": "ARCHITECTURE.md",
    "benchmarks.md": "bench/RESULTS.md",
    "throughput.png": "bench/throughput.png",  # RESULTS.md's chart, beside it as there
}
# The README is the site's home page: its links into docs/ and to the files above become the
# site's own.
HOME_LINKS = {"](docs/": "](", **{f"]({source})": f"]({page})" for page, source in OUTSIDE.items()}}
MARKER = re.compile(r"^<!-- generated: (?P<what>[\w-]+)(?: (?P<arg>[\w-]+))? -->$", re.MULTILINE)
# Wide enough that --help lines wrap as a reader's terminal would, the same on every machine.
HELP_COLUMNS = "100"


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """`jobq`'s commands by name, in the order `jobq --help` lists them."""
    parser = build_parser()
    found = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(found.choices)


def parser_for(command: str) -> argparse.ArgumentParser:
    return supervise_parser() if command == "supervise" else subcommands()[command]


# The commands whose options have a table of their own; "others" is every other command's.
OWN_TABLE = ("supervise", "work", "web")


def options_table(command: str) -> str:
    """The option table of one command, or of all the others, from jobq/options.py."""
    names = [c for c in subcommands() if c not in OWN_TABLE] if command == "others" else [command]
    declared: dict[str, options.Option] = {}
    for name in names:
        for option in parser_for(name).get_default("options"):
            declared.setdefault(option.name, option)
    return markdown_table(list(declared.values()))


def markdown_table(declared: Sequence[options.Option]) -> str:
    """An option table of the documentation site."""
    rows = ["| option | environment | default | meaning |", "|---|---|---|---|"]
    for each in declared:
        unit = {"seconds": " (s)", "MiB": " (MiB)"}.get(each.unit, "")
        if each.choices:
            unit = f": {', '.join(each.choices)}"
        rows.append(
            f"| `{each.flag}` | `{each.variable}` | {each.default_text()} | {each.help}{unit} |"
        )
    return "\n".join(rows)


@contextmanager
def help_width() -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def cli_reference(_: str | None) -> str:
    """Every command's --help, as the command prints it."""
    parsers = {
        "jobq-supervise": supervise_parser(),
        "jobq-supervise ctl": ctl_parser(),
        "jobq": build_parser(),
    }
    parsers.update({f"jobq {name}": sub for name, sub in subcommands().items()})
    sections = []
    with help_width():
        for name, parser in parsers.items():
            sections.append(f"## `{name}`\n\n```text\n{parser.format_help().rstrip()}\n```")
    return "\n\n".join(sections)


def schema_reference(_: str | None) -> str:
    """The tables and indexes `jobq migrate` creates, as an SQLite database holds them."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "jobq.sqlite3"
        backend = backends.connect(f"sqlite:///{path}")
        try:
            version = backend.install()[1]
        finally:
            backend.close()
        with closing(sqlite3.connect(path)) as db:
            rows = db.execute(
                "SELECT sql FROM sqlite_master WHERE name LIKE 'jobq%' AND sql IS NOT NULL"
                " ORDER BY type DESC, name"
            ).fetchall()
    statements = ";\n\n".join(row[0] for row in rows)
    return f"Schema version {version}:\n\n```sql\n{statements};\n```"


GENERATORS: dict[str, Callable[[str | None], str]] = {
    "options": lambda command: options_table(command or "supervise"),
    "cli": cli_reference,
    "schema": schema_reference,
}


def expand(markdown: str) -> str:
    def one(match: re.Match[str]) -> str:
        what = match["what"]
        if what not in GENERATORS:
            raise ValueError(f"unknown marker {match[0]!r}: known are {sorted(GENERATORS)}")
        return GENERATORS[what](match["arg"])

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return expand(markdown)


def home_page() -> str:
    """The README, with its links made the site's."""
    text = (ROOT / "README.md").read_text()
    for link, site_link in HOME_LINKS.items():
        text = text.replace(link, site_link)
    return text


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for site_path, source in OUTSIDE.items():
        files.append(File.generated(config, site_path, abs_src_path=str(ROOT / source)))
    files.append(File.generated(config, "index.md", content=home_page()))
    return files


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Guides left out of the nav join its Guides section, after those listed: a guide
    added beside the others is on the site without an edit to mkdocs.yml."""
    guides: list[Any] = next(item["Guides"] for item in config.nav or () if "Guides" in item)
    # An entry is `Title: path`, or a bare path whose page names itself.
    listed = {entry if isinstance(entry, str) else next(iter(entry.values())) for entry in guides}
    for path in sorted(Path(config.docs_dir, "guides").glob("*.md")):
        if f"guides/{path.name}" not in listed:
            guides.append(f"guides/{path.name}")
    return config
