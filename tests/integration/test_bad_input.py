"""Bad input refused by the queue itself: a job type not every database can store, a MySQL
DSN whose character set cannot carry every character."""

from __future__ import annotations

import pytest

import jobq
from tests.support.apps.chaos_app import Chaos
from tests.support.jobs import Boom

ONCE = jobq.RetryPolicy(max_attempts=1)


@pytest.mark.parametrize("name", ["nul\x00", "lone \ud800"], ids=["nul", "surrogate"])
def test_a_type_name_not_every_database_can_store_is_refused_at_enqueue(
    dsn: str, name: str
) -> None:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        with pytest.raises(ValueError, match="a job type must be"):
            queue.enqueue(Chaos(0, "/dev/null"), type=name)


@pytest.mark.parametrize("charset", ["utf8", "utf8mb3", "latin1"])
def test_a_mysql_dsn_whose_charset_cannot_carry_every_character_is_refused(
    mariadb_dsn: str, charset: str
) -> None:
    # With charset=utf8, an error holding a 4-byte character could not be written: the
    # attempt's end was lost, and its job waited out its lease.
    with pytest.raises(jobq.ConfigurationError) as refused:
        jobq.Queue.connect(f"{mariadb_dsn}?charset={charset}")
    message = str(refused.value)
    assert f"charset={charset}" in message
    assert "drop charset from the DSN, or give charset=utf8mb4" in message


def test_a_failure_holding_a_four_byte_character_is_recorded_on_mariadb(
    mariadb_dsn: str,
) -> None:
    for dsn in (mariadb_dsn, f"{mariadb_dsn}?charset=UTF8MB4"):
        with jobq.Queue.connect(dsn) as queue:
            queue.install()
            job_id = queue.enqueue(Boom("card declined \N{GRINNING FACE}"), retry=ONCE)
            assert queue.process_jobs(1, type=Boom.type) == 1
            record = queue.get(job_id)
        assert record is not None
        assert record.status == "failed"
        assert "card declined \N{GRINNING FACE}" in (record.last_error or "")
