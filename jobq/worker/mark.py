"""The settling mark: two words of memory a worker shares with its master.

Before a worker records an attempt's outcome it writes the attempt (job id and token key)
here, and clears it once it has reported the outcome. A renewal round that finds the attempt
gone meanwhile reads the mark: a settling attempt runs no job code any more, and was most
likely just acknowledged, so its worker is left alone instead of being killed as if it had
lost its lease.

A message would do the same, but it would cost the worker and the master a send, a wake-up
and a decode for every job, to be read only when a round and an acknowledgement cross.
"""

from __future__ import annotations

import mmap
import struct

from .fence import token_key

WORDS = struct.Struct("qq")


class SettlingMark:
    def __init__(self) -> None:
        # Anonymous and shared: made before the fork, the same page in both processes.
        self.memory = mmap.mmap(-1, WORDS.size)

    def set(self, job_id: int, token: str) -> None:
        WORDS.pack_into(self.memory, 0, job_id, token_key(token))

    def clear(self) -> None:
        WORDS.pack_into(self.memory, 0, 0, 0)

    def settling(self, job_id: int, token: str) -> bool:
        """Whether this attempt is being settled. A read that raced a write can see parts of
        both values; they match no attempt, and the master then errs on the side of fencing."""
        return WORDS.unpack_from(self.memory, 0) == (job_id, token_key(token))

    def close(self) -> None:
        self.memory.close()
