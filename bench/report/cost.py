"""Issue 36's targets for the cost of a short job, judged on one run's drains at W = 8.

On two shared cores a drain is bound by CPU, so each verdict comes with the CPU per job of
both sides: where a rate target is missed, that split says where the rest of the time went.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..harness.results import Drain
from ..measures.prefetch import find, pgq_best

WORKERS = 8
PEER_SHARE = 0.7  # jobq's default against pgqueuer's best setting
CLIENT_MS = 0.08  # client CPU per job, master and helpers included
DATABASE_MS = 0.06  # PostgreSQL CPU per job
FLOOR_SHARE = 0.8  # `--prefetch 1` against the psycopg floor

DEFAULT = ("jobq", "default")
ONE_AT_A_TIME = ("jobq", "prefetch 1")
FLOOR = ("floor", "psycopg")


def verdict(met: bool) -> str:
    return "**met**" if met else "**MISSED**"


def cpu(d: Drain) -> str:
    """Client (master) and PostgreSQL CPU per job, as the drain tables give them."""
    return (
        f"client {d.per_job_ms(d.client_cpu)} ({d.per_job_ms(d.master_cpu)}), "
        f"PostgreSQL {d.per_job_ms(d.db_cpu)} ms/job"
    )


def per_job(d: Drain, seconds: float | None) -> float | None:
    if seconds is None or d.window_jobs == 0:
        return None
    return seconds / d.window_jobs * 1000


def share(name: str, target: float, mine: Drain, other: Drain) -> str:
    got = mine.rate / other.rate
    return (
        f"- {name} >= {target:g}x at W = {WORKERS}: {mine.rate:,.0f} against "
        f"{other.rate:,.0f} jobs/s, {got:.2f}x: {verdict(got >= target)}. CPU: jobq "
        f"{cpu(mine)}; {other.system} {cpu(other)}"
    )


def ceiling(name: str, target: float, value: float | None) -> str | None:
    if value is None:
        return None
    return f"- {name} <= {target:g} ms at W = {WORKERS}: {value:.3f}: {verdict(value <= target)}"


def targets(drains: Sequence[Drain]) -> list[str]:
    """Each of the four targets this run measured, with its verdict."""
    lines: list[str | None] = []
    default, peer = find(drains, *DEFAULT, WORKERS), pgq_best(drains, WORKERS)
    if default is not None and default.rate > 0:
        if peer is not None and peer.rate > 0:
            lines.append(share("jobq's default against pgqueuer's best", PEER_SHARE, default, peer))
        lines.append(ceiling("client CPU per job, jobq's default", CLIENT_MS,
                             per_job(default, default.client_cpu)))  # fmt: skip
        lines.append(ceiling("PostgreSQL CPU per job, jobq's default", DATABASE_MS,
                             per_job(default, default.db_cpu)))  # fmt: skip
    one, floor = find(drains, *ONE_AT_A_TIME, WORKERS), find(drains, *FLOOR, WORKERS)
    if one is not None and floor is not None and one.rate > 0 and floor.rate > 0:
        lines.append(share("`--prefetch 1` against the psycopg floor", FLOOR_SHARE, one, floor))
    return [line for line in lines if line is not None]


def markdown(drains: Sequence[Drain]) -> list[str]:
    found = targets(drains)
    if not found:
        return []
    return [
        "## Targets (issue 36)",
        "",
        "The cost of a short job, judged within this run. jobq's default is the drain "
        "section's; `--prefetch 1` is the prefetch section's, against the psycopg floor of "
        "the limit section (the same statement in a bare loop). CPU per job: client (its "
        "master), then PostgreSQL.",
        "",
        *found,
        "",
    ]
