"""What a soak run is made of: its options, its settings, and its jobs' lengths."""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass

WORKERS = 4
SUPERVISORS = 2
# The longest job; the drain must leave room for one started at the last moment to be
# killed, wait out its lease and run again.
LONGEST = 19.0
LEASE = 6.0
# Past the nominal --seconds, how long a run that has not drained yet may go on draining.
DRAIN_GRACE = 2 * LONGEST
# This share of the jobs does its work in a subprocess, which must die with its attempt:
# half of them started from a thread, half by a coroutine through asyncio.
SUBPROCESS_SHARE = 0.1
# Each worker runs this many attempts at once (--concurrency), and this share of the jobs
# are coroutines on its event loop, a third of which hand their work to a thread; the rest
# run in its threads.
CONCURRENCY = 4
COROUTINE_SHARE = 0.45
# Attempts running longer than this are stopped (--job-timeout): only the jobs the
# `overrun` fault enqueues, run once each, for OVERRUN seconds.
JOB_TIMEOUT = LONGEST + 6.0
OVERRUN = 2 * JOB_TIMEOUT
# Jobs are enqueued this many to a transaction.
BATCH = 20
# Shares of the jobs longer than two leases, and of a second or two (the rest: milliseconds).
LONG_SHARE = 0.005
MEDIUM_SHARE = 0.03
SHORTEST_RUN = 30.0


@dataclass
class Options:
    jobs: int
    seconds: float
    seed: int
    keep: bool


def parse(argv: list[str] | None, description: str) -> Options:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=description)
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs to run (default 10000)")
    parser.add_argument(
        "--seconds", type=float, default=600.0, help="nominal length of the run (default 600)"
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--keep", action="store_true", help="keep the logs and journal")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.seconds < SHORTEST_RUN:
        parser.error("--jobs must be at least 1 and --seconds at least 30")
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    return Options(args.jobs, args.seconds, seed, args.keep)


def lengths(count: int, rng: random.Random) -> list[float]:
    """Most jobs a few milliseconds; 3 % up to 2 s; 0.5 % longer than two leases, in the
    first half of the run so that they can finish."""
    found = []
    for i in range(count):
        draw = rng.random()
        if draw < LONG_SHARE and i < count / 2:
            found.append(rng.uniform(13.0, LONGEST))
        elif draw < LONG_SHARE + MEDIUM_SHARE:
            found.append(rng.uniform(0.3, 2.0))
        else:
            found.append(rng.uniform(0.0, 0.02))
    if not any(length > 2 * LEASE for length in found):
        found[count // 10] = 15.0
    return found
