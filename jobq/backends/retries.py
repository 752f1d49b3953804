"""How an operation on jobq's own connection is rerun after a transient error (a deadlock, a
lock timeout, a serialisation failure): how many tries, and how long to wait between them."""

from __future__ import annotations

import logging
import random

log = logging.getLogger("jobq")

TRIES = 5


def pause_to_retry(what: str, attempt: int, error: BaseException) -> float:
    """Log a transient error that the operation `what` will be rerun after, and return the
    seconds to wait first: a little longer each try, with jitter so that rivals part."""
    log.warning(
        "%s: transient database error, try %d of %d: %s",
        what,
        attempt,
        TRIES,
        error,
        extra={"event": "db_retry"},
    )
    return 0.02 * attempt + random.random() * 0.03
