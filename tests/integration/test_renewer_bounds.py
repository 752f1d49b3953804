"""The renewer's statements are bounded on the server: one that waits on a row lock gives up
after about the renewal timeout by itself, instead of running on after its round was given
up (and the renewer killed), holding the locks it already took."""

from __future__ import annotations

import threading

import pytest

import jobq
from tests.support.drivers import connect, lock_job_row
from tests.support.jobs import Noop

pytestmark = pytest.mark.lease(60)


@pytest.mark.databases("postgresql", "mariadb")
def test_a_renewal_blocked_on_a_row_lock_gives_up_on_the_server(
    queue: jobq.Queue, dsn: str, db_kind: str
) -> None:
    queue.enqueue(Noop())
    claim = queue.claim()
    assert claim is not None
    with jobq.Queue.connect(dsn, lease_duration=60) as renewer:
        renewer.backend.bound_statements(1.0)
        holder = connect(dsn, db_kind, autocommit=True)
        try:
            lock_job_row(holder, db_kind, claim.id)
            outcome: list[BaseException | set[int]] = []

            def renew() -> None:
                try:
                    outcome.append(renewer.renew_many([(claim.id, claim.token)]))
                except Exception as error:
                    outcome.append(error)

            thread = threading.Thread(target=renew, daemon=True)
            thread.start()
            # Far longer than the bound: without it the UPDATE would wait for the lock (on
            # PostgreSQL, for ever; on MariaDB, 50 s by default).
            thread.join(20)
            assert outcome, "the blocked renewal was still waiting: its statement is unbounded"
            assert isinstance(outcome[0], Exception), outcome
        finally:
            holder.rollback()
            holder.close()
        # The bound does not get in the way of a renewal that can proceed.
        renewer.backend.rollback_quietly()
        assert renewer.renew_many([(claim.id, claim.token)]) == {claim.id}
