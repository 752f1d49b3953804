"""The profile keeps the samples taken below a worker's loop."""

from __future__ import annotations

from pathlib import Path

from . import profiling


def test_profile_summary_keeps_worker_loop_samples_only(tmp_path: Path) -> None:
    master = 'process 1:"jobq-supervise: master 2/2 workers [all types] running"'
    worker = 'process 2:"jobq-supervise: worker job 7 noop bench.Noop 0s"'
    loop = "Child.work (jobq/worker/child.py:85)"
    claim, begin = 30, 10  # a worker's samples in each stack; the master's 50 are not counted
    raw = tmp_path / "raw.txt"
    raw.write_text(
        "\n".join(
            [
                f"{master};Master.tick (jobq/supervisor/master.py:149) 50",
                f"{master};{worker};{loop};Queue.claim (jobq/queue/__init__.py:237);"
                f"Cursor.execute (/x/site-packages/psycopg/cursor.py:97) {claim}",
                f"{master};{worker};{loop};Child.begin (jobq/worker/child.py:122) {begin}",
            ]
        )
    )
    total, self_top, inclusive, outside = profiling.summarize(raw)
    assert total == claim + begin
    assert self_top[0] == ("Cursor.execute (psycopg/cursor.py)", 0.75)
    assert ("Queue.claim (jobq/queue/__init__.py)", 0.75) in inclusive
    assert outside == [("Child.begin (jobq/worker/child.py)", 0.25)]
