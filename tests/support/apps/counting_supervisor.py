"""jobq-supervise with its depth work counted (see count_depth_work), for the metrics tests.

Run as `python -m counting_supervisor` (the tests put this folder on PYTHONPATH): the master
never imports --app, so the counting has to be set up in the master's own entry point.
"""

from __future__ import annotations

import os
import sys

import jobq
from jobq.cli.commands import supervise_main


def count_depth_work(path: str) -> None:
    """Append "request" to `path` for every depth reading the master asks its housekeeper
    for, and "read" for every one the housekeeper makes.

    Applied in the master before it forks its helpers, so the housekeeper inherits the
    patch. A request is written before the master's scrape answers, so once a scrape's reply
    is in, its request (if it made one) is counted: no waiting on the master.
    """
    from functools import wraps

    from jobq import protocol
    from jobq.supervisor import forking, helpers, housekeeper

    send = helpers.Helpers.send
    depth = housekeeper.depth

    def tally(word: str) -> None:
        with open(path, "a") as file:  # one O_APPEND write per line, as journal() does
            file.write(word + "\n")

    @wraps(send)
    def counting_send(
        self: helpers.Helpers, process: forking.Forked, message: protocol.Message | None
    ) -> bool:
        if isinstance(message, protocol.MeasureDepth):
            tally("request")
        return send(self, process, message)

    @wraps(depth)
    def counting_depth(connection: jobq.Queue) -> protocol.Depth:
        tally("read")
        return depth(connection)

    helpers.Helpers.send = counting_send  # type: ignore[method-assign]
    housekeeper.depth = counting_depth


if __name__ == "__main__":
    count_depth_work(os.environ["SUPERVISED_APP_DEPTH_LOG"])
    sys.exit(supervise_main())
