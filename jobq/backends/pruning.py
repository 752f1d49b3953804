"""What the job cleaner reads (retention.py, `jobq prune`): the finished jobs of one status,
oldest first. The schema version here indexes them by (status, finished_at), so that a prune
batch is one ordered range of the index, from its oldest end to the retention's cutoff or
the batch's LIMIT, and the oldest finished job is the first entry of four ranges. The older
index on finished_at alone orders every status together: the planners read it beside the
status index (jobq_jobs_by_status) and sorted, or, on MariaDB, left it for the whole table,
so that each run read every finished row.
"""

from __future__ import annotations

from .workflows import ENDINGS

# PostgreSQL and SQLite: only finished rows, which pending and running ones never touch.
PARTIAL_INDEX = (
    "CREATE INDEX jobq_jobs_pruning ON jobq_jobs (status, finished_at) "
    "WHERE finished_at IS NOT NULL",
)
# MySQL and MariaDB have no partial indexes: the whole table's rows, NULL ends first.
INDEX = ("CREATE INDEX jobq_jobs_pruning ON jobq_jobs (status, finished_at)",)

# The earliest finished_at of any ended job: a LIMIT 1 probe of the index per status, from
# the first entry of its range (min() over an IN list reads every entry on MariaDB, and a
# min() SQLite does not see as non-NULL skips the partial index).
OLDEST_FINISHED_AT = "(SELECT min(oldest) FROM ({probes}) AS ends)".format(
    probes=" UNION ALL ".join(
        f"SELECT (SELECT finished_at FROM jobq_jobs WHERE status = {status} "
        "AND finished_at IS NOT NULL ORDER BY finished_at LIMIT 1) AS oldest"
        for status in ENDINGS.split(", ")
    )
)
