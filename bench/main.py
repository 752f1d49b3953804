"""`python -m bench`: the whole benchmark in one run (see bench/README.md)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from types import FrameType

from .harness.context import SECTIONS, Bench, Settings
from .harness.procs import Processes
from .report import tables, writer
from .sections import run

HERE = Path(__file__).resolve().parent

# The W that also drains with jobq's default INFO logging, when the run drains at it.
INFO_LOGS_WORKERS = 8


def worker_list(text: str) -> list[int]:
    values = sorted({int(x) for x in text.split(",") if x.strip()})
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError("a comma-separated list of positive worker counts")
    return values


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="jobq's benchmark: drain throughput against the SQL limit and the peers, "
        "pickup latency, renewal cost, and MariaDB/SQLite drains, on private servers.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes, fewer worker counts (about 2 minutes)"
    )
    parser.add_argument("--jobs", type=int, help="jobs per PostgreSQL drain (default 50,000)")
    parser.add_argument("--workers", type=worker_list, help="worker counts (default 1,2,4,8,16)")
    parser.add_argument("--only", help=f"comma-separated sections: {', '.join(SECTIONS)}")
    parser.add_argument("--skip", help="comma-separated sections to leave out")
    parser.add_argument(
        "--scale-large",
        type=int,
        help="the large backlog of the scale section on PostgreSQL (default 1,000,000; "
        "100,000 on MariaDB and SQLite, or this if smaller)",
    )
    parser.add_argument(
        "--horizon-rounds",
        type=int,
        help="rounds drained behind a held snapshot in the horizon section (default 10)",
    )
    parser.add_argument(
        "--horizon-jobs", type=int, help="jobs per round of the horizon section (default 20,000)"
    )
    parser.add_argument(
        "--horizon-backlog",
        type=int,
        default=0,
        help="the horizon section again beside this many pending jobs of another type "
        "(the issue's 1,000,000; default: left out)",
    )
    parser.add_argument(
        "--horizon-finished",
        type=int,
        default=0,
        help="the horizon section again after this many jobs run to completion "
        "(the issue's 3,000,000; default: left out)",
    )
    parser.add_argument(
        "--out", type=Path, default=HERE, help="where RESULTS.md and throughput.png go (bench/)"
    )
    parser.add_argument(
        "--jobq-at",
        metavar="COMMIT",
        help="measure jobq/ as it was at this commit (bench/ stays the work tree's): a before "
        "for a before and after; RESULTS.md names it",
    )
    parser.add_argument(
        "--profile-prefetch",
        type=int,
        metavar="N",
        help="profile workers run with --prefetch N (1: one job at a time) instead of jobq's "
        "default",
    )
    parser.add_argument(
        "--keep-tmp", action="store_true", help="keep the temp dir with every process's log"
    )
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    quick = bool(args.quick)
    sections = set(SECTIONS)
    if quick:
        sections.discard("profile")  # slow, and pointless at quick sizes; --only profile works
    if args.only:
        sections = {s.strip() for s in args.only.split(",")}
    if args.skip:
        sections -= {s.strip() for s in args.skip.split(",")}
    unknown = sections - set(SECTIONS)
    if unknown:
        raise SystemExit(f"unknown section(s): {', '.join(sorted(unknown))}")
    workers = args.workers or ([2, 8] if quick else [1, 2, 4, 8, 16])
    return Settings(
        jobs=args.jobs or (5000 if quick else 50_000),
        workers=workers,
        other_jobs=1000 if quick else 10_000,
        mariadb_workers=[2] if quick else [1, 2, 4, 8],
        sqlite_workers=[2] if quick else [1, 2, 4],
        latency_rate=20.0,
        latency_seconds=5.0 if quick else 10.0,
        latency_workers=4,
        master_jobs=16,
        master_job_seconds=15.0 if quick else 30.0,
        master_window=8.0 if quick else 20.0,
        sections=sections,
        out=args.out,
        quick=quick,
        info_logs_at=INFO_LOGS_WORKERS if INFO_LOGS_WORKERS in workers else None,
        scale_small=2000 if quick else 10_000,
        scale_large=args.scale_large or (50_000 if quick else 1_000_000),
        scale_other_large=min(args.scale_large or 100_000, 20_000 if quick else 100_000),
        scale_measured=2000 if quick else 10_000,
        scale_enqueue_jobs=20_000 if quick else 100_000,
        prefetch_jobs=3000 if quick else 20_000,
        prefetch_kills=1 if quick else 3,
        io_jobs=3000 if quick else 10_000,
        horizon_jobs=args.horizon_jobs or (5000 if quick else 20_000),
        horizon_rounds=args.horizon_rounds or (3 if quick else 10),
        horizon_backlog=args.horizon_backlog,
        horizon_finished=args.horizon_finished,
        jobq_at=args.jobq_at,
        profile_prefetch=args.profile_prefetch,
    )


def on_signal(signum: int, frame: FrameType | None) -> None:
    # TERM and HUP stop the run as Ctrl-C does, so the finally blocks stop every server.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    settings = settings_from(args)
    tmp = Path(tempfile.mkdtemp(prefix="jobq-bench-"))
    bench = Bench(settings, tmp, Processes(tmp))
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    load_before = os.getloadavg()
    command = "python -m bench" + (" " + shlex.join(argv if argv is not None else sys.argv[1:]))
    code = 0
    bench.say(f"jobq bench: {', '.join(sorted(settings.sections))}; logs in {tmp}")
    try:
        run(bench)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping everything", file=sys.stderr)
        code = 130
    except Exception:
        traceback.print_exc()
        code = 1
    finally:
        # Ignore a second Ctrl-C while stopping: leaving servers behind is worse.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        bench.procs.stop_all()
        if bench.mariadb is not None:
            bench.mariadb.stop()
        if bench.pg is not None:
            bench.pg.stop()
        if bench.sqlite_dir is not None:
            shutil.rmtree(bench.sqlite_dir, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if code == 0:
        tables.print_table(bench)
        path = writer.write(bench, load_before, command.strip())
        print(f"\nwrote {path} and {path.with_name('throughput.png')}")
    if args.keep_tmp or code != 0:
        print(f"logs kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return code
