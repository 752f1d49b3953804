"""A fan-out and fan-in workflow, and a batch, run by two real supervisors while workers
are SIGKILLed inside jobs and then one whole supervisor is: the history checker finds no
overlapping attempts and no lost job, every job completes, no dependent started before
every parent's completing attempt had ended, and the batch's `then` ran once, last."""

from __future__ import annotations

import random
import signal
from pathlib import Path
from typing import Any

import jobq
from chaos.observe import Deaths, Observer
from jobq.testing.history import read_journal
from tests.support.apps.chaos_app import Chaos
from tests.support.faults import (
    all_completed,
    doomed_and_survivor,
    judged,
    kill_busy_workers,
    kill_inside_a_job,
    records_of,
)
from tests.support.waiting import wait_for

FAN_OUT = 24
TAIL = 6


def workflow(dsn: str, journal: str, rng: random.Random) -> tuple[list[int], dict[int, list[int]]]:
    """Fan-out (FAN_OUT jobs), fan-in (one job after all of them), fan-out again (TAIL jobs
    after it), fan-in (one after those), and a batch beside them. Returns every id, and each
    dependent's parents."""
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        parents: dict[int, list[int]] = {}
        # Every third a second or so: the kills find workers inside jobs.
        lengths = [rng.uniform(0.5, 1.2) if i % 3 == 0 else 0.02 for i in range(FAN_OUT)]
        first = queue.enqueue_many([Chaos(seconds, journal) for seconds in lengths])
        join = queue.enqueue(Chaos(0.5, journal), after=first)
        tail = queue.enqueue_many([Chaos(0.3, journal) for _ in range(TAIL)], after=[join])
        last = queue.enqueue(Chaos(0.01, journal), after=tail)
        parents |= {join: first, last: tail} | {each: [join] for each in tail}
        with queue.batch(then=Chaos(0.01, journal)) as batch:
            # One long member, still running when the supervisor is killed.
            lengths = [1.0] * 5 + [4.0]
            members = batch.enqueue_many([Chaos(seconds, journal) for seconds in lengths])
        parents[batch.id] = members
        return [*first, join, *tail, last, *members, batch.id], parents


def first_start(entries: list[dict[str, Any]], job: int) -> float:
    return min(float(e["mono"]) for e in entries if e["event"] == "start" and e["job"] == job)


def last_end(entries: list[dict[str, Any]], job: int) -> float:
    return max(float(e["mono"]) for e in entries if e["event"] == "end" and e["job"] == job)


def test_a_workflow_survives_killed_workers_and_a_killed_supervisor(
    dsn: str, tmp_path: Path
) -> None:
    rng = random.Random(31)
    journal = tmp_path / "journal"
    ids, parents = workflow(dsn, str(journal), rng)
    observer = Observer(dsn)
    with Deaths() as deaths, doomed_and_survivor(dsn, deaths) as (doomed, survivor):
        kill_busy_workers(observer, journal, deaths, [doomed, survivor], rng, kills=2, every=2)
        kill_inside_a_job(doomed, deaths, journal, at_least=0.2)
        wait_for("every job to complete", lambda: all_completed(observer, len(ids)), 90)
        survivor.signal(signal.SIGTERM)
        assert survivor.wait(30) == 0, survivor.log
        records = records_of(observer, ids)
        judged(journal, deaths, records)
    observer.close()

    entries = read_journal(journal)
    for child, its_parents in parents.items():
        started = first_start(entries, child)
        assert all(last_end(entries, parent) < started for parent in its_parents), child
    runs_of_then = [e for e in entries if e["event"] == "start" and e["job"] == ids[-1]]
    assert len(runs_of_then) == 1
