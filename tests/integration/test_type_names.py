"""Job types, and keys, that differ only in case or in trailing spaces are different types on
every database: a pool's claims, pauses, limits and counts keep them apart. MariaDB compared
them case-insensitively and space-padded until its identifiers took a binary collation without
padding, in a migration that keeps the rows it finds."""

from __future__ import annotations

import pytest

import jobq
from jobq.backends import connect
from jobq.worker.claim_types import ClaimTypes
from tests.integration.test_schema_upgrade import install_up_to
from tests.support.jobs import Limited, Noop

NAMES = ("email", "EMAIL", "email ", "Email")


def claimed_types(queue: jobq.Queue, types: list[str]) -> list[str]:
    claims = queue.claim_many(10, types)
    return sorted(claim.type for claim in claims)


def test_types_apart_in_case_or_spaces_are_counted_claimed_and_paused_apart(
    queue: jobq.Queue,
) -> None:
    for name in NAMES:
        queue.enqueue(Noop(), type=name)
    assert {name: row["pending"] for name, row in queue.counts_by_type().items()} == dict.fromkeys(
        NAMES, 1
    )
    # A pool's worker reads the types with ready jobs, then claims by them.
    assert sorted(ClaimTypes((), ("other",), 1.0).now(queue) or ()) == sorted(NAMES)
    assert queue.pause("EMAIL")
    assert queue.paused() == {"EMAIL"}
    assert claimed_types(queue, ["email"]) == ["email"]
    assert claimed_types(queue, ["EMAIL", "email "]) == ["email "]
    assert claimed_types(queue, []) == ["Email"]  # every type, the paused one left
    assert queue.resume("EMAIL")
    assert claimed_types(queue, ["EMAIL"]) == ["EMAIL"]


def test_a_limit_set_on_one_type_leaves_its_look_alikes_alone(queue: jobq.Queue) -> None:
    # Two at once per account, as Limited declares; overridden to one for "limited" alone.
    for name in ("limited", "LIMITED", "limited "):
        queue.enqueue_many([Limited("acme"), Limited("acme")], type=name)
    queue.set_limit("limited", 1)
    assert claimed_types(queue, ["limited"]) == ["limited"]
    assert claimed_types(queue, ["LIMITED"]) == ["LIMITED", "LIMITED"]
    assert claimed_types(queue, ["limited "]) == ["limited ", "limited "]
    overrides = {row.type: row.override for row in queue.limits()}
    assert overrides == {"limited": 1, "LIMITED": None, "limited ": None}


@pytest.mark.databases("mariadb")  # the version before the binary collation, rows and all
def test_the_upgrade_keeps_look_alike_rows_and_then_keeps_them_apart(dsn: str) -> None:
    backend = connect(dsn)
    try:
        install_up_to(backend, len(backend.migrations) - 1)
    finally:
        backend.close()
    with jobq.Queue.connect(dsn) as queue:
        ids = {name: queue.enqueue(Noop(), type=name) for name in NAMES}
        queue.install()
        for name, job_id in ids.items():
            record = queue.get(job_id)
            assert record is not None
            assert (record.type, record.status) == (name, "pending")
        assert claimed_types(queue, ["email"]) == ["email"]
