"""How a worker never outlives its lease, whatever happens to its master or its own GIL.

- PR_SET_PDEATHSIG: the kernel kills a worker when the master dies (and the fence keeper
  then kills whatever the worker's job started).
- The fence table: anonymous shared memory, mapped before any fork, one slot per attempt a
  worker may run at once (one, or --concurrency N). The worker writes the attempt it holds,
  that attempt's lease end and since when; the master writes each extension it confirms,
  and reads the worker's section to learn which queued attempt started (no message says so:
  see worker/reports.py). The fence keeper, a process of its own, kills the whole
  attempt when the later of the two (for the same job and token) is about to pass. Nothing
  here needs the worker's GIL, a timer or a signal of the job's: a job that holds the GIL
  for longer than its lease runs on while the master renews it, and jobs may use SIGALRM.

Each slot has one section per writer, so no two processes ever write the same bytes. A
section is a seqlock: the writer makes its counter odd, writes, and makes it even again; a
reader that sees an odd or changed counter discards what it read, and the keeper then goes
on with the last whole value it read, which was vouched for too. Erring that way can only
bring a fence earlier, never miss one; the master reads again on its next pass. (CPython
gives no memory barriers; x86 keeps one writer's stores in order as other cores see them,
and one reader's loads in order, which is what the seqlock relies on.)
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import signal
import struct
import sys
from dataclasses import dataclass
from functools import lru_cache

PR_SET_PDEATHSIG = 1

# seq, pid, job id, token key, lease end (CLOCK_MONOTONIC, absolute), since when (the same
# clock; the worker's section only: when its attempt started, which the master reads).
SECTION = struct.Struct("qqqqdd")
SEQ = struct.Struct("q")
SECTIONS = ("worker", "master", "keeper")
SLOT_SIZE = 192
# The table's header: how many slots are, or were, in use; and whether workers may claim
# (0) or must wait (1: the master cannot renew leases, and a new claim would only be fenced).
HEADER = struct.Struct("qq")
WORD = struct.Struct("q")
IN_USE, PAUSED = 0, WORD.size
TORN_RETRIES = 100

assert SECTION.size * len(SECTIONS) <= SLOT_SIZE


def die_with(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when `parent_pid` (our parent) goes away."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    # The parent may have died before prctl took effect: then we were reparented already.
    if os.getppid() != parent_pid:
        os._exit(1)


# A worker keys each attempt's token at least twice (its fence slot, then its settling
# mark), and the master each lease's as it follows and renews it: the hash was 2.7% of a
# worker's Python CPU with short jobs. Bounded: tokens are never reused.
@lru_cache(maxsize=4096)
def token_key(token: str) -> int:
    """A claim token as one signed 64-bit word: what the table and the mark compare."""
    digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True) or 1


@dataclass(frozen=True)
class Hold:
    """What a section says: worker `pid` holds (job, token key) until `expires` (and, in the
    worker's section, has since `since`)."""

    pid: int
    job: int
    token: int
    expires: float
    since: float = 0.0

    def same_attempt(self, other: Hold | None) -> bool:
        return other is not None and (self.job, self.token) == (other.job, other.token)


EMPTY = Hold(0, 0, 0, 0.0)


class Section:
    """One writer's part of a slot."""

    def __init__(self, memory: mmap.mmap, offset: int) -> None:
        self.memory = memory
        self.offset = offset

    def write(self, hold: Hold) -> None:
        self.put(hold.pid, hold.job, hold.token, hold.expires, hold.since)

    def put(self, pid: int, job: int, token: int, expires: float, since: float) -> None:
        """write() from the fields: a worker fences every attempt it starts, and building a
        Hold for each was a third of the cost."""
        memory, offset = self.memory, self.offset
        odd = SEQ.unpack_from(memory, offset)[0] | 1
        SEQ.pack_into(memory, offset, odd)
        SECTION.pack_into(memory, offset, odd, pid, job, token, expires, since)
        SEQ.pack_into(memory, offset, odd + 1)

    def read(self) -> Hold | None:
        """The section's value, or None if every try raced a write."""
        for _ in range(TORN_RETRIES):
            seq, *fields = SECTION.unpack_from(self.memory, self.offset)
            if seq % 2 == 0 and SEQ.unpack_from(self.memory, self.offset)[0] == seq:
                return Hold(*fields)
        return None

    def left(self) -> tuple[Hold, bool]:
        """What a writer that is gone left here, and whether it finished writing it. If it
        died mid-write, each word holds its old value or its new one (aligned 8-byte stores
        are whole on x86-64 and arm64), so the job id is the old attempt's or the new one's."""
        seq, *fields = SECTION.unpack_from(self.memory, self.offset)
        return Hold(*fields), seq % 2 == 0


class Slot:
    """A worker's slot: its own section, the master's extensions, the keeper's kills."""

    def __init__(self, memory: mmap.mmap, index: int) -> None:
        self.index = index
        self.memory = memory
        base = HEADER.size + index * SLOT_SIZE
        self.worker, self.master, self.keeper = (
            Section(memory, base + i * SECTION.size) for i in range(len(SECTIONS))
        )

    def claims_paused(self) -> bool:
        """Whether the master asks its workers to claim nothing for now."""
        return bool(WORD.unpack_from(self.memory, PAUSED)[0])

    def clear(self) -> None:
        """Only for a slot whose worker is gone: the worker section is not the master's."""
        for section in (self.worker, self.master, self.keeper):
            section.write(EMPTY)


class FenceTable:
    """The shared table; allocate() and release() belong to the master alone."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.memory = mmap.mmap(-1, HEADER.size + capacity * SLOT_SIZE)
        self.free = list(range(capacity - 1, -1, -1))

    def allocate(self) -> Slot | None:
        rows = self.allocate_many(1)
        return None if rows is None else rows[0]

    def allocate_many(self, count: int) -> list[Slot] | None:
        """`count` cleared slots for one worker, or None if fewer are free."""
        if len(self.free) < count:
            return None
        slots = [Slot(self.memory, self.free.pop()) for _ in range(count)]
        for slot in slots:
            slot.clear()
        in_use = WORD.unpack_from(self.memory, IN_USE)[0]
        highest = max(slot.index for slot in slots)
        WORD.pack_into(self.memory, IN_USE, max(in_use, highest + 1))
        return slots

    def pause_claims(self, paused: bool) -> None:
        """Ask every worker to claim nothing (True), or to claim again (False). One word,
        written by the master alone: a worker reads it before each claim."""
        WORD.pack_into(self.memory, PAUSED, int(paused))

    def release(self, slot: Slot) -> None:
        slot.clear()
        self.free.append(slot.index)

    def slots(self) -> list[Slot]:
        """Every slot that is or was in use (for the keeper)."""
        in_use = min(WORD.unpack_from(self.memory, IN_USE)[0], self.capacity)
        return [Slot(self.memory, index) for index in range(in_use)]
