"""Pools of workers, as `jobq-supervise --pool TYPES:WORKERS[:CONCURRENCY]` declares them.

A pool is a set of job types with workers of its own, so that a backlog of one kind of work
cannot take every worker from another. The master keeps each pool at its size; the pools
share its renewer, housekeeper and fence table. `*` stands for every type no other pool
names: its workers claim the types that have ready jobs, less the others' (see
worker/claim_types.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .job import check_type_name

EVERY_OTHER = "*"
# What a pool with no --pool looks like: --workers and --concurrency, and --type (or every
# type). Its name is its types, as any pool's.
SHAPE = "TYPES:WORKERS[:CONCURRENCY]"


@dataclass(frozen=True)
class PoolSpec:
    types: tuple[str, ...]  # empty: every type (no other pool names)
    workers: int
    concurrency: int = 1
    # The types other pools name, which a `*` pool leaves to them.
    others: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """How logs, titles, metric labels and `ctl --pool` name it: its types as given."""
        return ",".join(self.types) or EVERY_OTHER

    @property
    def spec(self) -> str:
        return f"{self.name}:{self.workers}:{self.concurrency}"


def parse_pool(text: str, most_concurrency: int) -> PoolSpec:
    """The pool `text` declares; ValueError naming it and what is wrong otherwise."""
    parts = text.strip().split(":")
    if len(parts) not in (2, 3):  # types:workers, and maybe :concurrency
        raise ValueError(f"pool {text!r}: give it as {SHAPE}, e.g. email,sms:2 or '*:1:50'")
    names = [name.strip() for name in parts[0].split(",")]
    if not any(names):
        raise ValueError(f"pool {text!r} names no job type: give some, or * for every other")
    names = [name for name in names if name]
    if EVERY_OTHER in names and len(names) > 1:
        raise ValueError(f"pool {text!r}: * already takes every type no other pool names")
    for name in names:
        if name != EVERY_OTHER:
            try:
                check_type_name(name)
            except ValueError as error:
                raise ValueError(f"pool {text!r}: {error}") from None
    workers = whole(text, "workers", parts[1], 1, None)
    concurrency = whole(text, "concurrency", parts[2], 1, most_concurrency) if parts[2:] else 1
    types = () if names == [EVERY_OTHER] else tuple(dict.fromkeys(names))
    return PoolSpec(types, workers, concurrency)


def whole(text: str, what: str, given: str, least: int, most: int | None) -> int:
    try:
        number = int(given)
    except ValueError:
        raise ValueError(f"pool {text!r}: {what} must be a whole number, got {given!r}") from None
    if number < least or (most is not None and number > most):
        bound = f"from {least} to {most}" if most is not None else f"at least {least}"
        raise ValueError(f"pool {text!r}: {what} must be {bound}, got {number}")
    return number


def conflict(pools: Sequence[PoolSpec]) -> str | None:
    """What makes these pools a bad set: a type in two pools, or two `*` pools."""
    every = [pool for pool in pools if not pool.types]
    if len(every) > 1:
        return "two pools take every other type (*): give * to one pool only"
    seen: dict[str, PoolSpec] = {}
    for pool in pools:
        for name in pool.types:
            first = seen.setdefault(name, pool)
            if first is not pool:
                return (
                    f"pools {first.name!r} and {pool.name!r} both name type {name!r}: "
                    "give each type to one pool"
                )
    return None


def completed(pools: Sequence[PoolSpec]) -> tuple[PoolSpec, ...]:
    """The pools, each `*` pool told which types the others name."""
    named = tuple(name for pool in pools for name in pool.types)
    return tuple(
        pool if pool.types else PoolSpec((), pool.workers, pool.concurrency, named)
        for pool in pools
    )
