"""The concurrent worker (--concurrency N): up to N attempts at once in one process, on an
asyncio event loop. `async def handle` jobs run as tasks on the loop, plain `def handle` jobs
in a pool of N threads; each attempt has its own claim, token, lease and fence row.

- slots.py: the N slots, and the fence row each running attempt holds;
- inflight.py: each attempt in flight, one object keyed by its token;
- attempts.py: how one attempt's code runs, as a task or in a thread;
- handoff.py: the threads and processes a coroutine hands work to, traced to its attempt;
- leftovers.py: the processes an ended attempt left running, killed before its outcome;
- loop.py: the worker's loop: claim for free slots, acknowledge in batches, drain, recycle.
"""
