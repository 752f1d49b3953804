"""The package's wings import only downwards, as ARCHITECTURE.md draws them, and no module
imports one that imports it back.

Read from the source with ast, so an import inside a function or under TYPE_CHECKING counts
as much as one at the top: each is an arrow a reader has to follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "jobq"

DOMAIN = "domain"  # the modules at jobq/'s top level: Job, RetryPolicy, codecs, records...
# What each wing may import besides itself. The command line sits on top and may import
# anything, so it has no entry.
ALLOWED = {
    DOMAIN: set(),
    "backends": {DOMAIN},
    "schedules": {DOMAIN, "backends"},
    "queue": {DOMAIN, "backends", "schedules"},
    "worker": {DOMAIN, "backends", "queue", "schedules"},
    "supervisor": {DOMAIN, "backends", "queue", "schedules", "worker"},
    "web": {DOMAIN, "backends", "queue", "schedules"},
    "contrib": {DOMAIN, "backends", "queue", "schedules", "web"},  # mounts the status page
    "testing": {DOMAIN, "backends", "queue", "schedules"},
    "demo": {DOMAIN, "backends", "queue", "schedules", "testing"},
}
# The facade (`import jobq`) re-exports the Queue and the schedule decorator; the __main__
# modules are what `python -m` runs, and run the command line.
UNCHECKED = {"jobq", "jobq.__main__", "jobq.supervisor.__main__"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def wing(module: str) -> str | None:
    """The wing a module of jobq belongs to; None for the facade itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    return parts[1] if (PACKAGE / parts[1]).is_dir() else DOMAIN


def imported(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every jobq module (or name in one) that `source`, the text of `module`, imports, with
    its line."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            found += [(node.lineno, f"{source}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.startswith("jobq.")]


def arrows_up() -> list[str]:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        own = wing(module)
        if module in UNCHECKED or own is None or own not in ALLOWED:
            continue
        for line, name in imported(path.read_text(), module, path.name == "__init__.py"):
            theirs = wing(name)
            if theirs is not None and theirs != own and theirs not in ALLOWED[own]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}")
    return wrong


def test_every_wing_imports_only_the_wings_below_it() -> None:
    assert arrows_up() == []


def modules_imported() -> dict[str, set[str]]:
    """Each module of jobq, and the modules of jobq it imports (a name imported from a module
    counts as that module; a package's own __init__ is not followed up)."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        names = imported(path.read_text(), module, path.name == "__init__.py")
        targets = {name if name in paths else name.rpartition(".")[0] for _, name in names}
        graph[module] = {target for target in targets if target in paths} - {module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Paths that lead from a module back to itself, one for each module on a circle."""
    found = []
    for start in sorted(graph):
        paths = [[start]]
        seen = {start}
        while paths:
            path = paths.pop()
            for target in sorted(graph[path[-1]]):
                if target == start:
                    found.append([*path, start])
                    paths = []
                    break
                if target not in seen:
                    seen.add(target)
                    paths.append([*path, target])
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    # Inside functions and under TYPE_CHECKING too: a circle there still means two modules
    # that cannot be read, or moved, one without the other.
    assert circles(modules_imported()) == []


def test_a_circle_is_found_however_long() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert circles(graph) == [["a", "b", "c", "a"], ["b", "c", "a", "b"], ["c", "a", "b", "c"]]


@pytest.mark.parametrize(
    ("wing_name", "forbidden"),
    [
        (DOMAIN, "supervisor"),
        (DOMAIN, "worker"),
        ("worker", "supervisor"),
        ("backends", "queue"),
        ("backends", "supervisor"),
        ("backends", "worker"),
        ("backends", "cli"),
        ("supervisor", "cli"),
    ],
)
def test_the_rules_the_issue_names_are_among_them(wing_name: str, forbidden: str) -> None:
    assert forbidden not in ALLOWED[wing_name]


def test_the_check_sees_an_import_that_points_up() -> None:
    # As the worker would write it, inside a function: it counts as much as one at the top.
    source = "import os\n\n\ndef f() -> None:\n    from ..supervisor import master\n"
    assert imported(source, "jobq.worker.fence", is_package=False) == [
        (5, "jobq.supervisor.master")
    ]
    assert wing("jobq.supervisor.master") not in ALLOWED["worker"]
    assert wing("jobq.lease_clock") == DOMAIN
