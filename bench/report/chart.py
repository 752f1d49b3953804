"""bench/throughput.png: jobs/s against workers for every system the run drained."""

from __future__ import annotations

import os
from pathlib import Path

from ..harness.context import Bench
from ..measures import prefetch
from .tables import find, peers


def plot(bench: Bench, path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install .[bench]): no plot"
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    series: list[tuple[str, str, str, str]] = [
        ("jobq", "default", "jobq-supervise", "o-"),
        ("limit", "pgbench", "SQL limit (pgbench, jobq's ack + next claim statement)", "k--"),
        ("limit", "two statements", "pgbench, claim then ack (two statements)", "k:"),
        ("floor", "psycopg", "psycopg alone, jobq's statement (Python floor)", "x-."),
    ]
    # The prefetch section's drains: typed workers on jobs enqueued in bursts, its own count.
    bursts = f"{bench.settings.prefetch_jobs:,} jobs in bursts"
    series += [
        ("jobq", prefetch.ONE_AT_A_TIME, f"jobq --type a --prefetch 1 ({bursts})", "o:"),
        ("jobq", prefetch.FIXED, f"jobq --type a --prefetch 10 ({bursts})", "D-"),
        ("jobq", "prefetch adaptive", f"jobq --type a, adaptive prefetch ({bursts})", "v-"),
    ]
    for peer in peers(bench):
        series += [
            (peer, "default", f"{peer} (defaults)", "s:"),
            (peer, "best", f"{peer} (best)", "^-."),
        ]
    for system, variant, label, style in series:
        points = [
            (w, d.rate)
            for w in bench.settings.workers
            if (d := find(bench, system, variant, w)) is not None and d.rate > 0
        ]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(bench.settings.workers, [str(w) for w in bench.settings.workers])
    ax.set_xlabel("workers (processes) / pgbench clients")
    ax.set_ylabel("jobs per second (log scale)")
    # Log scale: the batching peers run an order of magnitude above the others.
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.set_title(
        f"Drain of {bench.settings.jobs:,} no-op jobs, PostgreSQL, {os.cpu_count()} cores (shared)"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return ""
