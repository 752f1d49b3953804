"""The Job base class and the registry of classes a codec may decode into."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any, ClassVar

from .limits import Concurrency
from .retry import RetryPolicy

_registry: dict[str, type[Job]] = {}
# The class_name and type columns are VARCHAR(255) in MySQL: a longer name would fail every
# enqueue.
LONGEST_NAME = 255


class Job:
    """Subclass this and implement handle(); instance attributes are the job's payload.

    Defining a subclass registers it under `job_name` (its module and qualified name unless the
    class sets one), which is how a decoder finds it again without importing anything itself.
    """

    type: ClassVar[str] = "default"
    retry: ClassVar[RetryPolicy | None] = None
    # At most so many attempts of one key at once (see jobq/limits.py).
    concurrency: ClassVar[Concurrency | None] = None
    job_name: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("job_name") or f"{cls.__module__}.{cls.__qualname__}"
        if not isinstance(name, str):
            raise TypeError(f"{cls.__qualname__}.job_name must be a str, got {name!r}")
        if "<locals>" in name:
            raise TypeError(
                f"{name}: job classes must be defined at module level (or set job_name) "
                "so that workers can find them by name"
            )
        if len(name) > LONGEST_NAME:
            raise TypeError(f"{name[:60]}...: job_name must be at most 255 characters")
        cls.job_name = name
        _registry[name] = cls

    def handle(self) -> Any:
        """Do the job. What it returns is stored as the job's result (see
        docs/guides/results.md): JSON values, or what the queue's codec encodes."""
        raise NotImplementedError(f"{type(self).job_name} does not implement handle()")

    def to_state(self) -> dict[str, Any]:
        """What is stored: the instance attributes. Override together with from_state."""
        return dict(vars(self))

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Job:
        """Rebuild an instance without calling __init__, as pickle would, but from plain data.

        State lacking a field that __init__ requires was written for another version of the
        class: refused here, rather than failing later as an AttributeError inside handle().
        """
        missing = [name for name in required_fields(cls) if name not in state]
        if missing:
            raise TypeError(f"missing field(s) {', '.join(missing)} that __init__ requires")
        job = cls.__new__(cls)
        job.__dict__.update(state)
        return job


_required: dict[type[Job], tuple[str, ...]] = {}


def required_fields(cls: type[Job]) -> tuple[str, ...]:
    """The parameters of cls.__init__ that have no default (none when it takes **kwargs)."""
    if cls not in _required:
        _required[cls] = _init_parameters_without_default(cls)
    return _required[cls]


def _init_parameters_without_default(cls: type[Job]) -> tuple[str, ...]:
    if cls.__init__ is object.__init__:
        return ()
    try:
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return ()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return ()
    return tuple(
        p.name
        for p in parameters
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


def check_runnable_elsewhere(cls: type[Job]) -> None:
    """Refuse a class that only the enqueueing script has: a worker imports the app by
    module name, never the script that ran as `__main__`, so every attempt would fail."""
    if cls.job_name.startswith("__main__."):
        raise TypeError(
            f"{cls.__qualname__} is defined in the script being run (__main__), which no "
            "worker can import: move it into a module and give that module to the workers "
            "with --app (or set job_name and define the class in the workers' app too)"
        )


def registered(name: str) -> type[Job] | None:
    return _registry.get(name)


# Types served though no class has them as its own: the queues of a Django Tasks backend,
# whose one job class takes each task's queue as its type (see declare_types).
_declared_types: set[str] = set()


def declare_types(names: Iterable[str]) -> None:
    """Make these job types known as a class's are (registered_types): for an application
    whose jobs take their type at enqueue, what it will enqueue."""
    for name in names:
        check_type_name(name)
        _declared_types.add(name)


def registered_types() -> set[str]:
    """The job types of every registered class, and those declared (declare_types)."""
    # jobq's own classes (a gather's `then` job) take the type of the job enqueueing them.
    own = {cls.type for cls in _registry.values() if not getattr(cls, "untyped", False)}
    return own | _declared_types


def check_type_name(name: object) -> None:
    if not isinstance(name, str) or not name or len(name) > LONGEST_NAME:
        raise ValueError(f"a job type must be a non-empty string of up to 255 characters: {name!r}")
    # Every database must store it as it is: none takes a NUL, none stores a lone surrogate.
    if "\x00" in name or (not name.isascii() and not encodable(name)):
        raise ValueError(f"a job type must be text without NUL bytes or lone surrogates: {name!r}")


def encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
