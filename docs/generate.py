"""The reference pages' generated parts, written into the Markdown files themselves.

A reference written by hand drifts from the code, and one rendered only when the site is built
reads as bare markers on a code host. So each generated part sits in its page between
`<!-- generated: what [argument] -->` and `<!-- end generated -->`, and
`python -m docs.generate` rewrites what lies between them from the declarations: the option
tables (jobq/options.py), every command's --help, the schema as a fresh SQLite database holds
it, and the Python API (docs/api_reference.py). `--check` writes nothing and exits 1 when a
page is stale; tests/unit/test_docs.py and tests/integration/test_docs_site.py fail then too.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

from jobq import backends, options
from jobq.cli.commands import build_parser
from jobq.cli.ctl import ctl_parser
from jobq.cli.supervise import supervise_parser

from .api_reference import api_reference

DOCS = Path(__file__).resolve().parent
START = re.compile(r"^<!-- generated: (?P<what>[\w-]+)(?: (?P<arg>[\w-]+))? -->$", re.MULTILINE)
REGION = re.compile(
    START.pattern[:-1] + r"\n(?P<body>.*?)^<!-- end generated -->$", re.MULTILINE | re.DOTALL
)
END = "<!-- end generated -->"
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


def options_table(command: str | None) -> str:
    """The option table of one command, or of all the others, from jobq/options.py."""
    command = command or "supervise"
    names = [c for c in subcommands() if c not in OWN_TABLE] if command == "others" else [command]
    declared: dict[str, options.Option] = {}
    for name in names:
        for option in parser_for(name).get_default("options"):
            declared.setdefault(option.name, option)
    return markdown_table(list(declared.values()))


def markdown_table(declared: Sequence[options.Option]) -> str:
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
    "options": options_table,
    "cli": cli_reference,
    "schema": schema_reference,
    "api": api_reference,
}
# Rendering the schema migrates a database: what a test without one must leave alone.
NEEDS_DATABASE = frozenset({"schema"})
# argparse lays --help out differently from one Python to the next (3.13 wraps a usage line
# elsewhere), so the command-line page is rendered on one: the oldest jobq supports, which
# is what ./scripts/test's .venv runs. On any other, that part is not compared.
RENDERED_ON = (3, 11)


def differs_here() -> frozenset[str]:
    """The parts this Python would render otherwise than the pages hold."""
    return frozenset() if sys.version_info[:2] == RENDERED_ON else frozenset({"cli"})


def regenerate(markdown: str, skip: frozenset[str] = frozenset()) -> str:
    """The page with each generated part rendered afresh (but those named in `skip`)."""
    unclosed = len(START.findall(markdown)) - len(REGION.findall(markdown))
    if unclosed:
        raise ValueError(f"{unclosed} generated part(s) without their {END!r} line")

    def one(match: re.Match[str]) -> str:
        what = match["what"]
        if what not in GENERATORS:
            raise ValueError(f"unknown marker {what!r}: known are {sorted(GENERATORS)}")
        if what in skip:
            return match[0]
        start = match[0].partition("\n")[0]
        return f"{start}\n\n{GENERATORS[what](match['arg'])}\n\n{END}"

    return REGION.sub(one, markdown)


def pages() -> list[Path]:
    """The pages that hold a generated part."""
    return sorted(path for path in DOCS.rglob("*.md") if START.search(path.read_text()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m docs.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    check = parser.parse_args(argv).check
    left = differs_here()
    if left:
        python = ".".join(map(str, RENDERED_ON))
        print(f"left as they are, rendered on Python {python} only: {', '.join(sorted(left))}")
    stale = []
    for path in pages():
        text = path.read_text()
        fresh = regenerate(text, skip=left)
        if fresh != text:
            stale.append(path.relative_to(DOCS.parent))
            if not check:
                path.write_text(fresh)
    for path in stale:
        print(f"{'stale' if check else 'rewrote'}: {path}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
