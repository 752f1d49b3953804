"""The drain table: jobq against the SQL limit, the Python floor and each peer, per W."""

from __future__ import annotations

import math

from ..harness.context import Bench
from ..harness.results import Drain
from ..measures.latency import percentile


def fmt_rate(d: Drain | None) -> str:
    if d is None:
        return "-"
    text = f"{d.rate:,.0f}"
    return text + ("*" if not d.ok else "")


def ratio(a: Drain | None, b: Drain | None) -> str:
    if a is None or b is None or a.rate <= 0 or b.rate <= 0:
        return "-"
    return f"{a.rate / b.rate:.2f}"


def find(
    bench: Bench, system: str, variant: str, workers: int, database: str = "postgresql"
) -> Drain | None:
    for d in bench.drains:
        if (d.system, d.variant, d.workers, d.database) == (system, variant, workers, database):
            return d
    return None


def peers(bench: Bench) -> list[str]:
    seen: list[str] = []
    for d in bench.drains:
        if d.system not in ("jobq", "limit", "floor") and d.system not in seen:
            seen.append(d.system)
    return seen


def best_variant(bench: Bench, peer: str, workers: int) -> Drain | None:
    """The peer's tuned run at this W, or its default when the sweep found nothing better."""
    return find(bench, peer, "best", workers) or find(bench, peer, "default", workers)


def table_rows(bench: Bench) -> tuple[list[str], list[list[str]]]:
    header = ["W", "jobq jobs/s", "SQL limit", "jobq/limit", "limit, two statements"]
    header += ["psycopg floor", "jobq/floor"]
    for peer in peers(bench):
        header += [f"{peer} default", f"{peer} best", f"jobq/{peer}"]
        if any(d.system == peer and d.variant == "one at a time" for d in bench.drains):
            header += [f"{peer} 1 at a time", f"jobq/{peer} 1 at a time"]
    rows = []
    for w in bench.settings.workers:
        jq = find(bench, "jobq", "default", w)
        lim = find(bench, "limit", "pgbench", w)
        two = find(bench, "limit", "two statements", w)
        row = [str(w), fmt_rate(jq), fmt_rate(lim), ratio(jq, lim), fmt_rate(two)]
        low = find(bench, "floor", "psycopg", w)
        row += [fmt_rate(low), ratio(jq, low)]
        for peer in peers(bench):
            default = find(bench, peer, "default", w)
            best = find(bench, peer, "best", w)
            row += [fmt_rate(default), fmt_rate(best), ratio(jq, best_variant(bench, peer, w))]
            if any(d.system == peer and d.variant == "one at a time" for d in bench.drains):
                single = find(bench, peer, "one at a time", w)
                row += [fmt_rate(single), ratio(jq, single)]
        rows.append(row)
    return header, rows


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    out = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def print_table(bench: Bench) -> None:
    header, rows = table_rows(bench)
    print()
    print("Drain throughput on PostgreSQL (jobs/s; ratios are jobq divided by the other)")
    print(text_table(header, rows))
    others = [d for d in bench.drains if d.database != "postgresql"]
    if others:
        print()
        for d in others:
            print(f"jobq on {d.database}, {d.workers} workers: {fmt_rate(d)} jobs/s")
    for lat in bench.latencies:
        print(
            f"latency {lat.system}: p50 {ms(percentile(lat.samples, 50))}, "
            f"p99 {ms(percentile(lat.samples, 99))} ({len(lat.samples)} jobs)"
        )
    print("(* = did not drain cleanly; see RESULTS.md)")


def ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.1f} ms"
