"""The types a worker's claims name.

Most workers claim fixed types: their pool's or --type's, or every type when given none. A
worker of the `*` pool claims every type no other pool names, which no list fixed at start
can say: a type may exist only in the rows (`enqueue(job, type=...)`, a Django Tasks queue
name). Nor may it claim every type and skip the other pools' rows: the backlog that a pool
fences off would then be walked over by every claim. So it names the types that have ready
jobs, less the other pools', as the per-type skip scan of the ready index finds them
(Queue.oldest_ready: a few index probes per type and priority, however deep the backlogs),
and each of its claims walks the typed ready index, as a --type worker's does.

The list is read again before a claim once a claim of it came back empty (the worker idles,
and a new type may be what it waits for) and, while busy, once it is a poll interval old:
a new type's jobs wait about that long at most behind the types already listed, or behind
one attempt of a process worker that has started its job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping

from ..queue import Queue

log = logging.getLogger("jobq")


def every_other(ready: Mapping[str, object], others: Collection[str]) -> tuple[str, ...]:
    """The types with ready jobs (`ready`'s keys) that no other pool names, in order."""
    return tuple(sorted(name for name in ready if name not in others))


class ClaimTypes:
    def __init__(
        self,
        types: tuple[str, ...],
        others: tuple[str, ...],
        every: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`types` as given (empty: every type); `others`, when this is a `*` pool's
        worker, the types the other pools name; `every`, the longest a list is kept."""
        self.fixed = None if others else types
        self.others = frozenset(others)
        self.every = every
        self.clock = clock
        self.listed: tuple[str, ...] = ()
        self.read_at: float | None = None  # None: read it before the next claim

    def now(self, queue: Queue, busy: bool = False) -> tuple[str, ...] | None:
        """The types the next claim names, read again first if due. None: claim nothing
        (an empty tuple would claim every type). A read that fails raises, unless the
        worker is `busy` with an attempt to run or acknowledge: that must not be lost to a
        list, so it claims nothing, and its acknowledgement meets the connection's fault."""
        if self.fixed is not None:
            return self.fixed
        if self.due():
            try:
                ready = queue.oldest_ready()
            except Exception as error:
                if not busy:
                    raise
                log.warning(
                    "Could not read which types have ready jobs (%s): no claim this time",
                    error,
                    extra={"event": "types_failed"},
                )
                return None
            self.listed = every_other(ready, self.others)
            # Nothing ready: the next look reads again, as after an empty claim.
            self.read_at = self.clock() if self.listed else None
        return self.listed or None

    def due(self) -> bool:
        """Whether the next claim reads the list again first."""
        if self.fixed is not None:
            return False
        return self.read_at is None or self.clock() - self.read_at >= self.every

    def claimed(self, asked: int, got: int) -> None:
        """A claim of up to `asked` jobs brought `got`: none, and the list is read again."""
        if asked and not got:
            self.read_at = None
