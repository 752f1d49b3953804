"""The `jobq-supervise` command line: its options, the timing rule its help explains, and the
master it starts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import options
from ..backends import for_dsn
from ..backends.naming import name_process, of_this_host
from ..dsn import default_dsn, scrub
from ..errors import JobqError
from ..lease_clock import FENCE_LEAD, RENEW_RETRY_PAUSE
from ..pool_specs import SHAPE, conflict
from ..supervisor.config import TIMING_RULE, SupervisorConfig, fitted_timing
from ..supervisor.master import Master
from .closed_stdout import quiet_on_closed_stdout
from .commands import Parser, parse
from .title import hide_secrets

# The one-pool form's options, which --pool replaces.
ONE_POOL = {"types", "workers", "concurrency"}


def timing_rule() -> str:
    low = {o.name: f"{o.minimum:g} s" for o in options.RENEWAL}
    return f"""
timing rule, checked at start:
  {TIMING_RULE}
A renewal round runs every --renew-interval; one that fails or takes longer than
--renew-timeout is retried once after {RENEW_RETRY_PAUSE:g} s. A worker whose lease can no longer
be renewed in time gets SIGTERM, then SIGKILL --kill-grace later (fences act {FENCE_LEAD:g} s
early), and is dead --safety-margin before its lease ends.
Minimums: interval {low["renew_interval"]}, timeout {low["renew_timeout"]}, grace \
{low["kill_grace"]}, margin {low["safety_margin"]}.
When --lease is given without them, those four are fitted to it: every lease the
minimums allow starts.

signals: TERM/INT drain (a second one stops at once), QUIT stops at once, HUP replaces
the workers one at a time with freshly imported code, TTIN/TTOU add or remove a worker
(of the only pool; with several, `jobq-supervise ctl ttin|ttou POOL` names the pool).
"""


def supervise_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="jobq-supervise",
        description="Run a pool of worker processes whose leases this master renews, "
        "killing any worker whose lease cannot be renewed in time.",
        epilog=timing_rule(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options.add(parser, options.SUPERVISOR)
    parser.set_defaults(options=options.SUPERVISOR)
    return parser


def check_pools(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--pool is one way to size the workers, --type/--workers/--concurrency the other."""
    if not args.pools:
        return
    mixed = sorted(ONE_POOL & args.explicit)
    if mixed:
        flags = ", ".join(options.BY_NAME[name].flag for name in mixed)
        parser.error(
            f"--pool cannot be combined with {flags}: give each pool's types, workers and "
            f"concurrency as --pool {SHAPE}"
        )
    clash = conflict(args.pools)
    if clash is not None:
        parser.error(f"--pool: {clash}")


@quiet_on_closed_stdout
def main(argv: Sequence[str] | None = None) -> int:
    hide_secrets("jobq-supervise", argv)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["ctl"]:
        # Imported here, not above: the master has no use for its own client.
        from . import ctl

        return ctl.main(argv[1:])
    parser = supervise_parser()
    args = parse(parser, argv)
    name_process(of_this_host("jobq supervisor"))
    check_pools(parser, args)
    dsn = args.dsn or default_dsn()
    settings = {o.name: getattr(args, o.name) for o in options.SUPERVISOR}
    fitted = fitted_timing(args.lease)
    settings.update({n: v for n, v in fitted.items() if n not in args.explicit})
    del settings["log_level"], settings["log_format"]
    given = {"dsn": dsn, "types": tuple(args.types or ()), "pools": tuple(args.pools or ())}
    config = SupervisorConfig(**{**settings, **given})
    if not sys.platform.startswith("linux"):
        # pidfds and PR_SET_PDEATHSIG, which fencing stands on, are Linux's alone.
        print(
            f"jobq-supervise: needs Linux, not {sys.platform}; elsewhere run `jobq work`, "
            "which does not renew leases",
            file=sys.stderr,
        )
        return 2
    try:
        for_dsn(dsn)  # here, not in every worker it would fork
        return Master(config).run()
    except JobqError as error:
        print(f"jobq-supervise: {scrub(str(error), dsn)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
