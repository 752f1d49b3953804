"""jobq's log output: one filter keeps a DSN's password out of every line."""

from __future__ import annotations

import logging

import pytest

from jobq import logs

DSN = "postgresql://app:s3cret@db.internal/app"


@pytest.mark.parametrize("format", logs.FORMATS)
def test_no_log_line_carries_the_dsn_password(
    capsys: pytest.CaptureFixture[str], format: str
) -> None:
    # Configured here, not in a fixture: the handler keeps the stderr of its configuration,
    # and pytest captures each phase of a test on a stream of its own.
    logs.configure("INFO", format, dsn=DSN)
    log = logging.getLogger("jobq.worker")
    try:
        log.error("Worker cannot start: %s", f'connection to "{DSN}" failed')
        try:
            raise RuntimeError(f"invalid password in {DSN}")
        except RuntimeError:
            log.exception("Worker crashed")
    finally:
        logging.getLogger("jobq").handlers.clear()

    err = capsys.readouterr().err
    assert "Worker cannot start" in err
    assert "Worker crashed" in err
    assert "RuntimeError: invalid password in postgresql://app:***@db.internal/app" in err
    assert "s3cret" not in err
