"""The Python API reference, rendered from jobq's public names: each one's signature and
docstring, a dataclass's fields, an enum's members, and a class's documented methods, its
facets' included (the Queue is assembled from mixins, and a reader looks for enqueue on it).

Written into docs/reference/api.md by `python -m docs.generate`, so that the page reads the
same as plain Markdown on a code host as on the site."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import jobq

# pyproject.toml's line-length: ruff format also formats the Python blocks of Markdown files,
# so a stub is wrapped as it would wrap it, or the generated page would not stay as written.
WIDTH = 100


class Shown(str):
    """An annotation or a default as the source spells it: inspect quotes strings and shows
    an enum member's repr, neither of which a reader would write."""

    def __repr__(self) -> str:
        return str(self)


def shown_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return Shown(f"{type(value).__name__}.{value.name}")
    if isinstance(value, str):
        return Shown(json.dumps(value))  # double quotes, as ruff format writes them
    return value


def shown_parameter(parameter: inspect.Parameter) -> str:
    annotation = parameter.annotation
    return str(
        parameter.replace(
            annotation=annotation if annotation is parameter.empty else Shown(annotation),
            default=shown_default(parameter.default),
        )
    )


def parameter_texts(found: inspect.Signature) -> list[str]:
    """Each parameter as written, with the bare `*` and `/` that inspect adds only when it
    prints a whole signature."""
    listed = list(found.parameters.values())
    texts: list[str] = []
    starred = False
    for number, parameter in enumerate(listed):
        if parameter.kind is parameter.KEYWORD_ONLY and not starred:
            texts.append("*")
        starred = starred or parameter.kind in (parameter.VAR_POSITIONAL, parameter.KEYWORD_ONLY)
        texts.append(shown_parameter(parameter))
        following = listed[number + 1].kind if number + 1 < len(listed) else None
        if parameter.kind is parameter.POSITIONAL_ONLY and following is not parameter.kind:
            texts.append("/")
    return texts


def signature(
    name: str,
    call: Callable[..., Any],
    keyword: str = "def",
    leading: tuple[str, ...] = (),
    indent: int = 0,
) -> str:
    """A stub's line for `call` (`def name(...) -> ...: ...`), which parses as Python as
    every example on the site must, wrapped as ruff format wraps it when it runs long: the
    parameters on one line of their own if they fit there, else one a line."""
    found = inspect.signature(call)
    texts = [*leading, *parameter_texts(found)]
    returns = found.return_annotation
    tail = "" if returns in (found.empty, None, "None") else f" -> {returns}"
    joined = ", ".join(texts)
    line = f"{keyword} {name}({joined}){tail}: ..."
    if indent + len(line) <= WIDTH:
        return line
    if indent + 4 + len(joined) <= WIDTH:
        return f"{keyword} {name}(\n    {joined}\n){tail}: ..."
    body = "".join(f"    {text},\n" for text in texts)
    return f"{keyword} {name}(\n{body}){tail}: ..."


def class_stub(name: str, cls: type) -> str:
    """A class as a stub shows it: a dataclass by its fields, an enum, an exception or a
    protocol by its bases, any other class by its constructor."""
    if dataclasses.is_dataclass(cls):
        return f"@dataclass\nclass {name}:\n" + fields(cls)
    # A Protocol's __init__ is typing's, which refuses to make one: its bases say what it is.
    if issubclass(cls, enum.Enum | BaseException) or getattr(cls, "_is_protocol", False):
        bases = ", ".join(base.__name__ for base in cls.__bases__)
        return f"class {name}({bases}): ..."
    if cls.__init__ is object.__init__:
        return f"class {name}: ..."
    # inspect leaves self out of a class's signature; the stub's __init__ has it.
    init = signature("__init__", cls, leading=("self",), indent=4)
    return f"class {name}:\n" + textwrap.indent(init, "    ")


def code(text: str) -> str:
    return f"```python\n{text}\n```"


def documented_members(cls: type) -> Iterator[tuple[str, Any]]:
    """A class's public methods and properties that say what they do, its mixins' included,
    in the order of its source (its own first, then each base's)."""
    seen: set[str] = set()
    for owner in cls.__mro__:
        if not owner.__module__.startswith("jobq"):
            continue
        for name, member in vars(owner).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            function = member.__func__ if isinstance(member, classmethod | staticmethod) else member
            if (callable(function) or isinstance(member, property)) and inspect.getdoc(member):
                yield name, member


def member_stub(name: str, member: Any) -> str:
    for kind in (classmethod, staticmethod, property):
        if isinstance(member, kind):
            inner = member.fget if isinstance(member, property) else member.__func__
            return f"@{kind.__name__}\n{member_stub(name, inner)}"
    keyword = "async def" if inspect.iscoroutinefunction(member) else "def"
    return signature(name, member, keyword)


def member_section(owner: str, name: str, member: Any) -> str:
    return f"#### `{owner}.{name}`\n\n{code(member_stub(name, member))}\n\n{inspect.getdoc(member)}"


def fields(cls: type) -> str:
    """A dataclass's fields, as its class body declares them."""
    lines = []
    for each in dataclasses.fields(cls):
        if each.default is not dataclasses.MISSING:
            default = f" = {shown_default(each.default)!r}"
        elif each.default_factory is not dataclasses.MISSING:
            factory: Any = each.default_factory
            default = f" = field(default_factory={factory.__name__})"
        else:
            default = ""
        lines.append(f"    {each.name}: {each.type}{default}\n")
    return "".join(lines).rstrip("\n")


def members_table(cls: type[enum.Enum]) -> str:
    rows = ["| member | value |", "|---|---|"]
    rows += [f"| `{member.name}` | `{member.value!r}` |" for member in cls]
    return "\n".join(rows)


def api_reference(name: str | None) -> str:
    """One public name of jobq, as the API page shows it."""
    if name is None or name not in jobq.__all__:
        raise ValueError(f"jobq has no public name {name!r}")
    obj = getattr(jobq, name)
    parts = [f"### `jobq.{name}`"]
    keyword = "async def" if inspect.iscoroutinefunction(obj) else "def"
    stub = class_stub(name, obj) if isinstance(obj, type) else signature(name, obj, keyword)
    parts.append(code(stub))
    # A class's own docstring only: one inherited from StrEnum or Exception says nothing of it.
    own = obj.__doc__ if not isinstance(obj, type) else vars(obj).get("__doc__")
    parts.append(inspect.cleandoc(own or ""))
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        parts.append(members_table(obj))
    if isinstance(obj, type) and not issubclass(obj, enum.Enum | BaseException):
        parts += [member_section(name, *member) for member in documented_members(obj)]
    return "\n\n".join(part for part in parts if part)
